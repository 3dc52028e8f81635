"""The logit lens's figures (chapter 02; chapter 01 shows the curves too): curves by layer, top tokens by
position."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import matplotlib.pyplot as plt
import numpy as np

from helpers.plots.style import finish, model_colour, no_figure, token_label


def lens_curves(curves: Mapping[str, Mapping[str, np.ndarray]], marks: Mapping[str, Mapping[str, int]] | None = None,
                title: str | None = None, paired: bool = False):
    """KL(layer || final) and top-5 overlap per layer for each model, with the spread across problems.

    `curves[model]` holds 'kl' and 'overlap' arrays of shape [problems, layers]; the line is the mean over
    problems, or the curve given as 'kl_line' / 'overlap_line' (the one an effective-depth rule read, where it weights
    the problems otherwise), and the band the problems' 10th–90th percentiles. `marks[model]` maps a label to a layer to mark. Models of
    different depths share one axis of relative depth l / L, as one would compare a 24- and a 30-block model.
    `paired`: the curves come in pairs of one model (its generated then its gold text, named "model · text"), drawn
    in the model's colour, solid then dashed. Each model has its colour of the book (`style.model_colour`), and each
    later model a thinner line, so that one drawn over another of nearly its shape leaves the one below showing.
    """
    relative = len({np.asarray(c["kl"]).shape[1] for c in curves.values()}) > 1
    fig, (ax_kl, ax_ov) = plt.subplots(1, 2, figsize=(10, 3.9))
    for i, (name, c) in enumerate(curves.items()):
        rank = i // 2 if paired else i
        colour = model_colour(name.split(" · ")[0], rank)
        style = "--" if paired and i % 2 else "-"
        width = max(1.0, 2.8 - 0.6 * rank)
        n_taps = np.asarray(c["kl"]).shape[1]
        scale = 1 / n_taps if relative else 1
        mine = {label: layer for label, layer in (marks or {}).get(name, {}).items() if layer is not None and layer >= 0}
        named = name + (f" (L = {n_taps})" if relative else "") + "".join(f"; {label}" for label in mine)
        for ax, key in ((ax_kl, "kl"), (ax_ov, "overlap")):
            values = np.asarray(c[key])
            layers = np.arange(values.shape[1]) * scale
            line = np.asarray(c[f"{key}_line"]) if f"{key}_line" in c else values.mean(0)
            ax.plot(layers, line, style, color=colour, lw=width, label=named if ax is ax_kl else None,
                    zorder=3 + rank)
            if values.shape[0] > 1:
                lo, hi = np.percentile(values, [10, 90], axis=0)
                ax.fill_between(layers, lo, hi, color=colour, alpha=0.18, lw=0)
        for label, layer in mine.items():  # named in the legend, not on the panel, where marks of several models
            ax = ax_kl if "KL" in label else ax_ov  # would collide; a triangle at the top, one row per model, shows
            ax.axvline(layer * scale, color=colour, ls="--", lw=1)  # each of two lines that fall on one depth
            ax.plot([layer * scale], [0.96 - 0.06 * rank], "v", color=colour, ms=6, transform=ax.get_xaxis_transform(),
                    clip_on=False, zorder=10)  # inside the frame: a row per model, none cut by the top edge
    xlabel = "relative depth l / L (input of block l)" if relative else "layer l (input of block l)"
    ax_kl.set(xlabel=xlabel, ylabel="KL(layer ‖ final) [nats]", title="Logit-lens KL")
    ax_ov.set(xlabel=xlabel, ylabel="top-5 overlap", ylim=(0, 1.02), title="Top-5 overlap")
    ax_ov.axhline(0.3, color="grey", lw=0.8, ls=":")
    fig.legend(loc="lower center", ncol=2, fontsize=8, frameon=False, bbox_to_anchor=(0.5, -0.01))
    if title:
        fig.suptitle(title)
    fig.tight_layout(rect=(0, 0.06 * (1 + (len(curves) - 1) // 2), 1, 1))
    plt.close(fig)
    return fig


def size_curves(curves: Mapping[str, Mapping[str, np.ndarray]], marks: Mapping[str, Mapping[str, int]] | None = None,
                title: str | None = None):
    """The report's Figure 1 for this build's sizes: the logit lens's mean KL per tap for each model, by relative
    depth l / L (left, where models of different depths line up) and by block l (right, where their drops can be
    counted), with each model's effective depths dashed."""
    fig, (ax_rel, ax_abs) = plt.subplots(1, 2, figsize=(10, 3.4))
    for i, (name, c) in enumerate(curves.items()):
        colour = model_colour(name, i)
        kl = np.asarray(c["kl"])
        n_taps = kl.shape[1]
        for ax, scale in ((ax_rel, 1 / n_taps), (ax_abs, 1)):
            ax.plot(np.arange(n_taps) * scale, kl.mean(0), color=colour, lw=1.8, label=f"{name} (L = {n_taps})")
            for label, layer in (marks or {}).get(name, {}).items():
                if layer is not None and layer >= 0:
                    ax.axvline(layer * scale, color=colour, ls="--" if "KL" in label else ":", lw=1)
    ax_rel.set(xlabel="relative depth l / L (input of block l)", ylabel="KL(layer ‖ final) [nats]",
               title="By relative depth")
    ax_abs.set(xlabel="block l (input of block l)", ylabel="KL(layer ‖ final) [nats]", title="By block")
    ax_rel.legend(fontsize=8)
    fig.suptitle(title or "Logit-lens KL of two sizes (dashed: KL-rule effective depth; dotted: overlap rule)")
    return finish(fig)


def lens_token_grid(tokens: Sequence[str], top_tokens: Sequence[Sequence[str]], top_probs: np.ndarray,
                    layers: Sequence[int], title: str | None = None):
    """A static view of the lens on one sequence: the top-1 token at chosen layers (rows) and positions."""
    probs = np.asarray(top_probs)
    fig, ax = plt.subplots(figsize=(max(6.0, 0.62 * len(tokens)), 0.42 * len(layers) + 1.2))
    image = ax.imshow(probs, aspect="auto", cmap="Blues", vmin=0, vmax=1)
    fig.colorbar(image, ax=ax, fraction=0.025, pad=0.01, label="probability")
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


def lens_top1_grid(explorer: dict, n_rows: int = 8, n_columns: int = 16):
    """The explorer's arrays as a static figure: the top-1 lens token at evenly spread layers, over the last
    `n_columns` positions (more would shrink the labels below reading size in a page's column)."""
    n_layers = len(explorer["top_tokens"])
    shown = sorted(set(np.linspace(0, n_layers - 1, n_rows).round().astype(int).tolist()))
    positions = range(max(0, len(explorer["tokens"]) - n_columns), len(explorer["tokens"]))
    return lens_token_grid([explorer["tokens"][t] for t in positions],
                           [[explorer["top_tokens"][l][t][0] for t in positions] for l in shown],
                           np.asarray(explorer["top_probs"])[shown][:, list(positions), 0], shown,
                           title="Top-1 logit-lens token (colour: its probability)")


def gold_curves(both_texts: Mapping[str, Mapping[str, np.ndarray]]):
    """`lens_curves` over generated and gold solutions, or a note where the problem set has no worked solutions."""
    if not both_texts:
        return no_figure("This problem set has no worked solutions to read the lens over.")
    return lens_curves(both_texts, paired=True)
