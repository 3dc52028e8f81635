"""Explorers for readers with a live kernel, built over precomputed arrays so every callback is instant.

Each explorer is paired in the book with a static figure that carries the same result. When the book is built
(`python -m helpers run` sets SVD_LIVE_WIDGETS=0) an explorer prints a note instead: its callbacks are Python
and cannot run in static HTML, and nbclient can block on a cell that opens widgets (jupyter/nbclient#312).
"""

from __future__ import annotations

import html
import os
from collections.abc import Sequence

import numpy as np

from helpers.core import env


def live() -> bool:
    """Whether explorers draw real widgets (a Jupyter session) or a note (a headless book build)."""
    return os.environ.get(env.LIVE_WIDGETS, "1") != "0"


def _static_note(what: str):
    from IPython.display import Markdown

    return Markdown(f"*Interactive explorer: {what}. Open this notebook in Jupyter to use it; the figure below "
                    "shows one setting.*")


def _token_label(token: str) -> str:
    return html.escape(token.replace("\n", "⏎").replace(" ", "·")) or "∅"


def lens_explorer(tokens: Sequence[str], top_tokens: Sequence[Sequence[Sequence[str]]], top_probs: Sequence,
                  kl: Sequence, start_layer: int | None = None):
    """Layer slider → the logit lens's top tokens at every position of one sequence.

    `tokens[t]` is the input token at position t; `top_tokens[l][t]` the lens's most likely next tokens at
    tap l, with probabilities `top_probs[l, t]`; `kl[l, t]` the KL to the model's own output there.
    """
    if not live():
        return _static_note("a layer slider over the logit lens's top tokens at every position")
    import ipywidgets as w

    n_layers, top_probs, kl = len(top_tokens), np.asarray(top_probs), np.asarray(kl)  # nested lists, as stored
    slider = w.IntSlider(value=n_layers - 1 if start_layer is None else start_layer, min=0, max=n_layers - 1,
                         description="layer", continuous_update=False)
    table = w.HTML()

    def render(change=None) -> None:
        l = slider.value
        rows = []
        for t, token in enumerate(tokens):
            guesses = ", ".join(f"{_token_label(s)} ({p:.2f})" for s, p in zip(top_tokens[l][t], top_probs[l, t], strict=True))
            rows.append(f"<tr><td style='text-align:right'>{t}</td><td><code>{_token_label(token)}</code></td>"
                        f"<td>{guesses}</td><td style='text-align:right'>{kl[l, t]:.2f}</td></tr>")
        table.value = ("<table style='font-size:12px'><tr><th>pos</th><th>input</th>"
                       f"<th>lens at layer {l}: top next tokens (prob)</th><th>KL</th></tr>" + "".join(rows) + "</table>")

    slider.observe(render, names="value")
    render()
    return w.VBox([slider, table])


def alpha_explorer(tables):
    """α slider → the toy model's p, p^α and low-temperature distributions (`tables` from the chapter)."""
    if not live():
        return _static_note("an α slider over the toy model's p, p^α and low-temperature distributions")
    import ipywidgets as w
    import matplotlib.pyplot as plt

    from helpers.plots.power import toy_distributions

    out = w.Output()
    alphas = sorted(tables)
    slider = w.SelectionSlider(options=alphas, value=alphas[len(alphas) // 2], description="α",
                               continuous_update=False)

    def show(change=None) -> None:
        with out:
            out.clear_output(wait=True)
            fig, ax = plt.subplots(figsize=(9, 3))
            toy_distributions(tables, slider.value, ax)
            fig.tight_layout()
            plt.show()

    slider.observe(show, names="value")
    show()
    return w.VBox([slider, out])


def cost_explorer(configs: dict, length: int, block_size: int, mcmc_steps: int, context: float = 0.0):
    """Sliders for T, B, N and the kept depth → the token multiplier (formula and exact count), the FLOPs that
    truncation saves and the net cost against full-depth greedy, for a model chosen from `configs`."""
    if not live():
        return _static_note("sliders for answer length, block size, MH steps and kept depth over the cost model")
    import ipywidgets as w

    from helpers.evaluation.cost import (
        Shape,
        expected_decoded_tokens,
        flops_share,
        net_cost_ratio,
        report_multiplier,
    )

    names = list(configs)
    model = w.Dropdown(options=names, value=names[0], description="model")
    T = w.IntSlider(value=length, min=16, max=4096, step=16, description="T (tokens)", continuous_update=False)
    B = w.IntSlider(value=block_size, min=8, max=512, step=8, description="B (block)", continuous_update=False)
    N = w.IntSlider(value=mcmc_steps, min=0, max=20, description="N (steps)", continuous_update=False)
    depth = w.IntSlider(value=Shape.of(configs[names[0]]).layers, min=1, max=Shape.of(configs[names[0]]).layers,
                        description="blocks kept", continuous_update=False)
    table = w.HTML()

    def render(change=None) -> None:
        config = configs[model.value]
        depth.max = Shape.of(config).layers
        formula = report_multiplier(T.value, B.value, N.value)
        exact = expected_decoded_tokens(T.value, B.value, N.value) / T.value - 1
        share = flops_share(config, depth.value, context)
        rows = [("extra tokens per answer token, report's formula N·T/(4B)", f"{formula:.2f}"),
                ("extra tokens per answer token, exact block schedule", f"{exact:.2f}"),
                (f"FLOPs per token saved at {depth.value} of {depth.max} blocks", f"{100 * (1 - share):.1f}%"),
                ("net cost of power sampling / full-depth greedy",
                 f"{net_cost_ratio(config, depth.value, T.value, B.value, N.value, context):.2f}")]
        table.value = "<table>" + "".join(f"<tr><td>{html.escape(a)}</td><td style='text-align:right'><b>{b}</b></td></tr>"
                                          for a, b in rows) + "</table>"

    for control in (model, T, B, N, depth):
        control.observe(render, names="value")
    render()
    return w.VBox([model, T, B, N, depth, table])
