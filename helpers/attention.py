"""A grouped-query SDPA attention for transformers that never copies the KV cache.

transformers' own SDPA path repeats the key/value heads (a full copy of the cache at every layer and
step) whenever an attention mask is present, which is always the case for a left-padded batch.
PyTorch's `scaled_dot_product_attention(..., enable_gqa=True)` does the same computation without the
copy: 4x faster per layer for SmolLM2 at batch 12 on a CPU, with identical outputs.
"""

from __future__ import annotations

import torch
from torch.nn import functional as F

NAME = "sdpa_gqa"


def sdpa_gqa_forward(module, query: torch.Tensor, key: torch.Tensor, value: torch.Tensor,
                     attention_mask: torch.Tensor | None, dropout: float = 0.0, scaling: float | None = None,
                     is_causal: bool | None = None, **kwargs) -> tuple[torch.Tensor, None]:
    """Same contract as transformers' `sdpa_attention_forward`: returns ([B, T, H, D], None)."""
    if attention_mask is not None and attention_mask.ndim == 4:
        attention_mask = attention_mask[:, :, :, : key.shape[-2]]
    if is_causal is None:
        is_causal = query.shape[2] > 1 and attention_mask is None and getattr(module, "is_causal", True)
    out = F.scaled_dot_product_attention(query, key, value, attn_mask=attention_mask, dropout_p=dropout,
                                         scale=scaling, is_causal=bool(is_causal),
                                         enable_gqa=key.shape[1] != query.shape[1])
    return out.transpose(1, 2).contiguous(), None


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
