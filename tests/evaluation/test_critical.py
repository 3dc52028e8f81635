"""Critical depths as data: chapter 03 stores them, chapters 04-05 name depths by them, and a fixed depth that
disagrees with the sweep is said on the page."""

from __future__ import annotations

import pytest

from helpers.chapters.power_sampling import compare_methods
from helpers.chapters.power_sampling_text import depth_sentence
from helpers.evaluation.critical import (
    CriticalDepthMissing,
    SweepSettings,
    choose_depths,
    parse_depth,
    store_critical,
    stored_critical,
)
from helpers.models.loading import load_model
from tests.chapters.test_cost_benefit import SEARCHES, SETTINGS
from tests.conftest import tiny_problems

SWEEP = SweepSettings.from_parameters(dict(
    dataset="arithmetic", n_problems=8, levels=[5, 6], seed=0, shots=2, max_new_tokens=160, depths=None, span=4,
    depth_step=4, kl_fraction=0.5, overlap_threshold=0.3, collapse_fraction=0.5))


@pytest.mark.parametrize(("entry", "parsed"), [(23, (False, 23)), ("critical", (True, 0)), ("critical-1", (True, -1)),
                                               ("critical+2", (True, 2)), (" critical - 3 ", (True, -3))])
def test_depth_entries_are_numbers_or_relative_to_the_critical_depth(entry, parsed):
    assert parse_depth(entry) == parsed


@pytest.mark.parametrize("entry", ["crit", "critical*2", "23", 2.5, True, None, "critical-"])
def test_other_depth_entries_are_refused_with_what_is_allowed(entry):
    with pytest.raises(ValueError, match="critical-1"):
        parse_depth(entry)


def test_settings_name_every_missing_field():
    with pytest.raises(ValueError, match="collapse_fraction"):
        SweepSettings.from_parameters({"dataset": "arithmetic"})


def test_relative_depths_resolve_from_the_stored_critical_depth(tiny_dir, tmp_path, monkeypatch):
    monkeypatch.setenv("SVD_RESULTS", str(tmp_path))
    model = load_model(str(tiny_dir))
    info = model.info
    with pytest.raises(CriticalDepthMissing, match="--only 03_stitch_and_preserve"):
        choose_depths(model, "tiny", info.n_layers, ["critical"], SWEEP)  # chapter 03 has not run: said, not guessed
    assert store_critical(model, SWEEP, {2: 0.1, 3: 0.5, 4: 0.8}, 16) == 3  # 0.5 >= half of 0.8, 0.1 is not
    assert stored_critical(model, SWEEP) == 3
    choice = choose_depths(model, "tiny", info.n_layers, ["critical", "critical-1", "critical+1"], SWEEP)
    assert choice.depths == (3, 2) and choice.relative and choice.critical == 3  # critical+1 is the full model
    assert "are named by chapter 03's critical depth, 3: 3 and 2." in choice.describe()
    alone = choose_depths(model, "tiny", info.n_layers, ["critical"], SWEEP)
    assert alone.describe() == "The depth tested on tiny's 4 blocks is chapter 03's critical depth, 3."
    other = SweepSettings.from_parameters({**SWEEP.key(), "collapse_fraction": 0.8})
    with pytest.raises(CriticalDepthMissing):  # another rule's critical depth is another record
        choose_depths(model, "tiny", info.n_layers, ["critical"], other)
    with pytest.raises(ValueError, match=r"outside 2\.\.4"):
        choose_depths(model, "tiny", info.n_layers, ["critical-2"], SWEEP)


def test_a_fixed_depth_that_disagrees_with_chapter_03_is_reported(tiny_dir, tmp_path, monkeypatch):
    monkeypatch.setenv("SVD_RESULTS", str(tmp_path))
    model = load_model(str(tiny_dir))
    info = model.info
    fixed = choose_depths(model, "tiny", info.n_layers, [2], SWEEP)
    assert fixed.critical is None and "no critical depth to compare" in fixed.describe()
    store_critical(model, SWEEP, {2: 0.1, 3: 0.5, 4: 0.8}, 16)
    assert "which include chapter 03's critical depth, 3" in choose_depths(model, "tiny", 4, [3], SWEEP).describe()
    rows = compare_methods([str(tiny_dir)], tiny_problems(), [2], SEARCHES, critical_sweep=SWEEP.key(), **SETTINGS)
    assert {r.depth for r in rows} == {4, 2}
    sentence = depth_sentence(rows)
    assert "fixed the depths" in sentence and "critical depth at 3" in sentence and "disagree" in sentence
    default = choose_depths(model, "tiny", 4, None, SWEEP)
    assert default.depths == (3,) and default.describe().startswith("The profile names no depth, so the one tested")


