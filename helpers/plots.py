"""One figure style for the book, and the figures the chapters share."""

from __future__ import annotations

import functools
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


def finish(fig):
    """Lay out and close a finished figure: the cell that returns it (or the glue that holds it) shows it once."""
    fig.tight_layout()
    plt.close(fig)
    return fig


def lens_curves(curves: Mapping[str, Mapping[str, np.ndarray]], marks: Mapping[str, Mapping[str, int]] | None = None,
                title: str | None = None):
    """KL(layer || final) and top-5 overlap per layer for each model, with the spread across problems.

    `curves[model]` holds 'kl' and 'overlap' arrays of shape [problems, layers]; the line is the mean over
    problems and the band its 10th–90th percentiles. `marks[model]` maps a label to a layer to mark. Models of
    different depths share one axis of relative depth l / L, as one would compare a 24- and a 30-block model.
    """
    relative = len({np.asarray(c["kl"]).shape[1] for c in curves.values()}) > 1
    fig, (ax_kl, ax_ov) = plt.subplots(1, 2, figsize=(10, 3.4))
    for i, (name, c) in enumerate(curves.items()):
        colour = PALETTE[i % len(PALETTE)]
        n_taps = np.asarray(c["kl"]).shape[1]
        scale = 1 / n_taps if relative else 1
        for ax, key in ((ax_kl, "kl"), (ax_ov, "overlap")):
            values = np.asarray(c[key])
            layers = np.arange(values.shape[1]) * scale
            ax.plot(layers, values.mean(0), color=colour, lw=1.8, label=f"{name} (L = {n_taps})" if relative else name)
            if values.shape[0] > 1:
                lo, hi = np.percentile(values, [10, 90], axis=0)
                ax.fill_between(layers, lo, hi, color=colour, alpha=0.18, lw=0)
        for label, layer in (marks or {}).get(name, {}).items():
            if layer is not None and layer >= 0:
                ax = ax_kl if "KL" in label else ax_ov
                ax.axvline(layer * scale, color=colour, ls="--", lw=1)
                ax.annotate(label, (layer * scale, 0.95), xycoords=("data", "axes fraction"), rotation=90,
                            ha="right", va="top", fontsize=8, color=colour)
    xlabel = "relative depth l / L (input of block l)" if relative else "layer l (input of block l)"
    ax_kl.set(xlabel=xlabel, ylabel="KL(layer ‖ final) [nats]", title="Logit-lens KL")
    ax_ov.set(xlabel=xlabel, ylabel="top-5 overlap", ylim=(0, 1.02), title="Top-5 overlap")
    ax_ov.axhline(0.3, color="grey", lw=0.8, ls=":")
    if len(curves) > 1:
        ax_kl.legend()
    if title:
        fig.suptitle(title)
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
    return finish(fig)


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


# --------------------------------------------------------------------------------------------------
# Chapter 04: power sampling
# --------------------------------------------------------------------------------------------------


def toy_convergence(result):
    """TV distance to p^α against MH steps per block for both modes and, beside it, against SMC's particle
    count, with low temperature and the noise floor on both."""
    panels = 2 if result.particles else 1
    fig, axes = plt.subplots(1, panels, figsize=(6.5 if panels == 1 else 10, 3.2), sharey=True, squeeze=False)
    ax = axes[0, 0]
    for i, (mode, tv) in enumerate(result.tv.items()):
        ax.plot(result.steps, tv, "o-", color=PALETTE[i], label=f"MH, {mode} mode")
    ax.set(xlabel="MH steps per block (N)", ylabel="TV distance to p^α",
           title=f"Metropolis–Hastings, α = {result.alpha:g}, {result.n_chains} chains")
    if result.particles:
        right = axes[0, 1]
        right.plot(result.particles, result.smc_tv, "s-", color=PALETTE[2], label="SMC (systematic resampling)")
        right.set_xscale("log", base=2)
        right.set_xticks(result.particles, [str(k) for k in result.particles])
        right.set(xlabel="particles (K)", title=f"SMC, α = {result.alpha:g}, {result.n_chains} samples")
    for a in axes[0]:
        a.axhline(result.low_temperature_gap, color="grey", ls=":", label="low temperature (exact distance)")
        a.axhline(result.noise_floor, color="grey", ls="--", lw=0.8, label=f"noise of {result.n_chains} exact draws")
        a.legend(fontsize=8)
    return finish(fig)


