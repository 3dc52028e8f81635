"""Figures draw without warnings, whatever tokens a model predicts."""

from __future__ import annotations

import warnings

import numpy as np

from helpers.plots import lens, style


def test_tokens_the_font_cannot_draw_become_boxes_not_warnings():
    assert style.token_label("而这 x") == "□□·x"
    assert style.token_label(" The\n") == "·The⏎" and style.token_label("") == "∅"
    tokens = ["而", " 2", "这"]
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a missing glyph is a UserWarning, which a notebook prints to stderr
        fig = lens.lens_token_grid(tokens, [tokens, tokens], np.full((2, 3), 0.5), [0, 1])
        fig.canvas.draw()
