"""Figures draw without warnings, whatever tokens a model predicts."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from helpers.plots import lens, style


def test_tokens_the_font_cannot_draw_become_boxes_not_warnings():
    assert style.token_label("而这 x") == "□□·x"
    assert style.token_label(" The\n") == "·The⏎" and style.token_label("") == "∅"
    tokens = ["而", " 2", "这"]
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a missing glyph is a UserWarning, which a notebook prints to stderr
        fig = lens.lens_token_grid(tokens, [tokens, tokens], np.full((2, 3), 0.5), [0, 1])
        fig.canvas.draw()


def _row(model: str, depth: int, on: int = 20):
    """What the chapter 04 figures read of a `DepthRow`: a model at a depth, every method on `on` of 20 problems."""
    from types import SimpleNamespace

    accuracy = {"greedy": 0.5, "low": 0.4, "power": 0.45, "smc": 0.5}
    return SimpleNamespace(model=model, depth=depth, n_layers=6, n_problems=20, accuracy=accuracy,
                           count=lambda key: on if key == "smc" else 20,
                           pass_at_k={"temperature": [0.4, 0.6], "power": [0.5, 0.55]})


def test_chapter_04s_bars_and_pass_at_k_give_every_model_a_panel_of_its_own():
    import matplotlib.pyplot as plt

    from helpers.plots import power

    rows = [_row("small", 6), _row("small", 5, on=8), _row("big", 6), _row("big", 5)]
    for r in rows:
        r.size = 2e9 if r.model == "small" else 1e9  # sizes decide the panels' order, not the rows'
    for fig in (power.method_bars(rows, title="settings"), power.pass_at_k_curves(rows)):
        axes = [ax for ax in fig.axes if ax.get_title()]
        assert [ax.get_title() for ax in axes] == ["big", "small"]
        assert all(len(ax.get_xticks()) == 2 for ax in axes)  # two depths per model
        plt.close(fig)
    rows[3].pass_at_k = {"temperature": [0.2], "power": [0.25]}  # big at 5 blocks on one seed: k = 1 only
    fig = power.pass_at_k_curves(rows)
    assert [list(ax.get_xticks()) for ax in fig.axes if ax.get_title()] == [[1, 2], [1, 2]]  # its k = 2 still marked
    plt.close(fig)
    fig = power.method_bars(rows, marks={"small": " ‡", "big": ""})
    assert [ax.get_title() for ax in fig.axes] == ["big", "small ‡"]  # a model on problems of its own, marked
    labels = [t.get_text() for t in fig.axes[-1].get_legend().get_texts()]
    assert labels[-1].endswith("(hatched: on the searches' subset)") and not labels[0].endswith("subset)")
    assert [t.get_text() for t in fig.axes[0].get_xticklabels()] == ["6 (full)", "5"]
    assert fig.axes[1].patches[-1].get_hatch() == "///" and not fig.axes[0].patches[-1].get_hatch()  # small's SMC at 5
    plt.close(fig)


def test_a_model_has_one_colour_in_every_figure_and_it_is_no_methods():
    import matplotlib.pyplot as plt

    from helpers.models.registry import KNOWN_MODELS
    from helpers.plots import cost

    colours = {name: style.model_colour(name) for name in KNOWN_MODELS}
    assert len(set(colours.values())) == len(colours)  # each embedded model its own
    assert not set(colours.values()) & set(style.METHOD_COLOURS.values())  # a model's line never reads as a method
    assert style.model_colour("someone/else", 1) not in colours.values()  # another model takes a spare

    kl = {"kl": np.ones((2, 7)), "overlap": np.ones((2, 7))}
    order = ["qwen2.5-coder-1.5b", "gemma-3-270m"]
    for fig in (lens.lens_curves({name: kl for name in order}), lens.lens_curves({name: kl for name in order[::-1]}),
                lens.gold_curves({f"{name} · {text}": kl for name in order for text in ("generated", "gold")})):
        drawn = {line.get_label().split(" (")[0].split(" · ")[0]: line.get_color() for line in fig.axes[0].lines}
        assert drawn == {name: colours[name] for name in order}  # the same whichever comes first
        plt.close(fig)
    curves = {name: {"removed": np.arange(3), "saved": np.linspace(0, 0.1 * (i + 1), 3), "layers": 3}
              for i, name in enumerate(order)}
    fig = cost.flops_saved(curves, {})
    assert [line.get_color() for line in fig.axes[0].lines[:2]] == [colours[name] for name in order]
    plt.close(fig)
    twin = {"removed": np.arange(3), "saved": np.linspace(0, 0.3, 3), "layers": 3}  # one architecture, two names
    fig = cost.flops_saved({**curves, "A": twin, "B": dict(twin)}, {"needs x": 0.9, "needs y": 0.91})
    labels = [line.get_label() for line in fig.axes[0].lines if not line.get_label().startswith("_")]
    assert labels[-1] == "A = B (3 blocks)" and len(labels) == 3  # the coinciding pair drawn once
    listed = [t.get_text() for t in fig.axes[0].texts]
    assert len(listed) == 1 and "needs y: 91%" in listed[0] and "needs x: 90%" in listed[0]  # named once, together
    plt.close(fig)


def test_the_lengths_figure_stops_a_little_past_the_longest_answer_that_ended_and_names_its_cap():
    """Answers that end by 200 tokens of a 1,024-token decode: the axis ends near 230, not at 1,024 (every curve is
    flat past the longest ending), the label says how far the decodes ran, and the cap's mark is drawn."""
    from helpers.chapters.stitch import AnswerLengths
    from helpers.plots.truncation import answer_lengths

    ended = [[{"n_tokens": n, "stopped": "eos"}] for n in (50, 120, 200)]
    cut_off = [[{"n_tokens": 1024, "stopped": None}]]  # unfinished at the cap
    study = AnswerLengths("m", 6, 5, 1024, {("greedy", 6): ended, ("greedy", 5): ended + cut_off})
    fig = answer_lengths({"m": study}, {"this chapter's cap": 160})
    ax = fig.axes[0]
    assert ax.get_xlim() == pytest.approx((0, 1.15 * 200))
    assert ax.get_xlabel() == "new tokens (decoded up to 1024; flat past the axis)"  # the axis stops, the decode did not
    assert any(t.get_text() == "this chapter's cap\n(160)" for t in ax.texts)