def toy_distributions(tables, alpha: float, ax=None):
    """p, p^α and low-temperature sampling over every completion of the toy model, most likely first."""
    own = ax is None
    if own:
        fig, ax = plt.subplots(figsize=(9, 3))
    d = tables[alpha]
    order = sorted(d["p"], key=lambda k: -d["p"][k])
    x = np.arange(len(order))
    for shift, key, label, colour in ((-0.27, "p", "p (the model)", PALETTE[6]), (0.0, "power", "p^α (power)", PALETTE[0]),
                                      (0.27, "low_temperature", "low temperature", PALETTE[2])):
        ax.bar(x + shift, [d[key][k] for k in order], 0.27, label=label, color=colour)
    ax.set_xticks(x, ["".join("·ab"[t] if t else "$" for t in k) for k in order], rotation=90, fontsize=7)
    gap = 0.5 * sum(abs(d["low_temperature"][k] - d["power"][k]) for k in order)
    ax.set(ylabel="probability", xlabel="completion (a, b: tokens, $: EOS), most likely first",
           title=f"α = {alpha:g}: TV(low temperature, p^α) = {gap:.2f}")
    ax.legend(fontsize=8)
    return finish(fig) if own else ax


def method_bars(rows, keys=(("greedy", "greedy"), ("low", "low temperature"), ("power", "power sampling (MH)"),
                            ("smc", "power sampling (SMC)")),
                title: str | None = None):
    """Accuracy of each method at each depth of one model, with 95% Wilson intervals."""
    from helpers.stats import wilson

    fig, ax = plt.subplots(figsize=(8, 3.4))
    x = np.arange(len(rows))
    width = 0.8 / len(keys)
    for i, (key, label) in enumerate(keys):
        acc = np.array([r.accuracy[key] for r in rows])
        lo, hi = np.array([wilson(a * r.count(key), r.count(key)) for a, r in zip(acc, rows, strict=True)]).T
        ax.bar(x + (i - (len(keys) - 1) / 2) * width, 100 * acc, width, label=label, color=PALETTE[i],
               yerr=100 * np.array([acc - lo, hi - acc]), capsize=3, error_kw={"lw": 0.8})
    ax.set_xticks(x, [f"{r.depth} blocks" + (" (full)" if r.depth == r.n_layers else "") for r in rows])
    ax.set(ylabel="accuracy [%] (95% interval)", title=title)
    ax.legend(fontsize=8)
    return finish(fig)


def pass_at_k_curves(rows):
    """pass@k of temperature-1 and power sampling at each depth."""
    fig, ax = plt.subplots(figsize=(6.5, 3.2))
    for i, r in enumerate(rows):
        colour = PALETTE[i % len(PALETTE)]
        ks = np.arange(1, len(r.pass_at_k["power"]) + 1)
        ax.plot(ks, 100 * np.array(r.pass_at_k["temperature"]), "o--", color=colour, label=f"{r.depth} blocks, T=1")
        ax.plot(ks, 100 * np.array(r.pass_at_k["power"]), "s-", color=colour, label=f"{r.depth} blocks, power")
        ax.set_xticks(ks)
    ax.set(xlabel="k", ylabel="pass@k [%]", title="pass@k")
    ax.legend(fontsize=7, ncol=2)
    return finish(fig)


