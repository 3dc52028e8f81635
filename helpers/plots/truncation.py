"""Truncated models (chapter 03): agreement with the full model and accuracy against depth."""

from __future__ import annotations

from collections.abc import Mapping
from itertools import pairwise

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.ticker import FuncFormatter, MaxNLocator

from helpers.plots.style import (
    METHOD_COLOURS,
    METHOD_LABELS,
    PALETTE,
    TRUNCATION_COLOURS,
    finish,
    model_colour,
    no_figure,
)


def _contiguous(depths: list[int]) -> bool:
    """Whether sorted depths run a block apart (a line may join them), allowing the one gap up to the full depth."""
    inner = depths[:-1]
    return all(b - a == 1 for a, b in pairwise(inner))


def truncation_agreement(sweep):
    """KL of each truncation from the full model, and the perplexity of the full model's solutions, per depth."""
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(10, 3.3))
    for method, by_depth in sweep.agreement.items():
        d = sorted(by_depth)  # naive truncation may run at a few depths only: markers alone, no line across gaps
        style = "o-" if _contiguous(d) else "o"
        ax1.plot(d, [by_depth[x]["kl"] for x in d], style, color=TRUNCATION_COLOURS[method], label=method)
        ax2.plot(d, [np.exp(by_depth[x]["nll"]) for x in d], style, color=TRUNCATION_COLOURS[method], label=method)
    for ax in (ax1, ax2):
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))  # blocks come whole
    first = next(iter(sweep.agreement.values()))
    ax2.axhline(np.exp(first[sweep.n_layers]["nll_full"]), color="grey", ls=":", label="full model")
    ax1.set(xlabel="depth (blocks run)", ylabel="KL(truncated ‖ full) [nats]", title="Distance from the full model")
    ax1.set_yscale("symlog", linthresh=0.01)  # 0 at full depth, then decades: a tick per decade, named plainly
    top = max((v["kl"] for by_depth in sweep.agreement.values() for v in by_depth.values()), default=1.0)
    ax1.set_yticks([0] + [10.0 ** e for e in range(-2, int(np.ceil(np.log10(max(top, 0.01)))) + 1)])
    ax1.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
    ax2.set(xlabel="depth (blocks run)", ylabel="perplexity", yscale="log", title="Perplexity of the full model's solutions")
    for axis in (ax2.yaxis.set_major_formatter, ax2.yaxis.set_minor_formatter):  # 3, 4, 6, 10, not 6 × 10⁰
        axis(FuncFormatter(lambda v, _: f"{v:g}"))
    ax1.legend()
    ax2.legend()
    return finish(fig)


def accuracy_against_depth(sweep, critical: dict):
    """Greedy accuracy (95% intervals) per depth and method, the critical depth, and what each depth keeps."""
    from helpers.evaluation.stats import wilson

    n = len(sweep.full)
    fig, (ax, axc) = plt.subplots(1, 2, figsize=(10, 3.9), gridspec_kw={"width_ratios": [3, 2]})
    for method, by_depth in sweep.accuracy.items():
        d = sorted(by_depth)  # naive truncation may run at a few depths only
        acc = np.array([by_depth[x] for x in d])
        lo, hi = np.array([wilson(a * n, n) for a in acc]).T
        if _contiguous(d):
            ax.plot(d, 100 * acc, "o-", color=TRUNCATION_COLOURS[method], label=method)
            ax.fill_between(d, 100 * lo, 100 * hi, color=TRUNCATION_COLOURS[method], alpha=0.12, lw=0)
        else:  # a few depths only: points with their intervals, no line across the depths that did not run
            ax.errorbar(d, 100 * acc, yerr=[100 * (acc - lo), 100 * (hi - acc)], fmt="o", color=TRUNCATION_COLOURS[method],
                        capsize=3, label=method)
    first = next(iter(sweep.accuracy.values()))
    ax.axhline(100 * first[sweep.n_layers], color="grey", ls=":", label="full model")
    marks: dict[int, str] = {}  # named on a top axis, where no curve or line of the panel runs through the names
    for cut in sweep.cuts:  # chapter 02's rule on this chapter's problems: where the lens says to cut
        if min(sweep.depths) <= cut <= sweep.n_layers:
            ax.axvline(cut, color="0.5", ls=":", lw=1)
            marks[cut] = "lens cut"
    if critical.get("stitch") is not None:
        ax.axvline(critical["stitch"], color=TRUNCATION_COLOURS["stitch"], ls="--", lw=1)
        marks[critical["stitch"]] = "critical" if critical["stitch"] not in marks else "critical = lens cut"
    if marks:
        top = ax.secondary_xaxis("top")
        top.set_xticks(list(marks), list(marks.values()), fontsize=7)
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set(xlabel="depth (blocks run)", ylabel="greedy accuracy [%] (95% band)", title=f"{sweep.model}: accuracy against depth")
    ax.legend(loc="upper left", bbox_to_anchor=(0, -0.2), ncol=4, fontsize=8, frameon=False)  # below the axes: no
    # line of the sweep runs through it
    full, d = sweep.costs[sweep.n_layers], sweep.depths
    axc.plot(d, [100 * sweep.costs[x].params_total / full.params_total for x in d], "s-", color=PALETTE[3], label="parameters")
    axc.plot(d, [100 * sweep.costs[x].flops_per_token / full.flops_per_token for x in d], "^-", color=PALETTE[4],
             label="FLOPs per token")
    axc.xaxis.set_major_locator(MaxNLocator(integer=True))
    axc.set(xlabel="depth (blocks run)", ylabel="% of the full model", title="What a depth keeps")
    axc.legend(loc="upper left", bbox_to_anchor=(0, -0.2), ncol=2, fontsize=8, frameon=False)
    return finish(fig)


