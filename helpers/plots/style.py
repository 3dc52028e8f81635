"""The book's figure style and the pieces its figures share: palette, layout, token labels, bars by layer,
heatmaps."""

from __future__ import annotations

import functools
import random
from collections.abc import Mapping, Sequence

import matplotlib.pyplot as plt
import numpy as np

PALETTE = ("#1f5f8b", "#d1495b", "#edae49", "#00798c", "#66a182", "#8d6a9f", "#2e4057")
# One colour per decoding method, in every figure that shows methods: a reader learns them once.
METHOD_COLOURS = {"greedy": PALETTE[0], "low_temperature": PALETTE[2], "temperature": PALETTE[4], "power": PALETTE[1],
                  "smc": PALETTE[5], "best_of_n": PALETTE[3], "majority": PALETTE[6]}
ROW_METHODS = {"low": "low_temperature"}  # a comparison row's short keys (`helpers.chapters.power_sampling`) that differ
# Chapter 03's two ways to cut a model, in colours of their own (not a decoding method's)
TRUNCATION_COLOURS = {"stitch": "#3a3a3a", "naive": "#a0522d"}


# One colour per model, in every figure that tells models apart, none of them a method's: the embedded models by
# name, any other model (a hub checkpoint, a user's folder) from MODEL_SPARE in the order the figure meets it.
MODEL_COLOURS = {"smollm2-135m": "#8c564b", "gemma-3-270m": "#b5179e", "qwen2.5-coder-0.5b": "#7a7a14",
                 "qwen2.5-coder-1.5b": "#111111"}
MODEL_SPARE = ("#e07b00", "#4c9ed9", "#7f7f7f", "#2ca02c")


def model_colour(name: str, order: int = 0) -> str:
    """The colour of a model in every figure: its own where the book names one, else the `order`-th spare."""
    return MODEL_COLOURS.get(name, MODEL_SPARE[order % len(MODEL_SPARE)])


# Shades for the parts of a block (attention, MLP, the whole block) in chapter 01's bars: greys, so that no part reads
# as a decoding method
PART_SHADES = ("#5a5a5a", "#9e9e9e", "#d6d6d6")


def method_colour(key: str) -> str:
    """The colour of a decoding method, by its name or a comparison row's key for it."""
    return METHOD_COLOURS[ROW_METHODS.get(key, key)]


METHOD_LABELS = {"greedy": "greedy", "low_temperature": "low temperature (T = 1/α)", "temperature": "T = 1",
                 "power": "MH power sampling", "smc": "SMC", "best_of_n": "best-of-k", "majority": "majority vote"}


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


def finish(fig):
    """Lay out and close a finished figure: the cell that returns it (or the glue that holds it) shows it once."""
    fig.tight_layout()
    plt.close(fig)
    return fig


def legend_below(fig, axes, *, max_columns: int = 6, **kwargs) -> None:
    """One legend under a figure's panels, each label once (the first panel's handle), where it covers no point of
    any panel; `kwargs` go to `Figure.legend` (a placement of one's own). The caller leaves room for it in its
    layout."""
    seen: dict[str, object] = {}
    for ax in axes:
        for handle, label in zip(*ax.get_legend_handles_labels(), strict=True):
            seen.setdefault(label, handle)
    fig.legend(list(seen.values()), list(seen), **{"loc": "lower center", "ncol": min(len(seen), max_columns),
                                                   "fontsize": 8, "frameon": False, **kwargs})


def no_figure(message: str):
    """A small figure that says in words why a build has nothing to draw (a glued figure must exist to be shown)."""
    fig, ax = plt.subplots(figsize=(7.0, 0.9))
    ax.axis("off")
    ax.text(0.5, 0.5, message, ha="center", va="center", fontsize=10, color="0.3", wrap=True)
    return finish(fig)


@functools.cache
def _font_charmap() -> frozenset[int]:
    """Code points the figures' font can draw (Qwen's intermediate layers predict Chinese tokens, say)."""
    from matplotlib import font_manager, ft2font

    path = font_manager.findfont(font_manager.FontProperties(family=plt.rcParams["font.family"]))
    return frozenset(ft2font.FT2Font(path).get_charmap())


def token_label(token: str, width: int = 7) -> str:
    """A token made visible: spaces as '·', newlines as '⏎', empty as '∅', characters the font lacks as '□'."""
    drawable = _font_charmap()
    text = "".join(ch if ord(ch) in drawable or ch in " \n" else "□" for ch in token)
    return (text.replace(" ", "·").replace("\n", "⏎") or "∅")[:width]


def layer_bars(series: Mapping[str, Sequence[float]], ylabel: str, title: str | None = None, ax=None,
               ylim: tuple[float, float] | None = None):
    """Overlapping bars per layer, one series per label in a shade of `PART_SHADES`, the smallest bar drawn in front
    (the papers' style); a bar the axis cuts is named by its value above the axis."""
    own = ax is None
    if own:
        fig, ax = plt.subplots(figsize=(6.5, 3.0))
    values = {k: np.asarray(v, dtype=float) for k, v in series.items()}
    n = len(next(iter(values.values())))
    for l in range(n):
        order = sorted(values, key=lambda k: -abs(values[k][l]))  # largest at the back
        for z, key in enumerate(order):
            colour = PART_SHADES[list(values).index(key) % len(PART_SHADES)]
            ax.bar(l, values[key][l], width=0.9, color=colour, edgecolor="white", lw=0.4, zorder=2 + z,
                   label=key if l == 0 else None)
    ax.set(xlabel="layer index l", ylabel=ylabel, xlim=(-0.6, n - 0.4))
    if ylim:
        ax.set_ylim(*ylim)
        for l in range(n):  # a bar the axis cuts says so, with its value
            top = max(values[k][l] for k in values)
            if top > ylim[1]:
                ax.annotate(f"↑{top:.3g}", (l, ylim[1]), xytext=(0, 2), textcoords="offset points", ha="center",
                            va="bottom", fontsize=6.5, zorder=20, annotation_clip=False)
    ax.axhline(0, color="black", lw=0.6, zorder=10)
    ax.legend(fontsize=8)
    if title:
        ax.set_title(title)
    if own:
        return finish(fig)
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
        return finish(fig)
    return ax
