"""Chapter 03's depth sweep decoded one truncation at a time, as it ran before, beside one engine run through a depth
mix (`helpers.models.depth_mix`), side by side in one process (`python -m helpers bench depth-sweep`)."""

from __future__ import annotations

import time

import torch


@torch.inference_mode()
def bench_depth_sweep(model_name: str = "qwen2.5-coder-0.5b", problems: int = 16, span: int = 4,
                      max_new_tokens: int = 160, shots: int = 2, levels: tuple[int, ...] = (5, 6),
                      seed: int = 0, dtype: str = "auto") -> dict:
    """Greedy decodes of `problems` problems at every stitched and naive depth of the last `span` below the full
    one (the full depth once): one run per truncation of `problems` rows, then all of them in one mixed run.

    Prints each side's wall time, decoded tokens and rate, the ratio, the share of rows whose tokens agree (they
    can part only where two tokens' logits tie to within the rounding of another batch), and the share of block
    computations the mix spends on blocks its rows' truncations do not run."""
    from helpers.bench.common import inputs, machine
    from helpers.core.checks import is_count
    from helpers.engines.registry import make_engine
    from helpers.models.depth_mix import DepthMix
    from helpers.models.loading import load_model
    from helpers.models.truncation import kept_blocks
    from helpers.samplers.plain import decode_work
    from helpers.samplers.work import run_together

    if not is_count(problems, 1) or not is_count(span, 1):
        raise ValueError(f"--problems and --span must be integers of at least 1, got {problems!r} and {span!r}")
    handle = load_model(model_name, dtype=dtype)
    model, tokenizer, info = handle.module, handle.tokenizer, handle.info
    L = info.n_layers
    variants = [("stitch", L)] + [(m, d) for m in ("stitch", "naive") for d in range(max(L - span, 2), L)]
    stops, prompts, _ = inputs(model, tokenizer, levels, problems, shots, seed)
    stops = set(stops)
    run_together(make_engine("slot", model), [decode_work(prompts[:2], 2, stops)], stops)  # first-call costs stay out

    separate: dict[tuple[str, int], list] = {}
    start = time.perf_counter()
    for method, depth in variants:
        m = handle.at_depth(depth, method).module
        (separate[(method, depth)],) = run_together(make_engine("slot", m), [decode_work(prompts, max_new_tokens, stops)],
                                                    stops, batch_size=problems)
    separate_seconds = time.perf_counter() - start

    mix = DepthMix(model, variants)
    works = []
    for v in range(len(variants)):
        work = decode_work(prompts, max_new_tokens, stops)
        for row, _ in work.tasks:
            row.variant = v
        works.append(work)
    start = time.perf_counter()
    mixed = run_together(make_engine("slot", mix), works, stops, batch_size=problems * len(variants))
    mixed_seconds = time.perf_counter() - start
    mix.close()

    def decoded(runs) -> int:
        return sum(c.decoded_tokens for completions in runs for c in completions)

    pairs = [(a.tokens, b.tokens) for v, completions in zip(variants, mixed, strict=True)
             for a, b in zip(completions, separate[v], strict=True)]
    blocks_run = len(variants) * L
    blocks_kept = sum(len(kept_blocks(L, d, m)) for m, d in variants)
    return {"model": info.name, "dtype": info.dtype, "layers": L, "machine": machine(), "problems": problems,
            "truncations": [f"{m} {d}" for m, d in variants], "rows": problems * len(variants),
            "max_new_tokens": max_new_tokens,
            "one_run_per_truncation": {"seconds": round(separate_seconds, 1), "decoded_tokens": decoded(separate.values()),
                                       "tokens_per_second": round(decoded(separate.values()) / separate_seconds, 1)},
            "one_mixed_run": {"seconds": round(mixed_seconds, 1), "decoded_tokens": decoded(mixed),
                              "tokens_per_second": round(decoded(mixed) / mixed_seconds, 1)},
            "speedup": round(separate_seconds / mixed_seconds, 2),
            "rows_with_equal_tokens": round(sum(a == b for a, b in pairs) / len(pairs), 3),
            "blocks_run_beyond_the_truncation": round(1 - blocks_kept / blocks_run, 3)}
