"""What power sampling costs and truncation saves (chapter 05): tokens, FLOPs, accuracy at equal compute, net
cost."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.ticker import MaxNLocator

from helpers.plots.style import finish, method_colour, model_colour


def token_counts(panels: Mapping[str, Mapping[str, np.ndarray]], measured: Sequence[dict] | None = None,
                 measured_panel: str | None = None):
    """Decoded tokens per answer against its length: plain decoding, the report's formula and the exact schedule
    (reference and exact mode, one line where they count alike), one panel per setting; `measured` power records as
    dots on `measured_panel`."""
    fig, axes = plt.subplots(1, len(panels), figsize=(5 * len(panels), 3.4), squeeze=False)
    mh = method_colour("power")  # every count but plain decoding's is MH's: its colour, a line style each
    for ax, (title, c) in zip(axes[0], panels.items(), strict=True):
        ax.plot(c["length"], c["plain"], color=method_colour("greedy"), lw=1.2, label="plain decoding (T)")
        ax.plot(c["length"], c["formula"], color=mh, lw=1.6, ls=":", label="report: T + N·T²/(4B)")
        if np.allclose(c["reference"], c["exact"]):  # without a cap past the answer the modes count alike: one line
            ax.plot(c["length"], c["reference"], color=mh, lw=1.8, label="exact count, either mode (alike here)")
        else:
            ax.plot(c["length"], c["reference"], color=mh, lw=1.8, label="exact count, reference mode")
            ax.plot(c["length"], c["exact"], color=mh, lw=1.4, ls="--", label="exact count, exact mode")
        if measured and title == measured_panel:
            ax.scatter([r["n_tokens"] for r in measured], [r["decoded_tokens"] for r in measured], s=12,
                       color="white", edgecolor=mh, lw=0.7, zorder=3, label="measured chains (reference mode)")
        ax.set(xlabel="answer length T [tokens]", ylabel="decoded tokens per answer", title=title)
    axes[0][0].legend(fontsize=7)
    if measured_panel:
        axes[0][-1].legend(fontsize=7)
    return finish(fig)


def flops_saved(curves: Mapping[str, Mapping], needed: Mapping[str, float]):
    """Share of FLOPs per token saved against blocks removed, per model; dotted lines: the saving a power sampler
    needs to cost no more than full-depth greedy, at each token multiplier in `needed` (label → share), drawn faint
    and behind the curves and named together in one list inside the panel, so that lines a point apart neither merge
    their names nor squeeze the panel. Models whose curves coincide (one architecture under two names) share one line
    and one legend entry; each later line is thinner, so one drawn over another of nearly its shape leaves it showing."""
    fig, ax = plt.subplots(figsize=(7.5, 4.3))
    groups: list[tuple[list[str], Mapping]] = []  # curves that coincide, drawn once
    for name, c in curves.items():
        same = next((g for g in groups if len(g[1]["removed"]) == len(c["removed"])
                     and np.allclose(g[1]["saved"], c["saved"], atol=1e-4)), None)
        if same:
            same[0].append(name)
        else:
            groups.append(([name], c))
    for i, (names, c) in enumerate(groups):
        ax.plot(c["removed"], 100 * c["saved"], ("-", "--", "-.", ":")[i % 4], marker="osD^v"[i % 5], ms=3.5,
                mfc="white" if i % 2 else None, lw=max(0.8, 4.2 - 1.1 * i), color=model_colour(names[0], i),
                zorder=3, label=" = ".join(names) + f" ({c['layers']} blocks)")
    right = max(max(c["removed"]) for c in curves.values()) if curves else 1
    shares = sorted(needed.items(), key=lambda kv: -kv[1])
    for _, share in shares:
        ax.axhline(100 * share, color="0.45", ls=":", lw=0.9, zorder=1)
    if shares:  # one list at the left, where every curve is still low: under the lines, or above them if they are low
        low, high = 100 * shares[-1][1], 100 * shares[0][1]
        below = low > 50
        ax.text(0.02, low - 3 if below else high + 3,
                "\n".join(["the search needs (dotted):"] + [f"{label}: {100 * share:.0f}%" for label, share in shares]),
                transform=ax.get_yaxis_transform(), fontsize=7, color="0.3", va="top" if below else "bottom",
                bbox={"facecolor": "white", "edgecolor": "none", "alpha": 0.85, "pad": 1.5}, zorder=4)
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))  # blocks come whole
    ax.set(xlabel="blocks removed", ylabel="FLOPs per token saved [%]", ylim=(0, 105), xlim=(0, right),
           title="What truncation saves (curves), and what the search needs (dotted)")
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(0, -0.16), ncol=2, frameon=False)  # below: covers nothing
    return finish(fig)


def accuracy_at_compute(points, front):
    """Accuracy (95% Wilson interval) against generation FLOPs per answer for every method and depth; the
    Pareto front as a line. Colour: method (the book's one colour per method); marker: depth; hollow markers:
    compute-matched baselines; faded markers:
    points on the searches' subset of the problems, which the front leaves out (the legend's † entry). Marker, colour
    and fade say all a point is, so no point carries a label that could crowd its neighbours."""
    from helpers.evaluation.stats import wilson

    fig, ax = plt.subplots(figsize=(9.5, 4.2))
    depths = sorted({p.depth for p in points}, reverse=True)
    shapes = ("o", "D", "s", "^", "v")  # full depth first
    n = max(p.n_problems for p in points)
    for p in points:
        apart = p.n_problems < n  # on the searches' subset: off the front, faded and marked
        colour = _point_colour(p.method)
        marker = shapes[depths.index(p.depth) % len(shapes)]
        lo, hi = wilson(p.accuracy * p.n_problems, p.n_problems)
        ax.errorbar(p.flops / 1e9, 100 * p.accuracy, yerr=[[100 * (p.accuracy - lo)], [100 * (hi - p.accuracy)]],
                    fmt=marker, ms=9 if p.method in ("power", "SMC") else 6, color=colour, capsize=2, lw=0.7,
                    mfc="white" if p.matched else colour, alpha=0.35 if apart else 0.9, zorder=3)
    ax.plot([p.flops / 1e9 for p in front], [100 * p.accuracy for p in front], "o-", color="0.15", lw=7, ms=18,
            alpha=0.15, solid_capstyle="round", zorder=1,  # a wide band under the points it joins; a disc each, so
            label="Pareto front (grey band)" if len(front) > 1 else "Pareto front (one point: grey disc)")  # one shows
    named = {p.method.split("-")[0] + "-of-k" if "-of-" in p.method else p.method: p.method for p in points}
    for label, method in named.items():  # the colour says the method, as in every figure
        ax.plot([], [], "s", color=_point_colour(method), ls="none", label=label)
    for d in depths:  # the marker says the depth
        ax.plot([], [], shapes[depths.index(d) % len(shapes)], color="0.3", ls="none", label=f"{d} blocks")
    ax.plot([], [], "o", mfc="white", color="0.4", ls="none", label="hollow: compute-matched")
    k = min(p.n_problems for p in points)
    if k < n:
        ax.plot([], [], "o", color="0.4", alpha=0.35, ls="none",
                label=f"† faded: on the first {k} of {n} problems (off the front)")
    ax.set_xscale("log")
    ax.set(xlabel="generation GFLOPs per answer (log scale)", ylabel="accuracy [%] (95% interval)",
           title=f"Accuracy at equal compute: {points[0].model}")
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    return finish(fig)


POINT_METHODS = {"greedy": "greedy", "low temp.": "low_temperature", "T=1": "temperature", "power": "power",
                 "SMC": "smc", "best": "best_of_n", "majority": "majority"}  # chapter 05's point names, by method


def _point_colour(method: str) -> str:
    """The book's colour of a chapter 05 point's method ('best-of-4' is best-of-n's), grey for one it does not name."""
    key = POINT_METHODS.get(method) or POINT_METHODS.get(method.split("-")[0])
    return method_colour(key) if key else "0.5"


def net_cost(config, settings: Mapping[str, Mapping[str, float]], context: float = 0.0, ax=None):
    """Cost of power sampling on the stitched model relative to full-depth greedy, against the kept depth, for
    each token multiplier (label → {'multiplier', ...}: `net_cost_settings`), each in MH's colour and a line style
    of its own: the multiplier times the FLOPs per token the depth keeps; below the line at 1 the trade pays."""
    from helpers.evaluation.cost import Shape, flops_share

    own = ax is None
    if own:
        fig, ax = plt.subplots(figsize=(7, 3.2))
    L = Shape.of(config).layers
    depths = np.arange(1, L + 1)
    for i, (label, s) in enumerate(settings.items()):
        ratio = [s["multiplier"] * flops_share(config, int(d), context) for d in depths]
        ax.plot(depths, ratio, ("-", "--", ":", "-.")[i % 4], color=method_colour("power"), lw=max(1.0, 2.4 - 0.7 * i),
                label=f"{label}: ×{s['multiplier']:.2f} tokens")  # every setting is MH's: its colour, a style each
    ax.axhline(1.0, color="0.3", lw=1, ls="--", label="full-depth greedy")
    ax.set_yscale("log")
    ax.set(xlabel="blocks kept", ylabel="cost / full-depth greedy", title="Net cost of searching on a shallower model")
    ax.legend(fontsize=7)
    return finish(fig) if own else ax
