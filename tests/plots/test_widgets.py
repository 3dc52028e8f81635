"""The explorers: live widgets in a Jupyter session, a note in a headless book build."""

from __future__ import annotations

import numpy as np
import pytest

from helpers.chapters.power_sampling import toy_convergence
from helpers.core import env
from helpers.plots import widgets

pytest.importorskip("ipywidgets")


def _lens_arrays():
    tokens = ["2", "+", "3"]
    top_tokens = [[["a", "b"], ["c", "d"], ["e", "f"]], [["5", "x"], ["5", "y"], ["5", "z"]]]
    top_probs = np.full((2, 3, 2), 0.5)
    kl = np.array([[1.0, 2.0, 3.0], [0.0, 0.0, 0.0]])
    return tokens, top_tokens, top_probs, kl


def test_lens_explorer_redraws_its_table_when_the_slider_moves(monkeypatch):
    monkeypatch.delenv(env.LIVE_WIDGETS, raising=False)
    box = widgets.lens_explorer(*_lens_arrays())
    slider, table = box.children
    assert slider.value == 1 and "lens at layer 1" in table.value and "<code>+</code>" in table.value
    slider.value = 0
    assert "lens at layer 0" in table.value and "3.00" in table.value


def test_a_book_build_gets_a_note_instead_of_widgets(monkeypatch):
    monkeypatch.setenv(env.LIVE_WIDGETS, "0")
    note = widgets.lens_explorer(*_lens_arrays())
    assert "Open this notebook in Jupyter" in note.data
    toy = toy_convergence(2.0, [0], 4)
    assert "α slider" in widgets.alpha_explorer(toy.tables).data


def test_alpha_explorer_offers_every_alpha(monkeypatch):
    monkeypatch.delenv(env.LIVE_WIDGETS, raising=False)
    toy = toy_convergence(2.0, [0], 4)
    box = widgets.alpha_explorer(toy.tables)
    slider = box.children[0]
    assert list(slider.options) == sorted(toy.tables)


def test_cost_explorer_recomputes_the_trade_when_a_slider_moves(monkeypatch):
    from helpers.evaluation.cost import qwen25_math_configs

    monkeypatch.delenv(env.LIVE_WIDGETS, raising=False)
    box = widgets.cost_explorer(qwen25_math_configs(), 679, 192, 10)
    model, T, _block, N, depth, table = box.children
    assert "8.84" in table.value and "13.51" in table.value  # the report's formula and the exact count
    assert depth.value == depth.max == 28 and "0.0%" in table.value
    model.value = "Qwen2.5-Math-7B"
    depth.value = 26
    assert "6.6%" in table.value  # 28 → 26 blocks of the 7B save 6.6%: the report's "roughly 7%"
    T.value = 192  # one block: the formula says N·T/(4B) = 2.50, the exact count 10·193/2/192 = 5.03
    assert "2.50" in table.value and "5.03" in table.value
    N.value = 0
    assert "<b>0.00</b>" in table.value  # no MH steps, no extra tokens
    monkeypatch.setenv(env.LIVE_WIDGETS, "0")
    assert "sliders" in widgets.cost_explorer(qwen25_math_configs(), 679, 192, 10).data


def test_the_toy_curves_are_stored_and_read_back(tmp_path, monkeypatch):
    """Chapter 04's toy curves are stored like its decodes, so a build from the release recomputes none of them."""
    import helpers.evaluation.toy_study as study
    import helpers.samplers.toy_curves as curves

    monkeypatch.setenv("SVD_RESULTS", str(tmp_path))
    first = toy_convergence(2.0, [0, 1], 16, particles=[1])
    monkeypatch.setattr(curves, "run_chains", lambda *a, **k: (_ for _ in ()).throw(AssertionError("recomputed")))
    again = toy_convergence(2.0, [0, 1], 16, particles=[1])
    assert again.tv == first.tv and again.smc_tv == first.smc_tv and again.noise_floor == first.noise_floor
    assert len(study.toy_run(2.0, [0, 1], 16, 0, [1])) == 1
