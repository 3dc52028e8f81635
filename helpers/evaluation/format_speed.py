"""How fast the book's engine runs a model in each number format on this machine: the model loaded in float32 and in
bfloat16, the same greedy decodes of the same prompts in each, the prompt pass and the decode timed apart.

One copy of the measurement, read by `python -m helpers bench dtype` (which records it for `dtype: auto`) and by the
appendix on number formats (which states what its build's machine measured). It always decodes: no stored record
is read, so a time is never the time of reading one.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass

from helpers.core.contention import Window
from helpers.models.precision import FORMATS


@dataclass(frozen=True)
class FormatSpeed:
    """One format's timings at one row count (seconds; tokens per second)."""

    prompt_seconds: float  # the prompt pass, which also draws the first token
    prompt_tokens_per_s: float
    decode_seconds: float  # the decode after it: the extra tokens' time
    decode_tokens_per_s: float | None  # None: the decode took less than the timings' noise
    seconds: float  # the whole decode, prompts included
    tokens_per_s: float


@dataclass(frozen=True)
class SpeedTable:
    """Both formats' timings of one model, per row count."""

    model: str
    max_new_tokens: int
    by_rows: dict[int, dict[str, FormatSpeed]]
    others: float | None = None  # the share of the cores other processes used while it timed (None: unknown)

    def ratio(self, rows: int, what: str = "decode") -> float | None:
        """bfloat16's rate over float32's at `rows` rows, for `what`: 'decode', 'prompt' or 'whole'."""
        key = {"decode": "decode_tokens_per_s", "prompt": "prompt_tokens_per_s", "whole": "tokens_per_s"}[what]
        a, b = (getattr(self.by_rows[rows][d], key) for d in ("bfloat16", "float32"))
        return round(a / b, 3) if a and b else None

    def whole_rates(self) -> dict[str, float]:
        """Each format's whole-decode rate at the largest row count, prompts included, as a chapter's decode pays
        it (what `dtype: auto` chooses by)."""
        return {d: self.by_rows[max(self.by_rows)][d].tokens_per_s for d in FORMATS}


def check_counts(rows: Sequence[int] | int, max_new_tokens: int) -> list[int]:
    """The row counts as a list, or a ValueError that says what to pass."""
    from helpers.core.checks import is_count

    counts = [rows] if isinstance(rows, int) else list(rows)
    if not counts or not all(is_count(n, 1) for n in counts) or not is_count(max_new_tokens, 2):
        raise ValueError(f"--problems must be row counts of at least 1 (e.g. 16,64,128) and --max-new-tokens an "
                         f"integer of at least 2, got {rows!r} and {max_new_tokens!r}")
    return counts


def time_formats(model_name: str, rows: Sequence[int] | int = (32,), max_new_tokens: int = 32,
                 shots: int = 2) -> SpeedTable:
    """`time_model` for `model_name` loaded in each format in turn, with the largest share of the cores that other
    processes used while either format was timed (`helpers.core.contention`)."""
    from helpers.models.loading import load_model

    counts = check_counts(rows, max_new_tokens)
    by_format, shares = {}, []
    for dtype in FORMATS:
        model = load_model(model_name, dtype=dtype)
        with Window() as window:
            by_format[dtype] = time_model(model.module, model.tokenizer, counts, max_new_tokens, shots)
        shares.append(window.others)
        del model
    others = None if None in shares else max(shares)
    return SpeedTable(model_name, max_new_tokens, {n: {d: by_format[d][n] for d in FORMATS} for n in counts}, others)


def time_model(model, tokenizer, counts: Sequence[int], max_new_tokens: int = 32, shots: int = 2
               ) -> dict[int, FormatSpeed]:
    """For each row count, decode that many arithmetic prompts greedily with a loaded model, twice: for one new
    token (the prompt pass) and for exactly `max_new_tokens` (no stop tokens: the same work in every format); the
    decode's rate is the extra tokens over the extra time. Two prompts decode untimed first, so that thread pools
    and kernel choices stay out of the timings."""
    import torch

    from helpers.data.arithmetic import arithmetic_problems
    from helpers.data.prompts import build_prompt
    from helpers.samplers.plain import decode

    counts = check_counts(list(counts), max_new_tokens)
    pool = arithmetic_problems(max(counts) // 7 + 1)
    prompts = [build_prompt(tokenizer, p.question, shots=shots) for p in pool][:max(counts)]
    with torch.inference_mode():
        decode(model, prompts[:2], 2, stop_ids=[])
        return {n: _timed(decode, model, prompts[:n], max_new_tokens) for n in counts}


def _timed(decode, model, prompts: list, max_new_tokens: int) -> FormatSpeed:
    """The prompt pass (one new token) and the whole decode of `prompts`, timed; the decode's own rate from the
    difference."""
    start = time.perf_counter()
    decode(model, prompts, 1, stop_ids=[])
    prompt = time.perf_counter() - start
    start = time.perf_counter()
    decode(model, prompts, max_new_tokens, stop_ids=[])
    whole = time.perf_counter() - start
    n, prompt_tokens, extra = len(prompts), sum(map(len, prompts)), whole - prompt
    return FormatSpeed(round(prompt, 3), round(prompt_tokens / prompt, 1), round(extra, 3),
                       round(n * (max_new_tokens - 1) / extra, 1) if extra > 0 else None,
                       round(whole, 3), round(n * max_new_tokens / whole, 1))
