"""The slot engine's two CPU kernels against what they replace, at the shapes the book decodes
(`python -m helpers bench kernels`): the sliced output head (`helpers.models.output_head`) against one `linear`, and
the copy-free grouped-query attention (`helpers.models.attention`) against transformers' way, which repeats the key
and value heads before a masked SDPA call. Random weights of the models' shapes: no model is loaded, and every
comparison first checks that both ways give the same numbers."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence

import torch
from torch.nn import functional as F

from helpers.models.attention import _one_query
from helpers.models.output_head import SlicedHead

QWEN_HEAD = (151_936, 896)  # Qwen2.5-0.5B's vocabulary × width
SMOLLM2_ATTENTION = (9, 3, 64)  # SmolLM2-135M's query heads, key/value heads, head width


def _seconds(work: Callable[[], object], repeats: int) -> float:
    """The best of `repeats` timings of `work` after one warm-up call: the kernel's cost, not the machine's noise."""
    work()
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        work()
        best = min(best, time.perf_counter() - start)
    return best


def head_rows(rows: Sequence[int], slices: Sequence[int], repeats: int = 5) -> list[dict]:
    """For each row count, one `linear` over Qwen2.5's head against the product in vocabulary slices of each size:
    the time of each, one's over the slices' (above 1: the slices are faster), and the largest difference between
    their logits (MKL may block a product of another shape otherwise, so it need not be zero)."""
    vocab, width = QWEN_HEAD
    torch.manual_seed(0)
    weight = torch.randn(vocab, width) * 0.02
    head = SlicedHead(width, vocab, bias=False, device="meta")
    head.weight = torch.nn.Parameter(weight, requires_grad=False)
    out = []
    with torch.inference_mode():
        for n in rows:
            x = torch.randn(n, 1, width)
            one = _seconds(lambda: F.linear(x, weight), repeats)  # noqa: B023 - timed at once
            row = {"rows": n, "linear_ms": round(one * 1e3, 3)}
            for size in slices:
                head.slice_rows = size
                row[f"sliced_{size}_max_difference"] = float((head(x) - F.linear(x, weight)).abs().max())
                sliced = _seconds(lambda: head(x), repeats)  # noqa: B023
                row[f"sliced_{size}_ms"] = round(sliced * 1e3, 3)
                row[f"linear_vs_sliced_{size}"] = round(one / sliced, 2)
            out.append(row)
    return out


def _repeat_kv(t: torch.Tensor, times: int) -> torch.Tensor:
    """Key or value heads repeated for their query heads, as transformers' SDPA path does before the call."""
    b, kv, w, d = t.shape
    return t[:, :, None].expand(b, kv, times, w, d).reshape(b, kv * times, w, d)


def attention_rows(batch: int, widths: Sequence[int], repeats: int = 20) -> list[dict]:
    """SmolLM2's attention over a left-padded batch's cache of each width: transformers' repeat-then-SDPA, PyTorch's
    SDPA with `enable_gqa` (no copy), and the one-query matrix products the engine takes at a decoding step; one query
    per row, the mask hiding each row's first few positions."""
    heads, kv_heads, dim = SMOLLM2_ATTENTION
    torch.manual_seed(0)
    out = []
    with torch.inference_mode():
        for width in widths:
            q = torch.randn(batch, heads, 1, dim)
            k, v = torch.randn(batch, kv_heads, width, dim), torch.randn(batch, kv_heads, width, dim)
            mask = torch.zeros(batch, 1, 1, width)
            for row in range(batch):
                mask[row, ..., : row % 7] = float("-inf")  # left padding of 0-6 positions
            group = heads // kv_heads
            copied = lambda: F.scaled_dot_product_attention(q, _repeat_kv(k, group), _repeat_kv(v, group),  # noqa: B023,E731
                                                            attn_mask=mask)  # noqa: B023
            gqa = lambda: F.scaled_dot_product_attention(q, k, v, attn_mask=mask, enable_gqa=True)  # noqa: B023,E731
            one = lambda: _one_query(q, k, v, mask, None)  # noqa: B023,E731
            reference = copied()
            assert torch.allclose(gqa(), reference, atol=1e-5)
            assert torch.allclose(one().transpose(1, 2), reference, atol=1e-5)
            times = {name: _seconds(f, repeats) for name, f in (("repeat_kv", copied), ("enable_gqa", gqa),
                                                                   ("one_query", one))}
            out.append({"batch": batch, "width": width, **{f"{k}_us": round(t * 1e6, 1) for k, t in times.items()},
                        "repeat_kv_vs_enable_gqa": round(times["repeat_kv"] / times["enable_gqa"], 2),
                        "repeat_kv_vs_one_query": round(times["repeat_kv"] / times["one_query"], 2)})
    return out


def bench_kernels(rows: Sequence[int] = (1, 8, 22, 64, 100, 128, 256), slices: Sequence[int] = (512, 1024, 2048, 16_384),
                  batch: int = 12, widths: Sequence[int] = (64, 256, 1024)) -> dict:
    """Both kernels' measurements, with the machine they ran on."""
    from helpers.bench.common import machine

    return {"machine": machine(), "head": head_rows(rows, slices), "attention": attention_rows(batch, widths)}