def steps_sweep(sweep):
    """Accuracy of MH power sampling against its steps per block N (95% Wilson intervals), with the decoded tokens
    per answer on a second axis."""
    from helpers.stats import wilson

    fig, ax = plt.subplots(figsize=(6.5, 3.3))
    x = np.arange(len(sweep.steps))
    acc = np.array(sweep.accuracy)
    lo, hi = np.array([wilson(a * sweep.n_problems, sweep.n_problems) for a in acc]).T
    ax.errorbar(x, 100 * acc, yerr=100 * np.array([acc - lo, hi - acc]), fmt="o-", color=PALETTE[0], capsize=3,
                label="accuracy (95% interval)")
    ax.set_xticks(x, [f"N = {n}" + (" (proposal)" if n == 0 else "") for n in sweep.steps])
    ax.set(ylabel="accuracy [%]", ylim=(0, 100),
           title=f"{sweep.model} at {sweep.depth} of {sweep.n_layers} blocks: MH steps per block")
    cost = ax.twinx()
    cost.plot(x, sweep.tokens, "s--", color=PALETTE[1], label="decoded tokens per answer")
    cost.set_ylabel("decoded tokens per answer", color=PALETTE[1])
    cost.set_ylim(0, 1.15 * max(sweep.tokens))
    cost.grid(False)
    lines = ax.get_legend_handles_labels(), cost.get_legend_handles_labels()
    ax.legend(lines[0][0] + lines[1][0], lines[0][1] + lines[1][1], fontsize=8, loc="upper left")
    return finish(fig)


def lens_top1_grid(explorer: dict, n_rows: int = 8):
    """The explorer's arrays as a static figure: the top-1 lens token at evenly spread layers."""
    n_layers = len(explorer["top_tokens"])
    shown = sorted(set(np.linspace(0, n_layers - 1, n_rows).round().astype(int).tolist()))
    positions = range(len(explorer["tokens"]))
    return lens_token_grid(explorer["tokens"], [[explorer["top_tokens"][l][t][0] for t in positions] for l in shown],
                           explorer["top_probs"][shown, :, 0], shown,
                           title="Top-1 logit-lens token (colour: its probability)")


# --------------------------------------------------------------------------------------------------
# Chapter 03: stitch-and-preserve
# --------------------------------------------------------------------------------------------------


def truncation_agreement(sweep):
    """KL of each truncation from the full model, and the perplexity of the full model's solutions, per depth."""
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(10, 3.3))
    d = sweep.depths
    for i, (method, by_depth) in enumerate(sweep.agreement.items()):
        ax1.plot(d, [by_depth[x]["kl"] for x in d], "o-", color=PALETTE[i], label=method)
        ax2.plot(d, [np.exp(by_depth[x]["nll"]) for x in d], "o-", color=PALETTE[i], label=method)
    first = next(iter(sweep.agreement.values()))
    ax2.axhline(np.exp(first[sweep.n_layers]["nll_full"]), color="grey", ls=":", label="full model")
    ax1.set(xlabel="depth (blocks run)", ylabel="KL(truncated ‖ full) [nats]", yscale="symlog",
            title="Distance from the full model")
    ax2.set(xlabel="depth (blocks run)", ylabel="perplexity", yscale="log", title="Perplexity of the full model's solutions")
    ax1.legend()
    ax2.legend()
    return finish(fig)


