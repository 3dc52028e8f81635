"""Benchmarks, printed as JSON (`python -m helpers bench sampling|effective-depth`): ratios measured side by side
in one run, and the time and memory of a chapter against its targets."""

from __future__ import annotations

import platform
import time

import torch


def bench_sampling(model_name: str = "smollm2-135m", problems: int = 16, max_new_tokens: int = 48,
                   block_size: int = 16, mcmc_steps: int = 2, alpha: float = 4.0, shots: int = 2, seed: int = 0,
                   levels: tuple[int, ...] = (1, 2, 3, 4), baseline: bool = True) -> dict:
    """Power sampling (lockstep batch, cached prefixes) against plain batched sampling and the reference's pattern.

    Targets: decode throughput of power sampling >= 0.9 of plain batched sampling (issue 10); wall time at least
    4x below a batch-1 run that re-encodes the prefix for every proposal, as the published code does (issue 4).
    `baseline=False` skips that batch-1 run, which takes many minutes on a 0.5B model on 2 cores.
    """
    from helpers.data import arithmetic_problems, build_prompt
    from helpers.decoding import decode, total
    from helpers.models import load_model, stop_token_ids
    from helpers.power import CachedEngine, PowerConfig, PrefillEngine, run_chains

    if isinstance(problems, bool) or not isinstance(problems, int) or problems < 1:
        raise ValueError(f"--problems must be an integer of at least 1, got {problems!r}")
    if not levels:
        raise ValueError("--levels needs at least one arithmetic level, e.g. 1,2,3")
    cfg = PowerConfig(alpha=alpha, block_size=block_size, mcmc_steps=mcmc_steps,
                      max_new_tokens=max_new_tokens).validate()  # before any model is loaded or decoded
    model, tokenizer, info = load_model(model_name)
    stops = stop_token_ids(model, tokenizer)
    chosen = arithmetic_problems(max(1, problems // len(levels) + 1), levels=levels, seed=seed)[:problems]
    prompts = [build_prompt(tokenizer, p.question, shots=shots) for p in chosen]
    seeds = [seed * 1000 + i for i in range(len(prompts))]
    decode(model, prompts[:2], 4, stops, temperature=1 / alpha, seeds=seeds[:2])  # warm-up, untimed

    start = time.perf_counter()
    plain = decode(model, prompts, max_new_tokens, stops, temperature=1 / alpha, seeds=seeds)
    plain_seconds = time.perf_counter() - start

    start = time.perf_counter()
    power = run_chains(CachedEngine(model), prompts, stops, cfg, seeds)
    power_seconds = time.perf_counter() - start

    power_tokens = sum(r.decoded_tokens for r in power)
    plain_rate = total(plain, "decoded_tokens") / plain_seconds
    power_rate = power_tokens / power_seconds
    result = {
        "model": info.name, "problems": len(prompts), "settings": {"alpha": alpha, "block_size": block_size,
        "mcmc_steps": mcmc_steps, "max_new_tokens": max_new_tokens, "shots": shots, "levels": list(levels)},
        "machine": f"{platform.machine()}, {torch.get_num_threads()} threads",
        "plain_sampling": {"tokens": total(plain, "decoded_tokens"), "seconds": round(plain_seconds, 2),
                           "tokens_per_second": round(plain_rate, 2)},
        "power_sampling": {"decoded_tokens": power_tokens, "seconds": round(power_seconds, 2),
                           "tokens_per_second": round(power_rate, 2),
                           "mean_acceptance": round(sum(sum(r.acceptance) / max(1, len(r.acceptance)) for r in power) / len(power), 3)},
        "throughput_ratio_vs_plain": round(power_rate / plain_rate, 3),
        "throughput_target": 0.9,
    }
    if not baseline:
        return result
    start = time.perf_counter()
    slow = [run_chains(PrefillEngine(model), [p], stops, cfg, [s])[0] for p, s in zip(prompts, seeds, strict=True)]
    slow_seconds = time.perf_counter() - start
    same = sum(a.tokens == b.tokens for a, b in zip(power, slow, strict=True))
    result.update({
        "reference_pattern_batch1": {"decoded_tokens": sum(r.decoded_tokens for r in slow),
                                     "prefill_tokens": sum(r.prefill_tokens for r in slow),
                                     "seconds": round(slow_seconds, 2)},
        "chains_identical_to_baseline": f"{same}/{len(prompts)}",
        "speedup_vs_reference_pattern": round(slow_seconds / power_seconds, 2),
        "speedup_target": 4.0,
    })
    return result


def _descendants(root: int) -> list[int]:
    """Process ids below `root`, read from /proc (Linux)."""
    import os

    parents: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as fh:
                    ppid = int(fh.read().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            parents.setdefault(ppid, []).append(int(entry))
    out, todo = [], [root]
    while todo:
        kids = parents.get(todo.pop(), [])
        out += kids
        todo += kids
    return out


def _peak_rss_kib(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/status") as fh:
            return next((int(line.split()[1]) for line in fh if line.startswith("VmHWM:")), 0)
    except OSError:
        return 0


def bench_effective_depth(profile: str = "default", minutes_target: float = 10.0, gib_target: float = 4.0) -> dict:
    """Chapter 01 under `profile` from an empty results store: wall time and the kernel's peak resident memory.

    The chapter runs in a Jupyter kernel (a child process); a thread samples the peak RSS (VmHWM) of every
    descendant process once a second, so the number is the largest any one process reached.
    """
    import os
    import resource
    import tempfile
    import threading
    from pathlib import Path

    from helpers.run import run

    peak = {"kib": 0}
    stop = threading.Event()

    def watch() -> None:
        while not stop.is_set():
            for pid in _descendants(os.getpid()):
                peak["kib"] = max(peak["kib"], _peak_rss_kib(pid))
            stop.wait(1.0)

    with tempfile.TemporaryDirectory() as tmp:
        previous = os.environ.get("SVD_RESULTS")
        os.environ["SVD_RESULTS"] = str(Path(tmp) / "results")
        thread = threading.Thread(target=watch, daemon=True)
        thread.start()
        start = time.perf_counter()
        try:
            run(profile, {}, only="01_effective_depth", out_root=Path(tmp) / "out", build=False)
        finally:
            seconds = time.perf_counter() - start
            stop.set()
            thread.join()
            if previous is None:
                os.environ.pop("SVD_RESULTS", None)
            else:
                os.environ["SVD_RESULTS"] = previous
    children = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss  # KiB on Linux, waited-for children only
    gib = max(peak["kib"], children) / 2**20
    return {"chapter": "01_effective_depth", "profile": profile, "results_store": "empty (fresh temporary folder)",
            "machine": f"{platform.machine()}, {torch.get_num_threads()} threads", "seconds": round(seconds, 1),
            "minutes": round(seconds / 60, 2), "minutes_target": minutes_target, "within_time": seconds / 60 < minutes_target,
            "peak_rss_gib": round(gib, 2), "peak_rss_target_gib": gib_target, "within_memory": gib < gib_target}


def bench_throughput(model_name: str = "smollm2-135m", batch_sizes: tuple[int, ...] = (1, 8, 32, 64),
                     max_new_tokens: int = 32, shots: int = 2, with_generate: bool = True) -> dict:
    """Greedy decode throughput per batch size: our decode loop beside `transformers`' `generate` (left-padded).

    Each batch decodes exactly `max_new_tokens` tokens per row (no stop tokens), so both sides do the same work;
    tokens per second count new tokens only, prefill included in the time.
    """
    from helpers.data import arithmetic_problems, build_prompt
    from helpers.decoding import decode
    from helpers.models import load_model

    torch.set_grad_enabled(False)
    model, tokenizer, info = load_model(model_name)
    pool = arithmetic_problems(max(batch_sizes) // 6 + 1, seed=0)
    warm = [build_prompt(tokenizer, pool[0].question, shots=shots)]
    decode(model, warm, 2, stop_ids=[])  # first-call costs (thread pools, kernels) stay out of the timings
    model.generate(input_ids=torch.tensor(warm), max_new_tokens=2, do_sample=False,
                   pad_token_id=tokenizer.pad_token_id)
    rows = []
    for size in batch_sizes:
        prompts = [build_prompt(tokenizer, p.question, shots=shots) for p in pool[:size]]
        start = time.perf_counter()
        decode(model, prompts, max_new_tokens, stop_ids=[])
        ours = time.perf_counter() - start
        row = {"batch": size, "prompt_tokens": sum(map(len, prompts)), "new_tokens": size * max_new_tokens,
               "decode_seconds": round(ours, 2), "decode_tokens_per_second": round(size * max_new_tokens / ours, 1)}
        if with_generate:
            width = max(map(len, prompts))
            pad = tokenizer.pad_token_id
            ids = torch.tensor([[pad] * (width - len(p)) + p for p in prompts])
            mask = torch.tensor([[0] * (width - len(p)) + [1] * len(p) for p in prompts])
            start = time.perf_counter()
            model.generate(input_ids=ids, attention_mask=mask, max_new_tokens=max_new_tokens,
                           min_new_tokens=max_new_tokens, do_sample=False, pad_token_id=pad)
            theirs = time.perf_counter() - start
            row |= {"generate_seconds": round(theirs, 2),
                    "generate_tokens_per_second": round(size * max_new_tokens / theirs, 1),
                    "speed_vs_generate": round(theirs / ours, 2)}
        rows.append(row)
    return {"model": info.name, "layers": info.n_layers, "max_new_tokens": max_new_tokens, "shots": shots,
            "machine": f"{platform.machine()}, {torch.get_num_threads()} threads", "batches": rows}
