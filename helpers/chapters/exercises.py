"""The code of the book's "extend" exercises: the reference solutions, and the checks a student runs on theirs.

Each exercise asks for a small function; `check_*` calls it on many inputs against the reference and against
the rules any such function must keep, and raises `AssertionError` naming the first input it gets wrong.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np


def layer_name(layer: int | None) -> str:
    """A layer as the exercises' solutions print it: its index, or "none" where a rule finds none (None or -1)."""
    return "none" if layer is None or layer < 0 else str(layer)


def kl_below(kl_curve: Sequence[float], nats: float = 1.0) -> int:
    """Effective depth by an absolute rule: the first layer l in 0..L-2 whose lens KL is below `nats`; -1 if
    none (chapter 01's exercise; the chapter's own rule takes a fraction of the curve's maximum instead)."""
    kl = np.asarray(kl_curve, dtype=float)
    below = np.nonzero(kl[:-1] < nats)[0]
    return int(below[0]) if len(below) else -1


def kept_last_two(n_layers: int, depth: int) -> list[int]:
    """Blocks kept by a stitch that preserves the last two blocks: 0..depth-3, then L-2 and L-1 (chapter 03's
    exercise; stitch-and-preserve keeps only the last one)."""
    if not isinstance(depth, int) or not 2 <= depth <= n_layers:
        raise ValueError(f"depth must be an integer in 2..{n_layers}, got {depth!r}")
    return [*range(depth - 2), n_layers - 2, n_layers - 1]


def _curves(seed: int) -> list[np.ndarray]:
    """Lens-like KL curves: falling, flat, noisy, rising, with a zero at the last layer as the lens has."""
    rng = np.random.default_rng(seed)
    curves = []
    for n in (2, 3, 8, 24, 28):
        falling = np.sort(rng.uniform(0, 8, n))[::-1].copy()
        noisy = rng.gamma(1.0, 2.0, n)
        for c in (falling, noisy, np.full(n, 3.0), np.sort(noisy)):
            c = c.copy()
            c[-1] = 0.0
            curves.append(c)
    return curves


def check_depth_rule(rule: Callable[[Sequence[float], float], int], seed: int = 0) -> str:
    """Check a student's `rule(kl_curve, nats)` against `kl_below` on many curves and thresholds."""
    n = 0
    for curve in _curves(seed):
        for nats in (0.5, 1.0, 2.5, 10.0):
            got, want = rule(list(curve), nats), kl_below(curve, nats)
            assert isinstance(got, int | np.integer), f"the rule must return an integer layer, got {got!r}"
            assert got == want, (f"on the KL curve {np.round(curve, 2).tolist()} with {nats} nats: got {got}, "
                                 f"expected {want} (the first layer before the last whose KL is below it, or -1)")
            n += 1
    return f"passed on {n} curves and thresholds"


def check_kept_blocks(kept: Callable[[int, int], list[int]]) -> str:
    """Check a student's `kept(n_layers, depth)` against `kept_last_two` for every depth of models of 4 to 36
    blocks, and against what any truncation must keep: `depth` blocks, in order, all of them at full depth."""
    n = 0
    for n_layers in range(4, 37):
        for depth in range(2, n_layers + 1):
            got = list(kept(n_layers, depth))
            assert len(got) == depth, f"L = {n_layers}, depth {depth}: {len(got)} blocks kept, expected {depth}"
            assert got == sorted(set(got)), f"L = {n_layers}, depth {depth}: {got} is not increasing"
            assert got == kept_last_two(n_layers, depth), (
                f"L = {n_layers}, depth {depth}: got {got}, expected {kept_last_two(n_layers, depth)}")
            n += 1
    return f"passed on {n} (model, depth) pairs"
