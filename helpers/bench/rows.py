"""Does an engine's time per row stay flat as a run grows? SMC on a tiny random model, from a thousand rows to tens
of thousands in one run, the slot engine and vLLM side by side: a cost that grows faster than the rows (a search
over every slot on every call, a list rebuilt per row) shows as a rising time per row, not hidden by the model."""

from __future__ import annotations

import tempfile
import time
from pathlib import Path


def bench_rows(rows: tuple[int, ...] = (1000, 4000, 16000, 64000), particles: int = 32, max_new_tokens: int = 8,
               block_size: int = 4, engines: tuple[str, ...] = ("slot",), prompt_tokens: int = 12) -> dict:
    """Seconds per thousand rows (particles) of SMC at each run size, every row of a run admitted at once, no stop
    token (each row decodes exactly `max_new_tokens`); the growth from the smallest run to the largest per engine
    (flat: 1.0), and vLLM's time over the slot engine's at each size."""
    from helpers.bench.common import machine
    from helpers.core.checks import is_count
    from helpers.engines.registry import make_engine, release_engines
    from helpers.models.loading import load_model
    from helpers.models.tiny import make_tiny
    from helpers.samplers.settings import check_engine
    from helpers.samplers.smc import SMCConfig, run_smc
    from helpers.samplers.target import Target

    for name, value in (("--particles", particles), ("--max-new-tokens", max_new_tokens),
                        ("--block-size", block_size), *(("--rows", n) for n in rows)):
        if not is_count(value, 1):
            raise ValueError(f"{name} must be an integer of at least 1, got {value!r}")
    if any(n < particles for n in rows):
        raise ValueError(f"--rows must each hold at least one problem of --particles {particles} rows, got {rows}")
    kinds = {e: check_engine(e) for e in engines}
    target, cfg = Target(2.0, max_new_tokens), SMCConfig(particles=particles, block_size=block_size).validate()
    out: dict = {"machine": machine(), "particles": particles, "max_new_tokens": max_new_tokens,
                 "block_size": block_size, "prompt_tokens": prompt_tokens, "engines": {}}
    with tempfile.TemporaryDirectory(prefix="svd-bench-rows-") as tmp:
        folder = make_tiny("qwen2", Path(tmp) / "tiny", n_layers=2, hidden_size=128)
        handle = load_model(str(folder), dtype="float32")
        model = handle.module
        out["model"] = f"random Qwen2, 2 layers, hidden 128, vocabulary {model.config.vocab_size}"
        prompts, seeds = _prompts(max(rows) // particles, prompt_tokens, model.config.vocab_size)
        for name, kind in kinds.items():
            engine = make_engine(kind, handle)
            run_smc(engine, prompts[:2], [], target, cfg, seeds[:2])  # first-call costs stay out
            each = {}
            for n in sorted(rows):
                problems = n // particles  # whole problems: the run holds problems × particles rows
                start = time.perf_counter()
                done = run_smc(engine, prompts[:problems], [], target, cfg, seeds[:problems])
                seconds = time.perf_counter() - start
                each[str(n)] = {"rows": problems * particles, "seconds": round(seconds, 2),
                                "ms_per_row": round(1000 * seconds / (problems * particles), 3),
                                "decoded_tokens": sum(c.decoded_tokens for c in done)}
            out["engines"][name] = each
        release_engines()
    first, last = str(min(rows)), str(max(rows))
    out["growth_per_row"] = {name: round(each[last]["ms_per_row"] / each[first]["ms_per_row"], 2)
                             for name, each in out["engines"].items()}
    if len(out["engines"]) == 2:
        (a, ea), (b, eb) = out["engines"].items()
        out[f"{b}_vs_{a}_seconds"] = {n: round(eb[n]["seconds"] / ea[n]["seconds"], 2) for n in ea}
    return out


def _prompts(n: int, length: int, vocab: int) -> tuple[list[list[int]], list[int]]:
    """n distinct prompts of random ordinary tokens (the first few ids are the tokenizer's specials), and seeds."""
    import torch

    g = torch.Generator().manual_seed(0)
    ids = torch.randint(4, vocab, (n, length), generator=g)
    ids[:, 0] = torch.arange(n) % (vocab - 4) + 4  # no two prompts alike at a size like these
    ids[:, 1] = torch.arange(n) // (vocab - 4) % (vocab - 4) + 4
    return ids.tolist(), list(range(n))
