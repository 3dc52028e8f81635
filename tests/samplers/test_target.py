"""One home for what every sampler of p^alpha shares (helpers.samplers.target): alpha is held by Target alone and
checked by one rule, as is the length; the notebook's parameters map to the samplers' settings in one place; the store
keys did not move."""

from __future__ import annotations

import math

import pytest

from helpers.core.checks import SettingError
from helpers.results.store import config_hash
from helpers.samplers.power import PowerConfig
from helpers.samplers.settings import (
    SEARCH_PARAMETERS,
    DecodeSettings,
    Searches,
    chapter_settings,
    engine_key,
)
from helpers.samplers.smc import SMCConfig
from helpers.samplers.target import MH_MODES, Target


@pytest.mark.parametrize("alpha", [0, -1.0, math.inf, math.nan, True, "2", None])
def test_a_bad_alpha_is_refused_with_the_same_words_wherever_it_is_given(alpha):
    for make in (lambda: Target(alpha), lambda: DecodeSettings("low_temperature", max_new_tokens=64, target=Target(alpha)),
                 lambda: Searches.from_parameters({**NOTEBOOK, "alpha": alpha})):
        with pytest.raises(ValueError, match=r"alpha must be a positive, finite number \(the target is p\^alpha\)"):
            make()


@pytest.mark.parametrize("length", [0, -3, 2.5, "64", True])
def test_every_sampler_refuses_a_bad_length(length):
    for make in (lambda: Target(2.0, length), lambda: DecodeSettings("greedy", max_new_tokens=length),
                 lambda: Searches.from_parameters(NOTEBOOK, max_new_tokens=length)):
        with pytest.raises(ValueError, match="max_new_tokens must be an integer of at least"):
            make()


NOTEBOOK = dict(alpha=4.0, block_size=8, mcmc_steps=2, power_mode="exact", mh_blocks=0, smc_particles=4,
                smc_block_size=8, smc_ess_threshold=0.5, smc_bridge_tokens=0)  # a notebook's parameters, by their names


def test_the_proposal_temperature_is_one_over_alpha_everywhere():
    searches = Searches.from_parameters(NOTEBOOK)
    assert searches.target == Target(4.0) and searches.target.temperature == 0.25
    s = chapter_settings(searches, max_new_tokens=32, shots=0, seed=0)
    assert s["low_temperature"].temperature == s["power"].temperature == s["smc"].temperature == 0.25
    assert s["power"].target == s["smc"].target == s["low_temperature"].target == Target(4.0, 32)


def test_every_mh_mode_is_a_sampler_and_no_other_is():
    """The modes the runner, the cost model and the chapters read from MH_MODES are the ones PowerConfig runs."""
    for mode in MH_MODES:
        assert PowerConfig(mode=mode).validate().as_dict()["mode"] == mode
    with pytest.raises(SettingError, match="mode must be one of"):
        PowerConfig(mode="published").validate()


def test_alpha_is_declared_in_one_class():
    """α is a field of `Target` alone: the samplers' configs and the decode settings hold a Target, so methods
    compared side by side cannot aim at two p^α (there is nothing left to compare)."""
    import ast
    from pathlib import Path

    import helpers

    declared = []
    for path in Path(helpers.__file__).parent.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ClassDef):
                for item in node.body:
                    if isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name) and \
                            item.target.id == "alpha":
                        declared.append(node.name)
    assert declared == ["Target"]
    assert "alpha" not in PowerConfig().as_dict() and "alpha" not in SMCConfig().as_dict()


def test_the_notebook_parameters_map_to_the_samplers_settings_in_one_place():
    searches = Searches.from_parameters(NOTEBOOK, max_new_tokens=32)
    assert searches.power == PowerConfig(block_size=8, mcmc_steps=2, mode="exact")
    assert searches.smc == SMCConfig(particles=4, block_size=8, ess_threshold=0.5, bridge_tokens=0)
    for name, value in [("smc_block_size", 0), ("block_size", 0), ("power_mode", "fast"), ("smc_particles", 0),
                        ("smc_ess_threshold", 2.0), ("mcmc_steps", -1)]:
        with pytest.raises(SettingError) as caught:
            Searches.from_parameters({**NOTEBOOK, name: value})
        assert caught.value.field == name  # the runner names the notebook's parameter, not the sampler's field
    with pytest.raises(SettingError) as caught:
        Searches.from_parameters(NOTEBOOK, max_new_tokens=4)  # shorter than a block
    assert caught.value.field == "max_new_tokens" and "at least 8 (block_size, 8)" in str(caught.value)
    with pytest.raises(ValueError, match="the search settings lack smc_bridge_tokens"):
        Searches.from_parameters({k: v for k, v in NOTEBOOK.items() if k != "smc_bridge_tokens"})
    from helpers.runner.profiles import notebook_parameters

    for stem in ("04_power_sampling", "05_cost"):  # every name of the map is a parameter of the chapters that search
        assert set(SEARCH_PARAMETERS) <= set(notebook_parameters(stem)), stem


def test_chapter_04s_store_keys_are_the_ones_the_book_always_used():
    """The default profile's five decodes of chapter 04, keyed as before helpers.samplers.target existed (pinned)."""
    searches = Searches(Target(2.0), PowerConfig(block_size=40, mcmc_steps=1, mode="exact"), SMCConfig(4, 32, 0.5, 0))
    settings = chapter_settings(searches, max_new_tokens=160, shots=2, seed=0)
    keys = {m: config_hash({**d.key(), **engine_key("slot", d.samples)}) for m, d in settings.items()}
    assert keys == {"greedy": "9c39ad026ac245bd", "low_temperature": "024470439e98db9d",
                    "temperature": "85a6f071d7800e4d", "power": "89c82aa55e7393c6", "smc": "870200d0eadcb368"}


@pytest.mark.parametrize("make, field", [
    (lambda: Target(0.0), "alpha"),
    (lambda: Target(2.0, 0), "max_new_tokens"),
    (lambda: PowerConfig(block_size=0).validate(), "block_size"),
    (lambda: PowerConfig(block_size=4, mode="exact", top_k=5).validate(), "top_k"),
    (lambda: PowerConfig(block_size=16).validate(Target(2.0, 8)), "max_new_tokens"),
    (lambda: PowerConfig(block_size=4).validate(Target(2.0)), "max_new_tokens"),
    (lambda: SMCConfig(particles=0).validate(), "particles"),
    (lambda: SMCConfig(ess_threshold=1.5).validate(), "ess_threshold"),
])
def test_a_refused_setting_names_its_field(make, field):
    """The runner points at the notebook parameter behind a field by the error's `field`, not by its wording."""
    with pytest.raises(SettingError) as caught:
        make()
    assert caught.value.field == field and isinstance(caught.value, ValueError)