def accuracy_against_depth(sweep, critical: dict):
    """Greedy accuracy (95% intervals) per depth and method, the critical depth, and what each depth keeps."""
    from helpers.stats import wilson

    n = len(sweep.full)
    fig, (ax, axc) = plt.subplots(1, 2, figsize=(10, 3.4), gridspec_kw={"width_ratios": [3, 2]})
    d = sweep.depths
    for i, (method, by_depth) in enumerate(sweep.accuracy.items()):
        acc = np.array([by_depth[x] for x in d])
        lo, hi = np.array([wilson(a * n, n) for a in acc]).T
        ax.plot(d, 100 * acc, "o-", color=PALETTE[i], label=method)
        ax.fill_between(d, 100 * lo, 100 * hi, color=PALETTE[i], alpha=0.12, lw=0)
    first = next(iter(sweep.accuracy.values()))
    ax.axhline(100 * first[sweep.n_layers], color="grey", ls=":", label="full model")
    if critical.get("stitch") is not None:
        ax.axvline(critical["stitch"], color=PALETTE[0], ls="--", lw=1)
        ax.annotate(f"critical depth {critical['stitch']}", (critical["stitch"], 0.95), xycoords=("data", "axes fraction"),
                    rotation=90, ha="right", va="top", fontsize=8, color=PALETTE[0])
    ax.set(xlabel="depth (blocks run)", ylabel="greedy accuracy [%] (95% band)", title=f"{sweep.model}: accuracy against depth")
    ax.legend()
    full = sweep.costs[sweep.n_layers]
    axc.plot(d, [100 * sweep.costs[x].params_total / full.params_total for x in d], "s-", color=PALETTE[3], label="parameters")
    axc.plot(d, [100 * sweep.costs[x].flops_per_token / full.flops_per_token for x in d], "^-", color=PALETTE[4],
             label="FLOPs per token")
    axc.set(xlabel="depth (blocks run)", ylabel="% of the full model", title="What a depth keeps")
    axc.legend()
    return finish(fig)


def accuracy_by_model(sweeps: Mapping, critical: Mapping[str, int | None], method: str = "stitch"):
    """Each model's accuracy (95% band) against the number of blocks removed, with its critical depth marked."""
    from helpers.stats import wilson

    fig, ax = plt.subplots(figsize=(7, 3.4))
    for i, (name, s) in enumerate(sweeps.items()):
        n, d = len(s.full), sorted(s.accuracy[method], reverse=True)
        removed = [s.n_layers - x for x in d]
        acc = np.array([s.accuracy[method][x] for x in d])
        lo, hi = np.array([wilson(a * n, n) for a in acc]).T
        ax.plot(removed, 100 * acc, "o-", color=PALETTE[i], label=f"{name} ({s.n_layers} blocks)")
        ax.fill_between(removed, 100 * lo, 100 * hi, color=PALETTE[i], alpha=0.12, lw=0)
        c = critical.get(name)
        if c is not None:
            ax.axvline(s.n_layers - c + 0.04 * i, color=PALETTE[i], ls="--", lw=1)
    ax.set(xlabel=f"blocks removed ({method})", ylabel="greedy accuracy [%] (95% band)",
           title="How many blocks each model can lose (dashed: critical depth)")
    ax.legend()
    return finish(fig)


# --------------------------------------------------------------------------------------------------
# Chapter 01: how a model uses its depth
# --------------------------------------------------------------------------------------------------

_CONTRIBUTIONS = {"rc_attn": "attention ‖a‖/‖h‖", "rc_mlp": "MLP ‖m‖/‖h+a‖", "rc_layer": "block ‖a+m‖/‖h‖"}


def contributions(result, n_texts: int):
    """Mean (left) and maximum (right) relative contribution of attention, MLP and block, per layer."""
    c = result.curves
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(11, 3.2))
    layer_bars({label: c[k] for k, label in _CONTRIBUTIONS.items()}, "mean relative contribution", ax=ax1,
               ylim=(0, min(1.5, 1.05 * max(c[k].max() for k in _CONTRIBUTIONS))))
    layer_bars({label: result.maxima[k] for k, label in _CONTRIBUTIONS.items()}, "max relative contribution", ax=ax2)
    fig.suptitle(f"{result.info.name}: relative contributions ({n_texts} gold texts)")
    return finish(fig)


def cosines(result):
    """Cosine of each write with the residual, their average and the cosine effective depth."""
    c = result.curves
    fig, ax = plt.subplots(figsize=(7.5, 3.2))
    layer_bars({"attention cos(a, h)": c["cos_attn"], "MLP cos(m, h+a)": c["cos_mlp"],
                "block cos(a+m, h)": c["cos_layer"]}, "cosine similarity", ax=ax)
    ax.plot(range(result.n_layers), c["cos_mean"], color="black", lw=1.5, marker=".", label="average of the three",
            zorder=20)
    ed = result.ed["effective_depth"]["cosine"]
    if ed is not None:
        ax.axvline(ed, color="black", ls="--", lw=1, zorder=20)
    ax.legend(fontsize=8)
    return finish(fig)


