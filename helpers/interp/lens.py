"""The logit lens: read every block's input through the final norm and the unembedding.

Tap l is h_l, the input of block l (l = 0 is the embedding); its distribution is
softmax(unembed(final_norm(h_l))), with the norm recomputed on h_l itself. Each tap is compared
with the model's own output by KL divergence (default KL(layer || final), as both reference repositories
compute it) and by top-k overlap. One layer's logits exist at a time, so memory stays O(T·V).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch

from helpers.interp.metrics import kl_divergence, topk_overlap
from helpers.interp.residual import Capture, capture
from helpers.models.adapter import adapter


@dataclass
class LensResult:
    """Logit-lens measurements of one sequence: rows are taps 0..L-1, columns positions."""

    kl: np.ndarray  # [L, T]
    overlap: np.ndarray  # [L, T]
    top_ids: np.ndarray | None = None  # [L, T, n_top] most likely tokens at each tap and position
    top_probs: np.ndarray | None = None  # [L, T, n_top]

    def mean(self, positions: slice | np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
        """KL and overlap per layer, averaged over the chosen positions (all by default)."""
        cols = slice(None) if positions is None else positions
        return self.kl[:, cols].mean(axis=1), self.overlap[:, cols].mean(axis=1)


@torch.inference_mode()
def logit_lens(model, ids: Sequence[int], k: int = 5, direction: str = "layer||final", n_top: int = 0,
               include_output: bool = False, start: int = 0, cap: Capture | None = None) -> LensResult:
    """Logit lens of one sequence at taps 0..L-1 (and the final residual h_L if `include_output`).

    Only positions `start`.. are read out (the unembedding dominates the cost), so columns are positions
    start..T-1. `cap`, a capture of the same `ids`, saves the forward pass.
    """
    if k < 1:
        raise ValueError(f"k must be at least 1, got {k}")
    ad = adapter(model)
    n = len(ids)
    if not 0 <= start < n:
        raise ValueError(f"start must lie in 0..{n - 1}, got {start}")
    cap = cap if cap is not None else capture(model, ids, parts="io", logits_from=start)
    if start < cap.logits_from:
        raise ValueError(f"the capture holds logits from position {cap.logits_from} on; the lens reads from {start}")
    final_logits = cap.logits[start - cap.logits_from:]
    final_logp = torch.log_softmax(final_logits, dim=-1)
    taps = [h[start:] for h in cap.inputs] + ([cap.outputs[-1][start:]] if include_output else [])
    kls, overlaps, top_ids, top_probs = [], [], [], []
    dtype = next(model.parameters()).dtype
    for h in taps:
        logits = ad.readout(h.to(dtype)).float()  # KL and overlap in float32, whatever the weights' dtype
        logp = torch.log_softmax(logits, dim=-1)
        kls.append(kl_divergence(logp, final_logp, direction).cpu())
        overlaps.append(topk_overlap(logits, final_logits, k).cpu())
        if n_top:
            values, indices = logp.topk(n_top, dim=-1)
            top_ids.append(indices.cpu())
            top_probs.append(values.exp().cpu())
        del logits, logp
    return LensResult(
        kl=torch.stack(kls).numpy(), overlap=torch.stack(overlaps).numpy(),
        top_ids=torch.stack(top_ids).numpy() if n_top else None,
        top_probs=torch.stack(top_probs).numpy() if n_top else None,
    )


# --------------------------------------------------------------------------------------------------
# Effective depth (the three rules of Hu, Zhou & Zhang), 0-based layer indices
# --------------------------------------------------------------------------------------------------


def effective_depth_kl(kl_curve: Sequence[float], fraction: float = 0.5) -> int:
    """First layer l in 0..L-2 whose KL is below `fraction` of the curve's maximum; -1 if none."""
    kl = np.asarray(kl_curve, dtype=float)
    below = np.nonzero(kl[:-1] < fraction * kl.max())[0]
    return int(below[0]) if len(below) else -1


def effective_depth_overlap(overlap_curve: Sequence[float], threshold: float = 0.3) -> int:
    """First layer l in 0..L-2 whose top-k overlap exceeds `threshold`; -1 if none."""
    ov = np.asarray(overlap_curve, dtype=float)
    above = np.nonzero(ov[:-1] > threshold)[0]
    return int(above[0]) if len(above) else -1


def effective_depth_cosine(cos_curve: Sequence[float]) -> int:
    """Last layer l in 0..L-2 where the (averaged) cosine curve turns from negative to non-negative; -1 if none."""
    c = np.asarray(cos_curve, dtype=float)
    crossings = [l for l in range(len(c) - 1) if c[l] < 0 <= c[l + 1]]
    return crossings[-1] if crossings else -1


def depth_ratio(effective_depth: int, n_layers: int) -> float:
    """(ED + 1) / L, the share of the depth in use."""
    return (effective_depth + 1) / n_layers


def lens_table(model, tokenizer, ids: Sequence[int], start: int, n_positions: int = 24, n_top: int = 3) -> dict:
    """The explorer's table of one sequence, as JSON: the input tokens at positions start..start+n_positions-1
    (`tokens[t]`), and at each tap l the lens's `n_top` likeliest next tokens there (`top_tokens[l][t]`), their
    probabilities (`top_probs[l][t]`) and the KL to the model's own output (`kl[l][t]`)."""
    end = min(start + n_positions, len(ids))
    result = logit_lens(model, list(ids)[:end], n_top=n_top, start=start)
    return {
        "tokens": [tokenizer.decode([t]) for t in list(ids)[start:end]],
        "top_tokens": [[[tokenizer.decode([int(i)]) for i in pos] for pos in layer] for layer in result.top_ids],
        "top_probs": result.top_probs.tolist(), "kl": result.kl.tolist(),
    }


def cut_points(effective_depths: Sequence[int]) -> list[int]:
    """Candidate depths (blocks kept) from effective-depth layers: tap l is what l blocks produce."""
    return sorted({int(d) for d in effective_depths if d is not None and d > 0})


def lens_cut_points(curves: dict[str, np.ndarray], kl_fraction: float, overlap_threshold: float) -> tuple[int, int, list[int]]:
    """(KL effective depth, overlap effective depth, candidate cut points) from mean curves."""
    ed_kl = effective_depth_kl(curves["kl"].mean(0), kl_fraction)
    ed_ov = effective_depth_overlap(curves["overlap"].mean(0), overlap_threshold)
    return ed_kl, ed_ov, cut_points([ed_kl, ed_ov])
