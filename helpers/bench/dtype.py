"""Which number format the book's engine decodes faster on this machine, measured
(`python -m helpers bench dtype --model M --problems 16,64,128`: `helpers.evaluation.format_speed`), and the rates
recorded for `dtype: auto` to choose by (`helpers.models.precision.record_measurement`)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict

from helpers.models.precision import FORMATS


def bench_dtype(model_name: str = "qwen2.5-coder-0.5b", rows: Sequence[int] | int = (32,), max_new_tokens: int = 32,
                shots: int = 2, record: bool = True) -> dict:
    """Both formats' prompt pass and decode at each row count, with bfloat16's rate over float32's for each;
    `tokens_per_second` is the whole decode at the largest row count, prompts included, as a chapter's decode pays
    it; with `record`, what `auto` takes for this model on this machine follows it."""
    from helpers.bench.common import machine
    from helpers.evaluation.format_speed import time_formats
    from helpers.models import precision

    table = time_formats(model_name, rows, max_new_tokens, shots)
    by_rows = [{"rows": n, **{f"{k}_{dtype}": v for dtype in FORMATS for k, v in asdict(speeds[dtype]).items()},
                **{f"{k}_bfloat16_vs_float32": table.ratio(n, k) for k in ("decode", "prompt")}}
               for n, speeds in table.by_rows.items()]
    rates = table.whole_rates()
    chosen = precision.record_measurement(model_name, rates) if record else None
    return {"model": model_name, "rows": list(table.by_rows), "max_new_tokens": max_new_tokens, "machine": machine(),
            "by_rows": by_rows, "tokens_per_second": rates,
            "bfloat16_vs_float32": round(rates["bfloat16"] / rates["float32"], 3),
            "auto": chosen, "auto_means": precision.describe("cpu", model_name)}