def accuracy_by_model(sweeps: Mapping, critical: Mapping[str, int | None], method: str = "stitch"):
    """Each model's accuracy (95% band) against the number of blocks removed, with its critical depth marked (a ring)
    and its lens cut points (chapter 02's rules on these problems): a triangle on the curve where the sweep decoded
    that depth, a hollow one on the axis's floor where it did not."""
    from helpers.evaluation.stats import wilson

    fig, ax = plt.subplots(figsize=(7, 3.4))
    for i, (name, s) in enumerate(sweeps.items()):
        n, d = len(s.full), sorted(s.accuracy[method], reverse=True)
        removed = [s.n_layers - x for x in d]
        acc = np.array([s.accuracy[method][x] for x in d])
        lo, hi = np.array([wilson(a * n, n) for a in acc]).T
        colour = model_colour(name, i)
        ax.plot(removed, 100 * acc, "o-", color=colour, label=f"{name} ({s.n_layers} blocks)")
        ax.fill_between(removed, 100 * lo, 100 * hi, color=colour, alpha=0.12, lw=0)
        c = critical.get(name)
        if c is not None and c in s.accuracy[method]:  # a ring on the point itself: lines at one depth would merge
            ax.plot(s.n_layers - c, 100 * s.accuracy[method][c], "o", ms=14, mfc="none", mec=colour, mew=1.6)
        for cut in s.cuts:  # on the floor, each model a step higher: two models' cuts may share a position
            swept = cut in s.accuracy[method]
            ax.plot(s.n_layers - cut, 100 * s.accuracy[method][cut] if swept else 3 * i, "^", ms=8, mec=colour,
                    mew=1.4, mfc=colour if swept else "white", clip_on=False, zorder=3)
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))  # blocks come whole
    ax.set(xlabel=f"blocks removed ({method})", ylabel="greedy accuracy [%] (95% band)",
           title="How many blocks each model can lose (ring: critical depth; ▲ lens cut)")
    ax.set_ylim(bottom=0)
    ax.legend()
    return finish(fig)


def answer_lengths(studies: Mapping, marks: Mapping[str, int]):
    """Per model, the share of answers that have ended (EOS) within t new tokens, against t, for greedy and T = 1 at
    the full depth (solid) and the critical depth (dashed); a curve that levels off below 100% leaves that share
    unfinished at the decode's cap. `marks` names caps to draw (label -> tokens), such as the one the book ran."""
    from helpers.evaluation.lengths import finished_within

    if not studies:
        return no_figure("This build ran no length study (length_cap is not set).")
    models = list(studies)
    fig, axes = plt.subplots(1, len(models), figsize=(3.6 * len(models) + 0.4, 4.3), sharey=True, squeeze=False)
    for ax, name in zip(axes[0], models, strict=True):
        a = studies[name]
        t = np.arange(0, a.cap + 1)
        for (method, depth), records in a.records.items():
            flat = [r for per in records for r in per]
            lengths = np.array([r["n_tokens"] if finished_within(r, a.cap) else a.cap + 1 for r in flat])
            ended = 100 * (lengths[None, :] <= t[:, None]).mean(axis=1)
            ax.plot(t, ended, color=METHOD_COLOURS[method], ls="-" if depth == a.n_layers else "--", lw=1.5,
                    label=f"{METHOD_LABELS[method]}, {depth} of {a.n_layers} blocks")
        for label, cap in marks.items():  # the label beside its line, low down, where the curves have risen past it
            ax.axvline(cap, color="0.4", ls=":", lw=1)
            ax.annotate(f"{label}\n({cap})", (cap, 0.03), xycoords=("data", "axes fraction"), ha="left", va="bottom",
                        fontsize=7, color="0.3", xytext=(3, 0), textcoords="offset points")
        # past the longest answer that ended every curve is flat: each panel's axis stops a little after its own
        longest = max([r["n_tokens"] for records in a.records.values() for per in records for r in per
                       if finished_within(r, a.cap)] + list(marks.values()) + [1])
        end = min(a.cap, 1.15 * longest)
        ax.set(xlabel=f"new tokens (decoded up to {a.cap}" + ("; flat past the axis)" if end < a.cap else ")"),
               title=name, xlim=(0, end), ylim=(0, 101))
        ax.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.2), ncol=2, frameon=False,
                  handlelength=1.6, columnspacing=0.8)  # under the panel: inside, it sat on the cut's curves
    axes[0][0].set_ylabel("answers ended [%]")
    return finish(fig)
