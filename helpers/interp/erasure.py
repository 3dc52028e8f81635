"""Residual erasure (Csordás et al., section 3.3): replace the residual at one boundary and position by its mean
and measure how much the prediction of the answer moves."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch

from helpers.interp.interventions import Erase, effects
from helpers.models.adapter import adapter


@torch.inference_mode()
def mean_residual(model, sequences: Sequence[Sequence[int]]) -> torch.Tensor:
    """The baseline of erasure: the mean residual over all positions of `sequences` at every boundary [L + 1, D]."""
    from helpers.interp.residual import capture

    total, count = None, 0
    for ids in sequences:
        cap = capture(model, ids, parts="io")
        states = torch.cat([cap.inputs, cap.outputs[-1:]], dim=0)  # boundaries 0..L
        total = states.sum(1) if total is None else total + states.sum(1)
        count += states.shape[1]
    if total is None:
        raise ValueError("mean_residual needs at least one sequence")
    return total / count


def erasure_map(model, ids: Sequence[int], baseline: torch.Tensor, answer_start: int,
                batch_size: int = 16, boundaries: Sequence[int] | None = None) -> np.ndarray:
    """[L + 1, T]: erase boundary l at position t; value = max over the positions predicting the answer of ‖p − p'‖.

    The answer occupies positions answer_start..T−1, so positions answer_start−1..T−2 predict it. Only the
    given `boundaries` are computed (all by default); the other rows are NaN.
    """
    ids = list(ids)
    L, T = adapter(model).n_layers, len(ids)
    if not 1 <= answer_start < T:
        raise ValueError(f"answer_start must lie in 1..{T - 1}, got {answer_start}")
    rows = list(range(L + 1)) if boundaries is None else sorted(set(boundaries))
    edits = [Erase(l, t) for l in rows for t in range(T)]
    eff = effects(model, ids, edits, baseline=baseline, batch_size=batch_size, read_from=answer_start - 1,
                  read_to=T - 1)
    grid = np.full((L + 1, T), np.nan, dtype=np.float32)
    grid[rows] = eff.output[:, answer_start - 1:T - 1].max(-1).reshape(len(rows), T)
    return grid
