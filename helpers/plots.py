"""One figure style for the book, and the figures the chapters share."""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence

import matplotlib.pyplot as plt
import numpy as np

PALETTE = ("#1f5f8b", "#d1495b", "#edae49", "#00798c", "#66a182", "#8d6a9f", "#2e4057")


def setup(seed: int = 0) -> None:
    """Book-wide style: crisp inline figures, quiet spines, one palette; seeds python, numpy and torch."""
    import torch

    try:
        from matplotlib_inline.backend_inline import set_matplotlib_formats

        set_matplotlib_formats("retina")
    except Exception:  # not in a notebook
        pass
    plt.rcParams.update({
        "figure.figsize": (7.0, 3.2), "figure.dpi": 100, "axes.spines.top": False, "axes.spines.right": False,
        "axes.grid": True, "grid.alpha": 0.25, "axes.prop_cycle": plt.cycler(color=PALETTE),
        "font.size": 10, "axes.titlesize": 11, "legend.frameon": False,
    })
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)


def lens_curves(curves: Mapping[str, Mapping[str, np.ndarray]], marks: Mapping[str, Mapping[str, int]] | None = None,
                title: str | None = None):
    """KL(layer || final) and top-5 overlap per layer for each model, with the spread across problems.

    `curves[model]` holds 'kl' and 'overlap' arrays of shape [problems, layers]; the line is the mean over
    problems and the band its 10th–90th percentiles. `marks[model]` maps a label to a layer to mark.
    """
    fig, (ax_kl, ax_ov) = plt.subplots(1, 2, figsize=(10, 3.4))
    for i, (name, c) in enumerate(curves.items()):
        colour = PALETTE[i % len(PALETTE)]
        for ax, key in ((ax_kl, "kl"), (ax_ov, "overlap")):
            values = np.asarray(c[key])
            layers = np.arange(values.shape[1])
            ax.plot(layers, values.mean(0), color=colour, lw=1.8, label=name)
            if values.shape[0] > 1:
                lo, hi = np.percentile(values, [10, 90], axis=0)
                ax.fill_between(layers, lo, hi, color=colour, alpha=0.18, lw=0)
        for label, layer in (marks or {}).get(name, {}).items():
            if layer is not None and layer >= 0:
                ax = ax_kl if "KL" in label else ax_ov
                ax.axvline(layer, color=colour, ls="--", lw=1)
                ax.annotate(label, (layer, 0.95), xycoords=("data", "axes fraction"), rotation=90,
                            ha="right", va="top", fontsize=8, color=colour)
    ax_kl.set(xlabel="layer l (input of block l)", ylabel="KL(layer ‖ final) [nats]", title="Logit-lens KL")
    ax_ov.set(xlabel="layer l (input of block l)", ylabel="top-5 overlap", ylim=(0, 1.02), title="Top-5 overlap")
    ax_ov.axhline(0.3, color="grey", lw=0.8, ls=":")
    if len(curves) > 1:
        ax_kl.legend()
    if title:
        fig.suptitle(title)
    fig.tight_layout()
    return fig


def token_label(token: str, width: int = 7) -> str:
    """A token made visible: spaces as '·', newlines as '⏎', empty as '∅'."""
    return (token.replace(" ", "·").replace("\n", "⏎") or "∅")[:width]


def lens_token_grid(tokens: Sequence[str], top_tokens: Sequence[Sequence[str]], top_probs: np.ndarray,
                    layers: Sequence[int], title: str | None = None):
    """A static view of the lens on one sequence: the top-1 token at chosen layers (rows) and positions."""
    probs = np.asarray(top_probs)
    fig, ax = plt.subplots(figsize=(max(6.0, 0.62 * len(tokens)), 0.42 * len(layers) + 1.2))
    ax.imshow(probs, aspect="auto", cmap="Blues", vmin=0, vmax=1)
    for r in range(len(layers)):
        for c in range(len(tokens)):
            ax.text(c, r, token_label(top_tokens[r][c]), ha="center", va="center", fontsize=7,
                    color="white" if probs[r, c] > 0.6 else "black")
    ax.set_yticks(range(len(layers)), [f"l={l}" for l in layers])
    ax.set_xticks(range(len(tokens)), [token_label(t) for t in tokens], rotation=60, fontsize=7)
    ax.set_xlabel("input token at each position (the lens predicts the next one)")
    ax.grid(False)
    if title:
        ax.set_title(title)
    fig.tight_layout()
    return fig


def layer_bars(series: Mapping[str, Sequence[float]], ylabel: str, title: str | None = None, ax=None,
               ylim: tuple[float, float] | None = None):
    """Overlapping bars per layer, one series per label, the smallest bar drawn in front (the papers' style)."""
    own = ax is None
    if own:
        fig, ax = plt.subplots(figsize=(6.5, 3.0))
    values = {k: np.asarray(v, dtype=float) for k, v in series.items()}
    n = len(next(iter(values.values())))
    for l in range(n):
        order = sorted(values, key=lambda k: -abs(values[k][l]))  # largest at the back
        for z, key in enumerate(order):
            colour = PALETTE[list(values).index(key) % len(PALETTE)]
            ax.bar(l, values[key][l], width=0.9, color=colour, zorder=2 + z, label=key if l == 0 else None)
    ax.set(xlabel="layer index l", ylabel=ylabel, xlim=(-0.6, n - 0.4))
    if ylim:
        ax.set_ylim(*ylim)
    ax.axhline(0, color="black", lw=0.6, zorder=10)
    ax.legend(fontsize=8)
    if title:
        ax.set_title(title)
    if own:
        fig.tight_layout()
        return fig
    return ax


def heatmap(matrix: np.ndarray, xlabel: str, ylabel: str, title: str | None = None, ax=None, vmin: float | None = 0,
            vmax: float | None = 1, cmap: str = "viridis", colorbar: str | None = None,
            xticklabels: Sequence[str] | None = None, origin: str = "upper"):
    """A matrix as an image with a colour bar (layer effects, erasure, attributions, map errors)."""
    own = ax is None
    if own:
        fig, ax = plt.subplots(figsize=(6.5, 3.6))
    image = ax.imshow(np.asarray(matrix), aspect="auto", interpolation="nearest", vmin=vmin, vmax=vmax, cmap=cmap,
                      origin=origin)
    ax.set(xlabel=xlabel, ylabel=ylabel)
    ax.grid(False)
    if xticklabels is not None:
        ax.set_xticks(range(len(xticklabels)), [token_label(t, 9) for t in xticklabels], rotation=60, fontsize=7)
    bar = ax.figure.colorbar(image, ax=ax, fraction=0.046, pad=0.02)
    if colorbar:
        bar.set_label(colorbar)
    if title:
        ax.set_title(title)
    if own:
        fig.tight_layout()
        return fig
    return ax
