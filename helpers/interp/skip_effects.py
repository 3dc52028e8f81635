"""Layer-skip effects (Csordás et al., section 3.2): what removing a block's write changes in later blocks and
in the output, at the current token or at future tokens only, and the depth score built on them."""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from helpers.interp.interventions import Reference, Skip, effects
from helpers.models.adapter import adapter


def future_splits(T: int, n: int = 4, seed: int = 123, step: int = 8, first: int = 8, margin: int = 4) -> list[int]:
    """Split positions as in Csordás et al.: `n` of first, first+step, … < T − margin, in a seeded random order."""
    candidates = list(range(first, T - margin, step))
    random.Random(seed).shuffle(candidates)
    if not candidates:
        raise ValueError(f"a sequence of {T} tokens is too short for split positions from {first} in steps of {step}")
    return sorted(candidates[:n])


@dataclass
class SkipEffects:
    """Skip effects of one sequence, reduced over positions with max (and mean) for each split position.

    matrix[k, s, l]: relative change of block l's contribution when block s is skipped before split k,
    measured on positions ≥ split k (all positions for the 'current' variant, split None);
    output[k, s]: the same for the output distribution (L2 distance, at most √2).
    """

    part: str
    splits: list[int | None]
    matrix: np.ndarray  # [K, L, L] max over positions
    output: np.ndarray  # [K, L] max over positions
    matrix_mean: np.ndarray  # [K, L, L] mean over positions
    output_mean: np.ndarray  # [K, L]

    def as_dict(self) -> dict:
        return {"part": self.part, "splits": self.splits, **{k: np.round(getattr(self, k), 6).tolist()
                for k in ("matrix", "output", "matrix_mean", "output_mean")}}

    @classmethod
    def from_dict(cls, d: dict) -> SkipEffects:
        return cls(d["part"], d["splits"], *(np.asarray(d[k]) for k in ("matrix", "output", "matrix_mean",
                                                                          "output_mean")))


def skip_effects(model, ids: Sequence[int], part: str = "layer", splits: Sequence[int | None] = (None,),
                 reference: Reference | None = None, batch_size: int = 1, protect_first: int = 1) -> SkipEffects:
    """Skip every block (or its `part`) in turn, once per split position.

    With split t the skip covers positions [protect_first, t) and effects are read on positions ≥ t (future
    tokens); with t None it covers [protect_first, T) and effects are read everywhere (current tokens).
    """
    ids = list(ids)
    L, T = adapter(model).n_layers, len(ids)
    for t in splits:
        if t is not None and not protect_first < t < T:
            raise ValueError(f"split positions must lie in {protect_first + 1}..{T - 1}, got {t}")
    edits = [Skip(s, part, protect_first, t) for t in splits for s in range(L)]
    reads = [0 if t is None else t for t in splits for _ in range(L)]  # only where effects are measured
    eff = effects(model, ids, edits, reference, batch_size=batch_size, read_from=reads)
    rel = eff.relative.reshape(len(splits), L, L, T)
    out = eff.output.reshape(len(splits), L, T)
    K = len(splits)
    matrix, matrix_mean = np.zeros((K, L, L)), np.zeros((K, L, L))
    output, output_mean = np.zeros((K, L)), np.zeros((K, L))
    for k, t in enumerate(splits):
        cols = slice(0 if t is None else t, T)
        matrix[k], matrix_mean[k] = rel[k][..., cols].max(-1), rel[k][..., cols].mean(-1)
        output[k], output_mean[k] = out[k][..., cols].max(-1), out[k][..., cols].mean(-1)
    return SkipEffects(part, list(splits), matrix, output, matrix_mean, output_mean)


def later_layer_profile(matrix: np.ndarray) -> np.ndarray:
    """Each skipped layer's mean effect on the layers after it: Σ_l matrix[s, l] / max(1, L − 1 − s)."""
    L = matrix.shape[-1]
    return matrix.sum(-1) / np.maximum(1, L - 1 - np.arange(L))


def depth_score(profile: Sequence[float]) -> float:
    """Centre of mass of an effect profile over 0-based layer indices, Σ l·m_l / Σ m_l (Csordás et al.)."""
    m = np.asarray(profile, dtype=float)
    if m.sum() <= 0:
        raise ValueError("an effect profile with no positive mass has no depth score")
    return float((np.arange(len(m)) * m).sum() / m.sum())
