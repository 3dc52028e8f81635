"""Which number format the book's engine decodes faster on this machine, measured: the model loaded in float32 and
in bfloat16, the same greedy decodes of the same prompts in each (`python -m helpers bench dtype --model M
--problems 16,64,128`), the prompt pass and the decode timed apart, and the rates recorded for `dtype: auto` to
choose by (`helpers.models.precision.record_measurement`)."""

from __future__ import annotations

import time
from collections.abc import Sequence

FORMATS = ("float32", "bfloat16")


def bench_dtype(model_name: str = "qwen2.5-coder-0.5b", rows: Sequence[int] | int = (32,), max_new_tokens: int = 32,
                shots: int = 2, record: bool = True) -> dict:
    """For each row count, decode that many prompts greedily in each format, twice: for one new token (the prompt
    pass, which also draws the first token) and for exactly `max_new_tokens` (no stop tokens: the same work in both
    formats); the decode's rate is the extra tokens over the extra time. `tokens_per_second` is the whole decode at
    the largest row count, prompts included, as a chapter's decode pays it; with `record`, what `auto` takes for
    this model on this machine follows it."""
    import torch

    from helpers.bench.sampling import _machine
    from helpers.core.checks import is_count
    from helpers.data.problems import arithmetic_problems, build_prompt
    from helpers.models import precision
    from helpers.models.loading import load_model
    from helpers.samplers.plain import decode

    counts = [rows] if isinstance(rows, int) else list(rows)
    if not counts or not all(is_count(n, 1) for n in counts) or not is_count(max_new_tokens, 2):
        raise ValueError(f"--problems must be row counts of at least 1 (e.g. 16,64,128) and --max-new-tokens an "
                         f"integer of at least 2, got {rows!r} and {max_new_tokens!r}")
    runs: dict[int, dict[str, dict]] = {n: {} for n in counts}
    for dtype in FORMATS:
        model, tokenizer, _ = load_model(model_name, dtype=dtype)
        pool = arithmetic_problems(max(counts) // 7 + 1)
        prompts = [build_prompt(tokenizer, p.question, shots=shots) for p in pool][:max(counts)]
        with torch.inference_mode():
            decode(model, prompts[:2], 2, stop_ids=[])  # first-call costs (thread pools, kernels) stay out
            for n in counts:
                runs[n][dtype] = _timed(decode, model, prompts[:n], max_new_tokens)
        del model
    table = [{"rows": n, **{f"{k}_{dtype}": v for dtype in FORMATS for k, v in runs[n][dtype].items()},
              **{f"{k}_bfloat16_vs_float32": _ratio(runs[n]["bfloat16"][f"{k}_tokens_per_s"],
                                                    runs[n]["float32"][f"{k}_tokens_per_s"]) for k in ("decode", "prompt")}}
             for n in counts]
    largest = runs[max(counts)]
    rates = {dtype: largest[dtype]["tokens_per_s"] for dtype in FORMATS}
    chosen = precision.record_measurement(model_name, rates) if record else None
    return {"model": model_name, "rows": counts, "max_new_tokens": max_new_tokens, "machine": _machine(),
            "by_rows": table, "tokens_per_second": rates,
            "bfloat16_vs_float32": round(rates["bfloat16"] / rates["float32"], 3),
            "auto": chosen, "auto_means": precision.describe("cpu", model_name)}


def _timed(decode, model, prompts: list, max_new_tokens: int) -> dict:
    """The prompt pass (one new token) and the whole decode of `prompts`, timed; the decode's own rate from the
    difference."""
    start = time.perf_counter()
    decode(model, prompts, 1, stop_ids=[])
    prompt = time.perf_counter() - start
    start = time.perf_counter()
    decode(model, prompts, max_new_tokens, stop_ids=[])
    whole = time.perf_counter() - start
    n, prompt_tokens, extra = len(prompts), sum(map(len, prompts)), whole - prompt
    return {"prompt_seconds": round(prompt, 3), "prompt_tokens_per_s": round(prompt_tokens / prompt, 1),
            "decode_seconds": round(extra, 3),  # None below: the decode took less than the timings' noise
            "decode_tokens_per_s": round(n * (max_new_tokens - 1) / extra, 1) if extra > 0 else None,
            "seconds": round(whole, 3), "tokens_per_s": round(n * max_new_tokens / whole, 1)}


def _ratio(a: float | None, b: float | None) -> float | None:
    return round(a / b, 3) if a and b else None
