"""A grouped-query SDPA attention for transformers that never copies the KV cache.

transformers' own SDPA path repeats the key/value heads (a full copy of the cache at every layer and
step) whenever an attention mask is present, which is always the case for a left-padded batch.
PyTorch's `scaled_dot_product_attention(..., enable_gqa=True)` does the same computation without the
copy, with identical outputs (the performance page times both: `python -m helpers bench kernels`).

With one query per row (every decoding step), attention on a CPU is two batched matrix products instead:
PyTorch's fused CPU kernel is built for blocks of queries and takes longer for a single one, in float32 a
little, in bfloat16 many times over (the book's appendix and performance page give the measurements, `bench kernels`
among them). In float32
the two ways add the same terms in another order, so outputs differ in the last float bits (a few 1e-7), as they
already do between batch sizes. In bfloat16 the scores and their softmax are computed in float32, as the fused
kernel keeps them, and only the weights that sum the values are rounded to bfloat16: the outputs stay within
twice the fused kernel's distance from exact attention (two bfloat16 steps where it keeps to one). That changes
bfloat16's numbers, so a bfloat16 decode's store key carries the revision (the decode kind's `attention` revision,
`helpers.results.kinds.DECODE`, in the engine's part of the key).
A KV cache that knows this keeps a bfloat16 model's keys in float32 (`key_format`): the same bfloat16 values,
converted once when written instead of at every step, so the same numbers for less work per step.

On a GPU, PyTorch may route SDPA to cuDNN's attention, which prepares a plan for every new shape on the host. A
decoding step's keys are one longer than the last step's, so every layer of every step pays that preparation while
the GPU waits for work: the decode becomes bound by the host, not the GPU. On CUDA this attention therefore lets
PyTorch choose among its other backends (`CUDA_BACKENDS`): flash or memory-efficient attention where they accept the
inputs, else the math backend, which accepts any (for grouped queries it repeats the key and value heads, the copy
the CPU path avoids). None of them prepares anything per shape; the performance page measures the difference. The
backend flags are the process's: they are set and restored around each call, from the one thread that decodes.
"""

from __future__ import annotations

from contextlib import nullcontext

import torch
from torch.nn import functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

NAME = "sdpa_gqa"
CUDA_BACKENDS = (SDPBackend.FLASH_ATTENTION, SDPBackend.EFFICIENT_ATTENTION, SDPBackend.MATH)  # not cuDNN's
ONE_QUERY_MATMULS = True  # decoding steps on a CPU take `_one_query`
ONE_QUERY_DTYPES = (torch.float32, torch.bfloat16)


def sdpa_gqa_forward(module, query: torch.Tensor, key: torch.Tensor, value: torch.Tensor,
                     attention_mask: torch.Tensor | None, dropout: float = 0.0, scaling: float | None = None,
                     is_causal: bool | None = None, **kwargs) -> tuple[torch.Tensor, None]:
    """Same contract as transformers' `sdpa_attention_forward`: returns ([B, T, H, D], None)."""
    if attention_mask is not None and attention_mask.ndim == 4:
        attention_mask = attention_mask[:, :, :, : key.shape[-2]]
    if ONE_QUERY_MATMULS and query.shape[2] == 1 and query.device.type == "cpu" and query.dtype in ONE_QUERY_DTYPES \
            and not dropout:
        return _one_query(query, key, value, attention_mask, scaling), None
    if key.dtype != query.dtype:  # keys a cache keeps in float32 (`key_format`): the values they were written with
        key = key.to(query.dtype)
    if is_causal is None:
        is_causal = query.shape[2] > 1 and attention_mask is None and getattr(module, "is_causal", True)
    with sdpa_kernel(list(CUDA_BACKENDS)) if query.device.type == "cuda" else nullcontext():
        out = F.scaled_dot_product_attention(query, key, value, attn_mask=attention_mask, dropout_p=dropout,
                                             scale=scaling, is_causal=bool(is_causal),
                                             enable_gqa=key.shape[1] != query.shape[1])
    return out.transpose(1, 2).contiguous(), None


def _one_query(query: torch.Tensor, key: torch.Tensor, value: torch.Tensor, mask: torch.Tensor | None,
               scaling: float | None) -> torch.Tensor:
    """Attention of one query per row ([B, H, 1, D]) over [B, KV, W, D] keys and values: softmax(q kᵀ + mask) v,
    the H // KV query heads of a key head taken together in one product; scores and softmax in float32 whatever
    the inputs' format, the weighted sum of the values in theirs. Returns [B, 1, H, D]."""
    b, heads, _, dim = query.shape
    kv_heads, width = key.shape[1], key.shape[2]
    group = heads // kv_heads
    q = query.reshape(b * kv_heads, group, dim).float()
    keys_t = key.reshape(b * kv_heads, width, dim).transpose(1, 2).float()
    scale = scaling if scaling is not None else dim ** -0.5
    if mask is None:
        scores = torch.bmm(q, keys_t).mul_(scale)
    else:
        if mask.dtype == torch.bool:
            mask = torch.zeros(mask.shape, dtype=torch.float32, device=query.device).masked_fill_(~mask, float("-inf"))
        bias = mask.float().expand(b, heads, 1, width).reshape(b * kv_heads, group, width)
        scores = torch.baddbmm(bias, q, keys_t, alpha=scale)
    weights = torch.softmax(scores, dim=-1).to(value.dtype)
    out = torch.bmm(weights, value.reshape(b * kv_heads, width, dim))
    return out.view(b, 1, heads, dim)


def key_format(model) -> torch.dtype:
    """The format a KV cache keeps `model`'s keys in: float32 for a bfloat16 model on a CPU that attends through
    this module (its decoding steps compute scores in float32 from the keys: converting each key once, when it is
    written, spares converting the whole cache at every step, and the values are the same), else the model's own."""
    param = next(model.parameters())
    ours = getattr(model.config, "_attn_implementation", None) == NAME
    if ours and ONE_QUERY_MATMULS and param.dtype == torch.bfloat16 and param.device.type == "cpu":
        return torch.float32
    return param.dtype


def register() -> str:
    """Make `attn_implementation="sdpa_gqa"` known to transformers (idempotent); returns the name."""
    from transformers import AttentionInterface
    from transformers.masking_utils import ALL_MASK_ATTENTION_FUNCTIONS, sdpa_mask

    AttentionInterface.register(NAME, sdpa_gqa_forward)
    ALL_MASK_ATTENTION_FUNCTIONS.register(NAME, sdpa_mask)
    return NAME


def use_fast_attention(model) -> None:
    """Switch a loaded model to the copy-free attention when its architecture uses SDPA."""
    if getattr(model.config, "_attn_implementation", None) == "sdpa":
        register()
        model.set_attn_implementation(NAME)


def local_window(config) -> int | None:
    """The sliding window of a model whose layers include local (sliding-window) attention, as Gemma 3's five in six
    do; None when every layer attends over the whole sequence. Such layers need a mask of their own past the window
    (`helpers.engines.slot_runner` hands them one)."""
    types = getattr(config, "layer_types", None) or ()
    window = getattr(config, "sliding_window", None)
    return int(window) if window and "sliding_attention" in types else None
