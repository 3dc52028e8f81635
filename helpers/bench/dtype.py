"""Which number format the book's engine decodes faster on this machine, measured: the model loaded in float32 and
in bfloat16, the same greedy decode of the same prompts in each (`python -m helpers bench dtype --model M`), and the
rates recorded for `dtype: auto` to choose by (`helpers.models.precision.record_measurement`)."""

from __future__ import annotations

import time


def bench_dtype(model_name: str = "qwen2.5-coder-0.5b", rows: int = 32, max_new_tokens: int = 32, shots: int = 2,
                record: bool = True) -> dict:
    """Decode `rows` prompts greedily for exactly `max_new_tokens` tokens each (no stop tokens: the same work in both
    formats), once to warm up and once timed, in float32 and in bfloat16; tokens per second count new tokens, the
    prompts' encoding included in the time, as a chapter's decode pays it. With `record`, what `auto` takes for this
    model on this machine follows the faster."""
    import torch

    from helpers.bench.sampling import _machine
    from helpers.core.checks import is_count
    from helpers.data.problems import arithmetic_problems, build_prompt
    from helpers.models import precision
    from helpers.models.loading import load_model
    from helpers.samplers.plain import decode

    if not is_count(rows, 1) or not is_count(max_new_tokens, 1):
        raise ValueError(f"--problems and --max-new-tokens must be integers of at least 1, got {rows!r} and "
                         f"{max_new_tokens!r}")
    rates, seconds = {}, {}
    for dtype in ("float32", "bfloat16"):
        model, tokenizer, _ = load_model(model_name, dtype=dtype)
        prompts = [build_prompt(tokenizer, p.question, shots=shots) for p in arithmetic_problems(rows // 7 + 1)][:rows]
        with torch.inference_mode():
            decode(model, prompts[:2], 2, stop_ids=[])  # first-call costs (thread pools, kernels) stay out
            start = time.perf_counter()
            decode(model, prompts, max_new_tokens, stop_ids=[])
            seconds[dtype] = time.perf_counter() - start
        rates[dtype] = rows * max_new_tokens / seconds[dtype]
        del model
    chosen = precision.record_measurement(model_name, rates) if record else None
    return {"model": model_name, "rows": rows, "max_new_tokens": max_new_tokens, "machine": _machine(),
            "seconds": {k: round(v, 2) for k, v in seconds.items()},
            "tokens_per_second": {k: round(v, 1) for k, v in rates.items()},
            "bfloat16_vs_float32": round(rates["bfloat16"] / rates["float32"], 3),
            "auto": chosen, "auto_means": precision.describe("cpu", model_name)}