def test_two_sizes_each_at_their_critical_depth_and_the_gap_between_them(tmp_path, monkeypatch):
    """Chapter 04 on two models of one family at different depths: each resolves 'critical' from its own stored
    sweep, and the size contrast pairs both models' differences over the same problems."""
    from helpers.chapters.power_sampling_text import size_values
    from helpers.models.tiny import make_tiny

    monkeypatch.setenv("SVD_RESULTS", str(tmp_path / "results"))
    small = make_tiny("qwen2", tmp_path / "small", n_layers=4)
    large = make_tiny("qwen2", tmp_path / "large", n_layers=6, hidden_size=64)
    for path, accuracy in ((small, {2: 0.1, 3: 0.5, 4: 0.8}), (large, {3: 0.1, 4: 0.2, 5: 0.6, 6: 0.7})):
        store_critical(load_model(str(path)), SWEEP, accuracy, 16)
    rows = compare_methods([str(small), str(large)], tiny_problems(), ["critical"], SEARCHES,
                           critical_sweep=SWEEP.key(), **SETTINGS)
    assert {(r.model, r.depth) for r in rows} == {(str(small), 4), (str(small), 3), (str(large), 6), (str(large), 5)}
    values = size_values(rows)
    assert values["size_small"] == str(small) and values["size_large"] == str(large)
    assert (values["size_small_depth"], values["size_large_depth"]) == (3, 5)
    assert f"minus the smaller {small}'s" in values["size_sentence"] and "(paired over the same 2 problems" in \
        values["size_sentence"] and "The report's differences were +4 points" in values["size_sentence"]
    assert values["size_headline"].startswith(f"On {large}, power sampling at 5 of 6 blocks scored")
    assert "cannot ask whether the answer depends" in size_values([r for r in rows if r.model == str(small)])[
        "size_sentence"]


def test_a_model_on_levels_of_its_own_keys_its_critical_depth_by_them_and_the_others_keep_their_keys():
    own = SweepSettings.from_parameters({**SWEEP.key(), "model_levels": {"base": [1, 2, 3]}})
    assert own.for_model("instruct").key() == SWEEP.key()  # no new key for the models on the shared levels
    assert own.for_model("base").key() == {**SWEEP.key(), "levels": [1, 2, 3]}
    assert own.parameters() == {**SWEEP.key(), "model_levels": {"base": [1, 2, 3]}}
    assert SweepSettings.from_parameters(own.parameters()) == own and SWEEP.parameters() == SWEEP.key()
    with pytest.raises(ValueError, match="for_model"):
        own.key()  # a record keyed by every model's levels at once would match no model
    with pytest.raises(ValueError, match=r"the levels of .base. must be a non-empty list"):
        SweepSettings.from_parameters({**SWEEP.key(), "model_levels": {"base": "1,2"}})


def test_relative_depths_read_the_critical_depth_stored_under_the_models_own_levels(tiny_dir, tmp_path, monkeypatch):
    monkeypatch.setenv("SVD_RESULTS", str(tmp_path))
    model = load_model(str(tiny_dir))
    info = model.info
    own = SweepSettings.from_parameters({**SWEEP.key(), "model_levels": {"tiny": [1, 2]}})
    store_critical(model, own.for_model("tiny"), {2: 0.1, 3: 0.5, 4: 0.8}, 16)
    assert choose_depths(model, "tiny", info.n_layers, ["critical"], own).depths == (3,)
    with pytest.raises(CriticalDepthMissing):
        choose_depths(model, "other", info.n_layers, ["critical"], own)  # on the shared levels: nothing stored there


def test_the_critical_depths_interval_is_a_point_where_the_edge_is_sharp_and_wide_on_a_knife_edge():
    from helpers.evaluation.critical import critical_interval

    sharp = {6: [True] * 40, 5: [True] * 38 + [False] * 2, 4: [False] * 40}
    assert critical_interval(sharp, 0.5) == (5, 5)
    edge = {6: [True] * 20 + [False] * 20, 5: [True] * 10 + [False] * 30, 4: [False] * 40}  # 5 sits on the line
    lo, hi = critical_interval(edge, 0.5)
    assert (lo, hi) == (5, 6)
    assert critical_interval({6: [False] * 4, 5: [False] * 4}, 0.5) is None


def test_a_floor_sweep_is_keyed_apart_and_a_sweep_without_one_keeps_its_key():
    from helpers.evaluation.critical import SweepSettings

    values = {"dataset": "arithmetic", "n_problems": 8, "levels": [5, 6], "seed": 0, "shots": 2,
              "max_new_tokens": 160, "depths": None, "span": 4, "depth_step": 4, "kl_fraction": 0.5,
              "overlap_threshold": 0.3, "collapse_fraction": 0.5}
    plain = SweepSettings.from_parameters(values)
    assert plain.key() == values  # as the stored critical depths were keyed before floors existed
    floored = SweepSettings.from_parameters({**values, "floor_fraction": 0.25})
    assert floored.key() == {**values, "floor_fraction": 0.25} and floored.parameters()["floor_fraction"] == 0.25
    assert SweepSettings.from_parameters(floored.parameters()) == floored
    lens = SweepSettings.from_parameters({**values, "lens_per_level": 8})  # where the cut points' lens read
    assert lens.key() == values and lens.parameters()["lens_per_level"] == 8  # no critical depth moves with it
    assert SweepSettings.from_parameters(lens.parameters()) == lens  # chapters 04-05 get it with the settings
