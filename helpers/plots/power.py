"""Power sampling (chapter 04): the toy model's convergence and distributions, accuracy by method, pass@k, the
N sweep."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np

from helpers.evaluation.comparison import per_model
from helpers.plots.style import METHOD_COLOURS, finish, legend_below, method_colour


def toy_convergence(result):
    """TV distance to p^α against MH steps per block for both modes and, beside it, against SMC's particle
    count, with low temperature and the noise floor on both."""
    panels = 2 if result.particles else 1
    fig, axes = plt.subplots(1, panels, figsize=(6.5 if panels == 1 else 10, 3.2), sharey=True, squeeze=False)
    ax = axes[0, 0]
    for i, (mode, tv) in enumerate(result.tv.items()):  # both modes are MH: its colour, a marker and line each
        ax.plot(result.steps, tv, ("o-", "s--")[i % 2], color=METHOD_COLOURS["power"], label=f"MH, {mode} mode")
    ax.set_xticks(result.steps)
    ax.set(xlabel="MH steps per block (N)", ylabel="TV distance to p^α",
           title=f"Metropolis–Hastings, α = {result.target.alpha:g}, {result.n_chains} chains")
    if result.particles:
        right = axes[0, 1]
        right.plot(result.particles, result.smc_tv, "s-", color=METHOD_COLOURS["smc"], label="SMC (systematic resampling)")
        right.set_xscale("log", base=2)
        right.set_xticks(result.particles, [str(k) for k in result.particles])
        right.set(xlabel="particles (K)", title=f"SMC, α = {result.target.alpha:g}, {result.n_chains} samples")
    for a in axes[0]:
        a.axhline(result.low_temperature_gap, color=METHOD_COLOURS["low_temperature"], ls=":",
                  label="low temperature (exact distance)")
        a.axhline(result.noise_floor, color="grey", ls="--", lw=0.8, label=f"noise of {result.n_chains} exact draws")
    legend_below(fig, axes[0])  # under the panels: inside, it lay on the lines near the noise floor
    fig.tight_layout(rect=(0, 0.1, 1, 1))
    plt.close(fig)
    return fig


def toy_distributions(tables, alpha: float, ax=None):
    """p, p^α and low-temperature sampling over every completion of the toy model, most likely first."""
    own = ax is None
    if own:
        fig, ax = plt.subplots(figsize=(9, 3))
    d = tables[alpha]
    order = sorted(d["p"], key=lambda k: -d["p"][k])
    x = np.arange(len(order))
    for shift, key, label in ((-0.27, "p", "p (the model: T = 1)"), (0.0, "power", "p^α (power)"),
                              (0.27, "low_temperature", "low temperature")):
        ax.bar(x + shift, [d[key][k] for k in order], 0.27, label=label,
               color=METHOD_COLOURS["temperature" if key == "p" else key])
    ax.set_xticks(x, ["".join("·ab"[t] if t else "$" for t in k) for k in order], rotation=90, fontsize=7)
    gap = 0.5 * sum(abs(d["low_temperature"][k] - d["power"][k]) for k in order)
    ax.set(ylabel="probability", xlabel="completion (a, b: tokens, $: EOS), most likely first",
           title=f"α = {alpha:g}: TV(low temperature, p^α) = {gap:.2f}")
    ax.legend(fontsize=8)
    return finish(fig) if own else ax


def method_bars(rows, keys=(("greedy", "greedy"), ("low", "low temperature"), ("power", "power sampling (MH)"),
                            ("smc", "power sampling (SMC)")),
                title: str | None = None, marks: dict[str, str] | None = None):
    """Accuracy of each method at each depth, a panel per model, with 95% Wilson intervals. A method that ran on a
    subset of the problems at some depth is hatched there, and its legend entry says so: its bar is not on the same
    problems as the others. `marks`: a suffix for a model's panel title (the chapter's ‡ for problems of its own)."""
    from helpers.evaluation.stats import wilson

    groups = per_model(rows, by_size=True)
    fig, axes = plt.subplots(1, len(groups), figsize=(2.6 + 2.4 * len(groups), 3.4), sharey=True, squeeze=False)
    width = 0.8 / len(keys)
    hatched = set()
    for ax, mine in zip(axes[0], groups, strict=True):
        x = np.arange(len(mine))
        for i, (key, label) in enumerate(keys):
            acc = np.array([r.accuracy[key] for r in mine])
            lo, hi = np.array([wilson(a * r.count(key), r.count(key)) for a, r in zip(acc, mine, strict=True)]).T
            subset = [r.count(key) < r.n_problems for r in mine]
            hatched |= {key} if any(subset) else set()
            bars = ax.bar(x + (i - (len(keys) - 1) / 2) * width, 100 * acc, width, label=label,
                          color=method_colour(key), yerr=100 * np.array([acc - lo, hi - acc]), capsize=2,
                          error_kw={"lw": 0.8})
            for bar, marked in zip(bars, subset, strict=True):
                if marked:
                    bar.set(hatch="///", edgecolor="white", alpha=0.6)
        ax.set_xticks(x, [f"{r.depth}" + (" (full)" if r.depth == r.n_layers else "") for r in mine])
        ax.set(xlabel="blocks kept", title=mine[0].model + (marks or {}).get(mine[0].model, ""))
    axes[0, 0].set_ylabel("accuracy [%] (95% interval)")
    handles, labels = axes[0, -1].get_legend_handles_labels()
    labels = [label + (" (hatched: on the searches' subset)" if key in hatched else "")
              for label, (key, _) in zip(labels, keys, strict=True)]
    axes[0, -1].legend(handles, labels, fontsize=8, loc="upper left", bbox_to_anchor=(1.02, 1.0))  # beside: covers no bar
    if title:
        fig.suptitle(title, fontsize=10)
    return finish(fig)


def pass_at_k_curves(rows):
    """pass@k of temperature-1 and power sampling at each depth, a panel per model: each method in its colour, each
    depth in its line style."""
    groups = per_model(rows, by_size=True)
    fig, axes = plt.subplots(1, len(groups), figsize=(1.5 + 3.2 * len(groups), 3.9), sharey=True, squeeze=False)
    for ax, mine in zip(axes[0], groups, strict=True):
        for i, r in enumerate(mine):  # a method's colour (the book's palette), a depth's line and marker
            style = ("-o", "--s", ":^", "-.v")[i % 4]
            ks = np.arange(1, len(r.pass_at_k["power"]) + 1)
            for key, label in (("temperature", "T = 1"), ("power", "power (MH)")):
                ax.plot(ks, 100 * np.array(r.pass_at_k[key]), style, color=method_colour(key),
                        label=f"{label}, {r.depth} blocks")
        ax.set_xticks(np.arange(1, max(len(r.pass_at_k["power"]) for r in mine) + 1))  # every k any depth drew: a
        # depth on fewer seeds draws fewer
        ax.set(xlabel="k", title=mine[0].model)
        ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(0, -0.2), frameon=False)  # below: covers no point
    axes[0, 0].set_ylabel("pass@k [%]")
    return finish(fig)


def steps_sweep(sweep):
    """Accuracy of MH power sampling against its steps per block N (95% Wilson intervals), with the decoded tokens
    per answer on a second axis."""
    from helpers.evaluation.stats import wilson

    fig, ax = plt.subplots(figsize=(6.5, 3.3))
    x = np.array(sweep.steps, dtype=float)  # N on a linear axis: a cost that grows linearly in N looks linear
    acc = np.array(sweep.accuracy)
    lo, hi = np.array([wilson(a * sweep.n_problems, sweep.n_problems) for a in acc]).T
    ax.errorbar(x, 100 * acc, yerr=100 * np.array([acc - lo, hi - acc]), fmt="o-", color=METHOD_COLOURS["power"], capsize=3,
                label="accuracy (95% interval)")
    ax.set_xticks(x, [str(n) for n in sweep.steps])
    ax.set_xlabel("MH steps per block N (0: the proposal alone, low-temperature sampling)")
    ax.set(ylabel="accuracy [%]", ylim=(0, 100),
           title=f"{sweep.model} at {sweep.depth} of {sweep.n_layers} blocks: MH steps per block")
    cost = ax.twinx()
    cost.plot(x, sweep.tokens, "s--", color="0.35", label="decoded tokens per answer")
    cost.set_ylabel("decoded tokens per answer", color="0.35")
    cost.set_ylim(0, 1.15 * max(sweep.tokens))
    cost.grid(False)
    lines = ax.get_legend_handles_labels(), cost.get_legend_handles_labels()
    ax.legend(lines[0][0] + lines[1][0], lines[0][1] + lines[1][1], fontsize=8, loc="upper left")
    return finish(fig)


REPORT_FAMILIES = ("qwen2",)  # the architectures (config.model_type) of the report's Qwen2.5-Math models


def decomposition(explained, report: dict[str, float] | None = None, marks: dict[str, dict[str, str]] | None = None,
                  legend: dict[str, str] | None = None):
    """Each model's answer taken apart (`helpers.chapters.power_sampling.explain`): per term, MH's and low
    temperature's paired difference in points with its 95% bootstrap interval, one panel per model, smaller first. A
    term paired over a subset is drawn hollow and marked † in its label; `report` puts the report's headline
    differences (name → points) on the headline row, for comparison; `marks` ({model: {(term, search): mark}}, the
    search 'greedy' for the cut's cost) sets a mark beside that one point, each explained under the figure by
    `legend` (mark → words)."""
    from helpers.evaluation.decomposition import SEARCHES, TERMS

    short = {"cut_cost": "the cut\n(greedy)", "recovery": "search\nat the cut", "full_gain": "search\nat full depth",
             "mechanism": "helps more where\ndepth was removed?", "headline": "headline: search at\nthe cut − greedy full"}
    fig, axes = plt.subplots(1, len(explained), figsize=(4.6 * len(explained) + 1.2, 3.8), sharex=True,
                             squeeze=False)
    y = np.arange(len(TERMS))[::-1]
    marked = False  # the report's marks in the legend once
    for ax, e in zip(axes[0], explained, strict=True):
        mine = (marks or {}).get(e.full.model, {})
        for i, (key, label) in enumerate(SEARCHES):
            part = e.parts[key]
            for yy, term in zip(y, TERMS, strict=True):
                d, hollow = part.terms[term], part.on_subset(term)
                if term == "cut_cost" and i > 0:
                    continue  # greedy's alone: the same for every search, drawn once
                colour = method_colour("greedy" if term == "cut_cost" else key)  # the book's one colour per method
                ax.errorbar(100 * d.mean, yy + (0 if term == "cut_cost" else 0.15 - 0.3 * i),
                            xerr=[[100 * (d.mean - d.low)], [100 * (d.high - d.mean)]], fmt="o", color=colour,
                            mfc="white" if hollow else colour, capsize=3,
                            label=label if term == TERMS[1] else "greedy decoding" if term == "cut_cost" else None)
                mark = mine.get((term, "greedy" if term == "cut_cost" else key))
                if mark:  # beside the point it qualifies, past its interval's upper end
                    ax.annotate(mark, (100 * d.high, yy + (0 if term == "cut_cost" else 0.15 - 0.3 * i)),
                                xytext=(3, 0), textcoords="offset points", va="center", fontsize=9, color=colour)
        if report and e.full.family in REPORT_FAMILIES:  # the report's Qwen2.5 gains, on Qwen2.5 panels only
            for j, (name, points) in enumerate(report.items()):
                ax.plot(points, y[-1], marker="x" if j == 0 else "+", ms=9, color="0.35", ls="none",
                        label=f"report, {name}" if not marked else None)
            marked = True
        ax.axvline(0, color="0.4", lw=0.8)
        ax.set_yticks(y, [short[t] + (" †" if e.parts["power"].on_subset(t) else "") for t in TERMS], fontsize=8)
        ax.set_title(f"{e.full.model}: {e.cut.depth} of {e.full.n_layers} blocks", fontsize=9)
        ax.set_xlabel("paired difference [points] (95% interval)")
    legend_below(fig, axes[0], max_columns=99, frameon=True, bbox_to_anchor=(0.5, -0.02))
    used = {m for mine in (marks or {}).values() for m in mine.values()}
    notes = "   ".join(f"{m} {words}" for m, words in (legend or {}).items() if m in used)
    if notes:
        fig.text(0.5, 0.075, notes, ha="center", fontsize=7.5, color="0.3")
    fig.tight_layout(rect=(0, 0.11 if notes else 0.07, 1, 1))
    plt.close(fig)
    return fig


AXIS_METHODS = (("greedy", "greedy"), ("low", "low temperature"), ("temperature", "T = 1"), ("power", "MH"),
                ("smc", "SMC"))


def depth_axis(axes, marks: dict[str, str] | None = None):
    """The report's Figure 2 across depth: per model (a panel each, smaller first), accuracy against blocks kept,
    chapter 03's stitched greedy curve where it ran on these problems (a line with its 95% band), this chapter's
    methods at each depth it searched (points with 95% Wilson intervals, side by side), and the critical depth (a
    faint band), with the lens's cut points (dotted lines where they fall on the panel's depths, else named at its
    left edge). A method on a subset of the problems at some depth is drawn hollow there. `marks`: a suffix for a
    model's panel title, as in `method_bars`."""
    from helpers.evaluation.stats import wilson

    fig, panels = plt.subplots(1, len(axes), figsize=(4.2 * len(axes), 3.4), squeeze=False, sharey=True)
    for ax, a in zip(panels[0], axes, strict=True):
        if a.curve:
            depths = sorted(a.curve)
            lows, highs = zip(*(wilson(a.curve[d] * a.curve_problems, a.curve_problems) for d in depths), strict=True)
            ax.fill_between(depths, [100 * v for v in lows], [100 * v for v in highs], color=method_colour("greedy"),
                            alpha=0.12, lw=0)
            ax.plot(depths, [100 * a.curve[d] for d in depths], "-", color=method_colour("greedy"), lw=1.2,
                    label="greedy, chapter 03's sweep")
        for i, (key, label) in enumerate(AXIS_METHODS):
            shift = (i - (len(AXIS_METHODS) - 1) / 2) * 0.11
            for j, r in enumerate(a.rows):
                n = r.count(key)
                value = float(np.mean(r.scores[key])) if r.scores.get(key) else float("nan")
                if value != value:
                    continue
                low, high = wilson(value * n, n)
                whole = n == r.n_problems
                ax.errorbar(r.depth + shift, 100 * value, yerr=[[100 * (value - low)], [100 * (high - value)]],
                            fmt="o", ms=4, color=method_colour(key), mfc=method_colour(key) if whole else "white",
                            capsize=2, lw=1, label=label + ("" if whole else f" (first {n} problems)") if j == 0 else None)
        if a.critical is not None:  # a faint band behind the critical depth's points (a line would run through
            # the middle method's interval), named above 100%
            ax.axvspan(a.critical - 0.45, a.critical + 0.45, color="0.5", alpha=0.08, lw=0, zorder=0)
            ax.set_ylim(top=112)  # room above 100% for the band's name, clear of every interval
            ax.annotate(f"critical: {a.critical}", (a.critical, 106), fontsize=7, color="0.35", ha="center",
                        va="center")
        shown = [r.depth for r in a.rows] + list(a.curve)
        inside = [c for c in a.cuts if min(shown) - 0.5 <= c <= max(shown)]
        below = [c for c in a.cuts if c not in inside]
        for c in inside:  # where the lens would cut, on the depths the panel draws
            ax.axvline(c, color="0.45", ls=":", lw=1, zorder=0)
            ax.annotate("lens cut", (c, 99), fontsize=7, color="0.35", ha="center", va="center")
        if below:  # far below the depths searched: named, not drawn to scale
            ax.annotate("← lens cut" + ("s" if len(below) > 1 else "") + " at " + ", ".join(map(str, sorted(below))),
                        (0.02, 0.97), xycoords="axes fraction", fontsize=7, color="0.35", ha="left", va="top")  # above
            # the shallowest depth's points, which sit near zero where the lens would cut
        ax.xaxis.set_major_locator(plt.MaxNLocator(integer=True))
        ax.set(title=a.model + (marks or {}).get(a.model, ""), xlabel=f"blocks kept (of {a.n_layers})")
    panels[0][0].set_ylabel("accuracy (%)")
    legend_below(fig, panels[0])
    fig.tight_layout(rect=(0, 0.1, 1, 1))
    plt.close(fig)
    return fig
