"""The measures that compare distributions and directions: KL divergence, top-k overlap, cosine similarity."""

from __future__ import annotations

import torch

DIRECTIONS = ("layer||final", "final||layer")


def kl_divergence(logp_layer: torch.Tensor, logp_final: torch.Tensor, direction: str = "layer||final") -> torch.Tensor:
    """Per-position KL between two log-distributions [..., V]; never negative."""
    if direction == "layer||final":
        p, q = logp_layer, logp_final
    elif direction == "final||layer":
        p, q = logp_final, logp_layer
    else:
        raise ValueError(f"direction must be one of {DIRECTIONS}, got {direction!r}")
    return (p.exp() * (p - q)).sum(-1).clamp(min=0.0)


def topk_overlap(logits_a: torch.Tensor, logits_b: torch.Tensor, k: int = 5) -> torch.Tensor:
    """Per-position |topk(a) ∩ topk(b)| / k, so values lie in {0, 1/k, ..., 1}."""
    ta = logits_a.topk(k, dim=-1).indices
    tb = logits_b.topk(k, dim=-1).indices
    return (ta[..., :, None] == tb[..., None, :]).any(-1).float().mean(-1)


def cosine(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """Per-position cosine similarity of two [..., D] tensors (0 where either is ~0)."""
    return (a * b).sum(-1) / (a.norm(dim=-1) * b.norm(dim=-1)).clamp(min=1e-6)
