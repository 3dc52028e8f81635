"""What the benchmarks share: the machine in a line, and the same prompts and seeds for every batch size."""

from __future__ import annotations

import platform

import torch


def machine() -> str:
    """The machine in a line: architecture, threads, device, and whether it computes bfloat16 natively."""
    from helpers.models.loading import default_device
    from helpers.models.precision import describe

    device = default_device()
    gpu = f", {torch.cuda.get_device_name(device)}" if device == "cuda" else ""
    return f"{platform.machine()}, {torch.get_num_threads()} threads{gpu}, {describe(device)}"


def finished(device: torch.device | str) -> None:
    """Wait until `device` has run what was queued on it: a GPU runs its kernels after the call that queued them
    returns, so a timer read before this measures the queueing, not the work."""
    if torch.device(device).type == "cuda":
        torch.cuda.synchronize(device)


def inputs(model, tokenizer, levels, n: int, shots: int, seed: int) -> tuple[list[int], list[list[int]], list[int]]:
    """The sampling benches' stop tokens, `n` prompts (`bench_problems`) and one seed per prompt."""
    from helpers.data.prompts import build_prompt
    from helpers.models.loading import stop_token_ids

    prompts = [build_prompt(tokenizer, p.question, shots=shots) for p in bench_problems(levels, n, seed)]
    return stop_token_ids(model, tokenizer), prompts, [seed * 1000 + i for i in range(n)]


def bench_problems(levels, n: int, seed: int) -> list:
    """`n` arithmetic problems taking the levels in turn, so that the first k of them are the same problems, from
    every level, whatever the largest batch of the run."""
    from helpers.data.arithmetic import arithmetic_problems
    from helpers.data.problems import interleaved

    return interleaved(arithmetic_problems(n // len(levels) + 1, levels=levels, seed=seed), n)
