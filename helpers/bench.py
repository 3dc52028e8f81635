"""Benchmarks: ratios measured side by side in one run, printed as JSON (`python -m helpers bench ...`)."""

from __future__ import annotations

import json
import platform
import time

import torch


def bench_sampling(model_name: str = "smollm2-135m", problems: int = 16, max_new_tokens: int = 48,
                   block_size: int = 16, mcmc_steps: int = 2, alpha: float = 4.0, shots: int = 2, seed: int = 0) -> dict:
    """Power sampling (lockstep batch, cached prefixes) against plain batched sampling and the reference's pattern.

    Targets (issue 4): decode throughput of power sampling >= 0.85 of plain batched sampling; wall time at least
    4x below a batch-1 run that re-encodes the prefix for every proposal, as the published code does.
    """
    from helpers.data import arithmetic_problems, build_prompt
    from helpers.decoding import decode_in_batches
    from helpers.models import load_model, stop_token_ids
    from helpers.power import CachedEngine, PowerConfig, PrefillEngine, run_chains

    model, tokenizer, info = load_model(model_name)
    stops = stop_token_ids(model, tokenizer)
    chosen = arithmetic_problems(max(1, problems // 4 + 1), levels=[1, 2, 3, 4], seed=seed)[:problems]
    prompts = [build_prompt(tokenizer, p.question, shots=shots) for p in chosen]
    cfg = PowerConfig(alpha=alpha, block_size=block_size, mcmc_steps=mcmc_steps, max_new_tokens=max_new_tokens)
    seeds = [seed * 1000 + i for i in range(len(prompts))]

    start = time.perf_counter()
    _, plain_stats = decode_in_batches(model, prompts, max_new_tokens, stops, batch_size=len(prompts),
                                       temperature=1 / alpha, seeds=seeds)
    plain_seconds = time.perf_counter() - start

    start = time.perf_counter()
    power = run_chains(CachedEngine(model), prompts, stops, cfg, seeds)
    power_seconds = time.perf_counter() - start

    start = time.perf_counter()
    baseline = [run_chains(PrefillEngine(model), [p], stops, cfg, [s])[0] for p, s in zip(prompts, seeds, strict=True)]
    baseline_seconds = time.perf_counter() - start

    same = sum(a.tokens == b.tokens for a, b in zip(power, baseline, strict=True))
    power_tokens = sum(r.decoded_tokens for r in power)
    plain_rate = plain_stats.decoded_tokens / plain_seconds
    power_rate = power_tokens / power_seconds
    return {
        "model": info.name, "problems": len(prompts), "settings": {"alpha": alpha, "block_size": block_size,
        "mcmc_steps": mcmc_steps, "max_new_tokens": max_new_tokens, "shots": shots},
        "machine": f"{platform.machine()}, {torch.get_num_threads()} threads",
        "plain_sampling": {"tokens": plain_stats.decoded_tokens, "seconds": round(plain_seconds, 2),
                           "tokens_per_second": round(plain_rate, 2)},
        "power_sampling": {"decoded_tokens": power_tokens, "seconds": round(power_seconds, 2),
                           "tokens_per_second": round(power_rate, 2),
                           "mean_acceptance": round(sum(sum(r.acceptance) / max(1, len(r.acceptance)) for r in power) / len(power), 3)},
        "reference_pattern_batch1": {"decoded_tokens": sum(r.decoded_tokens for r in baseline),
                                     "prefill_tokens": sum(r.prefill_tokens for r in baseline),
                                     "seconds": round(baseline_seconds, 2)},
        "chains_identical_to_baseline": f"{same}/{len(prompts)}",
        "throughput_ratio_vs_plain": round(power_rate / plain_rate, 3),
        "throughput_target": 0.85,
        "speedup_vs_reference_pattern": round(baseline_seconds / power_seconds, 2),
        "speedup_target": 4.0,
    }


def register_bench(sub) -> None:
    p = sub.add_parser("bench", help="benchmarks that print measured ratios as JSON")
    p.add_argument("what", choices=["sampling"])
    p.add_argument("--model", default="smollm2-135m")
    p.add_argument("--problems", type=int, default=16)
    p.add_argument("--max-new-tokens", type=int, default=48)
    p.add_argument("--block-size", type=int, default=16)
    p.add_argument("--steps", type=int, default=2)
    p.add_argument("--alpha", type=float, default=4.0)
    p.add_argument("--shots", type=int, default=2)

    def run(args) -> int:
        print(json.dumps(bench_sampling(args.model, args.problems, args.max_new_tokens, args.block_size, args.steps,
                                        args.alpha, args.shots), indent=2))
        return 0

    p.set_defaults(func=run)