def future_effects(result, skips: dict, n_problems: int, n_splits: int):
    """Per skipped part: the effect on later blocks at future positions (top) and on the output (bottom)."""
    parts = list(skips["future"])
    fig, axes = plt.subplots(2, len(parts), figsize=(4.2 * len(parts) + 1, 6.2), squeeze=False,
                             gridspec_kw={"height_ratios": [3, 1.4]})
    for j, part in enumerate(parts):
        matrix, output = skips["future"][part]
        heatmap(matrix, "effect at layer l", "layer skipped s", title=f"skip: {part}", ax=axes[0, j],
                colorbar="relative change")
        axes[1, j].bar(range(result.n_layers), output, color=PALETTE[j])
        axes[1, j].set(xlabel="layer skipped s", ylabel="output change", ylim=(0, np.sqrt(2)))
    fig.suptitle(f"{result.info.name}: effects on future tokens ({n_problems} problems × {n_splits} splits)")
    return finish(fig)


def current_effects(result, skips: dict):
    """The skip applied at every position (current tokens), and the output change against future tokens only."""
    matrix, output = skips["current"]
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(11, 3.4), gridspec_kw={"width_ratios": [1.3, 1]})
    heatmap(matrix, "effect at layer l", "layer skipped s", title="skip at every position (current tokens)", ax=ax1,
            colorbar="relative change")
    ax2.plot(range(result.n_layers), output, marker=".", label="current tokens")
    ax2.plot(range(result.n_layers), skips["future_output"], marker=".", label="future tokens only")
    ax2.set(xlabel="layer skipped s", ylabel="max output change", ylim=(0, np.sqrt(2)))
    ax2.legend()
    return finish(fig)


def erasure(result):
    """Change of the answer's prediction when one boundary and position of the residual is erased, per probe."""
    fig, axes = plt.subplots(1, len(result.probes), figsize=(5.6 * len(result.probes), 4.6), squeeze=False)
    for ax, probe in zip(axes[0], result.probes, strict=True):
        heatmap(probe["erasure"][:, :-1], "erased position (token)", "layer boundary", title=probe["title"], ax=ax,
                vmin=0, vmax=None, xticklabels=probe["tokens"][:-1], origin="lower",
                colorbar="answer prediction change")
    return finish(fig)


def attributions(result):
    """Integrated-gradient attribution per layer and position, per probe and component."""
    comps = [k for k in result.probes[0] if k.startswith("ig_")]
    fig, axes = plt.subplots(len(result.probes), len(comps), figsize=(5.4 * len(comps), 4.3 * len(result.probes)),
                             squeeze=False)
    for i, probe in enumerate(result.probes):
        for j, key in enumerate(comps):
            attr = probe[key][:, :-1]
            lim = float(np.nanmax(np.abs(attr[:, 1:]))) or 1.0
            heatmap(attr, "position (token)", "layer", title=f"{key[3:]} · {probe['title']}", ax=axes[i, j],
                    vmin=-lim, vmax=lim, cmap="seismic", xticklabels=probe["tokens"][:-1], origin="lower")
    return finish(fig)


def depth_scores(result):
    """Mean effect of each skipped layer on later layers per level (left) and the depth score per level (right)."""
    depth = result.depth
    lvls = list(depth)
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(11, 3.2), gridspec_kw={"width_ratios": [2, 1]})
    for i, lvl in enumerate(lvls):
        ax1.plot(range(result.n_layers), depth[lvl]["layer_profile"], marker=".", lw=1.2, label=f"level {lvl}",
                 color=PALETTE[i % len(PALETTE)])
    ax1.set(xlabel="layer skipped s", ylabel="mean effect on later layers")
    ax1.legend(fontsize=8, ncol=2)
    x = np.arange(len(lvls))
    ax2.bar(x - 0.2, [depth[lvl]["layer_score_relative"] for lvl in lvls], 0.4, label="effect on later layers")
    ax2.bar(x + 0.2, [depth[lvl]["output_score_relative"] for lvl in lvls], 0.4, label="effect on the output")
    ax2.set_xticks(x, [str(lvl) for lvl in lvls])
    ax2.set(xlabel="difficulty level", ylabel="depth score / (L−1)", ylim=(0, 1))
    ax2.legend(fontsize=8)
    return finish(fig)


