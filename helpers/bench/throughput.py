"""Greedy decoding's throughput per batch size, the book's decode loop beside transformers' `generate`
(`python -m helpers bench throughput`)."""

from __future__ import annotations

import time

import torch

from helpers.bench.common import finished, machine


@torch.no_grad()  # for the run only: a caller's autograd mode is left as it was
def bench_throughput(model_name: str = "smollm2-135m", batch_sizes: tuple[int, ...] = (1, 8, 32, 64),
                     max_new_tokens: int = 32, shots: int = 2, with_generate: bool = True,
                     dtype: str = "auto") -> dict:
    """Greedy decode throughput per batch size: our decode loop beside `transformers`' `generate` (left-padded).

    Each batch decodes exactly `max_new_tokens` tokens per row (no stop tokens), so both sides do the same work;
    tokens per second count new tokens only, prefill included in the time.
    """
    from helpers.data.arithmetic import arithmetic_problems
    from helpers.data.prompts import build_prompt
    from helpers.models.loading import load_model
    from helpers.samplers.plain import decode

    handle = load_model(model_name, dtype=dtype)
    model, tokenizer, info = handle.module, handle.tokenizer, handle.info
    pool = arithmetic_problems(max(batch_sizes) // 6 + 1, seed=0)
    warm = [build_prompt(tokenizer, pool[0].question, shots=shots)]
    decode(model, warm, 2, stop_ids=[])  # first-call costs (thread pools, kernels) stay out of the timings
    model.generate(input_ids=torch.tensor(warm, device=model.device), max_new_tokens=2, do_sample=False,
                   pad_token_id=tokenizer.pad_token_id)
    rows = []
    for size in batch_sizes:
        prompts = [build_prompt(tokenizer, p.question, shots=shots) for p in pool[:size]]
        finished(model.device)
        start = time.perf_counter()
        decode(model, prompts, max_new_tokens, stop_ids=[])
        finished(model.device)
        ours = time.perf_counter() - start
        row = {"batch": size, "prompt_tokens": sum(map(len, prompts)), "new_tokens": size * max_new_tokens,
               "decode_seconds": round(ours, 2), "decode_tokens_per_second": round(size * max_new_tokens / ours, 1)}
        if with_generate:
            width = max(map(len, prompts))
            pad = tokenizer.pad_token_id
            ids = torch.tensor([[pad] * (width - len(p)) + p for p in prompts], device=model.device)
            mask = torch.tensor([[0] * (width - len(p)) + [1] * len(p) for p in prompts], device=model.device)
            finished(model.device)
            start = time.perf_counter()
            model.generate(input_ids=ids, attention_mask=mask, max_new_tokens=max_new_tokens,
                           min_new_tokens=max_new_tokens, do_sample=False, pad_token_id=pad)
            finished(model.device)
            theirs = time.perf_counter() - start
            row |= {"generate_seconds": round(theirs, 2),
                    "generate_tokens_per_second": round(size * max_new_tokens / theirs, 1),
                    "speed_vs_generate": round(theirs / ours, 2)}
        rows.append(row)
    return {"model": info.name, "dtype": info.dtype, "layers": info.n_layers, "max_new_tokens": max_new_tokens,
            "shots": shots,
            "machine": machine(), "batches": rows}
