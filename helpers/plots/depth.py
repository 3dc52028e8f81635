"""How a model uses its depth (chapter 01): contributions, cosines, skip effects, erasure, attributions, depth
scores, layer maps, and the lens curves it shares with chapter 02."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np

from helpers.plots.lens import lens_curves
from helpers.plots.style import PALETTE, finish, heatmap, layer_bars

__all__ = ["attributions", "contributions", "cosines", "current_effects", "depth_scores", "erasure", "future_effects",
           "lens_curves", "linear_map_errors"]


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