def linear_map_errors(maps):
    """Held-out relative error of the map from each source boundary to each target boundary."""
    return heatmap(maps.errors[1:, 1:], f"{maps.pair[1]} layer (target)", f"{maps.pair[0]} layer (source)", vmin=0,
                   vmax=None, colorbar="relative error", origin="lower",
                   title="self-map (sanity check)" if maps.self_map else "shallow → deep")


def token_counts(panels: Mapping[str, Mapping[str, np.ndarray]], measured: Sequence[dict] | None = None,
                 measured_panel: str | None = None):
    """Decoded tokens per answer against its length: plain decoding, the report's formula and the exact schedule
    (reference and exact mode), one panel per setting; `measured` power records as dots on `measured_panel`."""
    fig, axes = plt.subplots(1, len(panels), figsize=(5 * len(panels), 3.4), squeeze=False)
    for ax, (title, c) in zip(axes[0], panels.items(), strict=True):
        ax.plot(c["length"], c["plain"], color="0.5", lw=1.2, label="plain decoding (T)")
        ax.plot(c["length"], c["formula"], color=PALETTE[1], lw=1.8, label="report: T + N·T²/(4B)")
        ax.plot(c["length"], c["reference"], color=PALETTE[0], lw=1.8, label="exact count, reference mode")
        ax.plot(c["length"], c["exact"], color=PALETTE[3], lw=1.4, ls="--", label="exact count, exact mode")
        if measured and title == measured_panel:
            ax.scatter([r["n_tokens"] for r in measured], [r["decoded_tokens"] for r in measured], s=12,
                       color=PALETTE[2], edgecolor="0.3", lw=0.4, zorder=3, label="measured chains")
        ax.set(xlabel="answer length T [tokens]", ylabel="decoded tokens per answer", title=title)
    axes[0][0].legend(fontsize=7)
    if measured_panel:
        axes[0][-1].legend(fontsize=7)
    return finish(fig)


def flops_saved(curves: Mapping[str, Mapping], needed: Mapping[str, float]):
    """Share of FLOPs per token saved against blocks removed, per model; dashed lines: the saving a power sampler
    needs to cost no more than full-depth greedy, at each token multiplier in `needed` (label → share)."""
    fig, ax = plt.subplots(figsize=(7.5, 3.4))
    for i, (name, c) in enumerate(curves.items()):
        ax.plot(c["removed"], 100 * c["saved"], "-", marker="osD^"[i % 4], ms=3.5, mfc="white" if i % 2 else None,
                color=PALETTE[i % len(PALETTE)],
                label=f"{name} ({c['layers']} blocks)")
    for j, (label, share) in enumerate(needed.items()):
        ax.axhline(100 * share, color="0.3", ls=("--", ":", "-.")[j % 3], lw=1, label=label)
    ax.set(xlabel="blocks removed", ylabel="FLOPs per token saved [%]", ylim=(0, 105),
           title="What truncation saves, and what the search needs")
    ax.legend(fontsize=7, loc="lower right")
    return finish(fig)


def accuracy_at_compute(points, front):
    """Accuracy (95% Wilson interval) against generation FLOPs per answer for every method and depth; the
    Pareto front as a line. Colour: depth; marker: method; hollow markers: compute-matched baselines."""
    from helpers.stats import wilson

    fig, ax = plt.subplots(figsize=(8.5, 4.2))
    depths = sorted({p.depth for p in points}, reverse=True)
    shapes = {"greedy": "o", "low temp.": "v", "T=1": "^", "power": "*", "SMC": "P"}
    for p in points:
        colour = PALETTE[depths.index(p.depth) % len(PALETTE)]
        kind = p.method.split("-")[0]
        marker = shapes.get(p.method, {"best": "s", "majority": "D"}.get(kind, "x"))
        lo, hi = wilson(p.accuracy * p.n_problems, p.n_problems)
        ax.errorbar(p.flops / 1e9, 100 * p.accuracy, yerr=[[100 * (p.accuracy - lo)], [100 * (hi - p.accuracy)]],
                    fmt=marker, ms=11 if p.method in ("power", "SMC") else 6, color=colour, capsize=2, lw=0.7,
                    mfc="white" if p.matched else colour, alpha=0.9)
        below = kind == "majority"  # best-of-k and majority-of-k often share a point: one label above, one below
        ax.annotate(p.method, (p.flops / 1e9, 100 * p.accuracy), fontsize=6, xytext=(5, -8 if below else 3),
                    textcoords="offset points")
    ax.plot([p.flops / 1e9 for p in front], [100 * p.accuracy for p in front], color="0.2", lw=1, ls="--",
            label="Pareto front")
    for d in depths:
        ax.plot([], [], "o", color=PALETTE[depths.index(d) % len(PALETTE)], label=f"{d} blocks")
    ax.plot([], [], "s", mfc="white", color="0.4", label="compute-matched")
    ax.set_xscale("log")
    ax.set(xlabel="generation GFLOPs per answer (log scale)", ylabel="accuracy [%] (95% interval)",
           title="Accuracy at equal compute")
    ax.legend(fontsize=7, loc="best")
    return finish(fig)


def net_cost(config, settings: Mapping[str, Mapping[str, float]], context: float = 0.0, ax=None):
    """Cost of power sampling on the stitched model relative to full-depth greedy, against the kept depth, for
    each setting (label → {'length', 'block_size', 'mcmc_steps'}); below the line at 1 the trade pays."""
    from helpers.cost import Shape, expected_decoded_tokens, flops_share

    own = ax is None
    if own:
        fig, ax = plt.subplots(figsize=(7, 3.2))
    L = Shape.of(config).layers
    depths = np.arange(1, L + 1)
    for i, (label, s) in enumerate(settings.items()):
        total = expected_decoded_tokens(int(s["length"]), int(s["block_size"]), int(s["mcmc_steps"])) / s["length"]
        ratio = [total * flops_share(config, int(d), context) for d in depths]
        ax.plot(depths, ratio, color=PALETTE[i % len(PALETTE)], lw=1.8, label=f"{label}: ×{total:.2f} tokens")
    ax.axhline(1.0, color="0.3", lw=1, ls="--", label="full-depth greedy")
    ax.set_yscale("log")
    ax.set(xlabel="blocks kept", ylabel="cost / full-depth greedy", title="Net cost of searching on a shallower model")
    ax.legend(fontsize=7)
    return finish(fig) if own else ax


def dtype_comparison(c):
    """Appendix: the logit lens's KL per layer and stitched greedy accuracy per depth, float32 beside bfloat16."""
    fig, (ax_kl, ax_acc) = plt.subplots(1, 2, figsize=(10, 3.4))
    for i, (dtype, style) in enumerate((("float32", "-"), ("bfloat16", "--"))):
        kl = np.asarray(c.kl[dtype])
        ax_kl.plot(np.arange(kl.shape[1]), kl.mean(0), style, color=PALETTE[i], lw=1.8, label=dtype)
        depths = sorted(c.sweep[dtype])
        ax_acc.plot(depths, [100 * c.sweep[dtype][d] for d in depths], style, marker="o", color=PALETTE[i], lw=1.8,
                    label=dtype)
    ax_kl.set(xlabel="block input l", ylabel="KL(layer ‖ final), nats", title=f"{c.model}: logit lens")
    ax_acc.set(xlabel="blocks kept (stitched)", ylabel="greedy accuracy, %", ylim=(-3, 103),
               title=f"stitched sweep, {c.n_sweep} problems")
    ax_kl.legend()
    ax_acc.legend()
    return finish(fig)
