"""One home for what every sampler of p^alpha shares (helpers.samplers.target): alpha and the length are checked by one
rule, MH and SMC compared side by side must target the same p^alpha, and the store keys did not move."""

from __future__ import annotations

import math

import pytest

from helpers.core.checks import SettingError
from helpers.results.store import config_hash
from helpers.samplers.power import PowerConfig
from helpers.samplers.settings import DecodeSettings, chapter_settings, engine_key
from helpers.samplers.smc import SMCConfig
from helpers.samplers.target import MH_MODES, Target, same_target


@pytest.mark.parametrize("alpha", [0, -1.0, math.inf, math.nan, True, "2", None])
def test_every_sampler_refuses_a_bad_alpha_with_the_same_words(alpha):
    for make in (lambda: Target(alpha), lambda: PowerConfig(alpha=alpha, max_new_tokens=64).validate(),
                 lambda: SMCConfig(alpha=alpha, max_new_tokens=64).validate(),
                 lambda: DecodeSettings("low_temperature", max_new_tokens=64, alpha=alpha)):
        with pytest.raises(ValueError, match=r"alpha must be a positive, finite number \(the target is p\^alpha\)"):
            make()


@pytest.mark.parametrize("length", [0, -3, 2.5, "64", True])
def test_every_sampler_refuses_a_bad_length(length):
    for make in (lambda: Target(2.0, length), lambda: SMCConfig(alpha=2.0, max_new_tokens=length).validate(),
                 lambda: DecodeSettings("greedy", max_new_tokens=length)):
        with pytest.raises(ValueError, match="max_new_tokens must be an integer of at least"):
            make()


def test_the_proposal_temperature_is_one_over_alpha_everywhere():
    power = PowerConfig(alpha=4.0, block_size=8, max_new_tokens=32)
    smc = SMCConfig(alpha=4.0, max_new_tokens=32)
    assert Target(4.0).temperature == power.temperature == smc.temperature == 0.25
    assert power.target == smc.target == Target(4.0, 32)
    s = chapter_settings(power, smc, max_new_tokens=32, shots=0, seed=0)
    assert s["low_temperature"].temperature == s["power"].temperature == s["smc"].temperature == 0.25
    assert MH_MODES == ("exact", "reference")


def test_mh_and_smc_compared_side_by_side_must_target_the_same_alpha():
    assert same_target(power=PowerConfig(alpha=2.0), smc=SMCConfig(alpha=2)) == 2.0
    with pytest.raises(ValueError, match="same p\\^alpha; got power alpha = 2, smc alpha = 4"):
        chapter_settings(PowerConfig(alpha=2.0), SMCConfig(alpha=4.0), max_new_tokens=64, shots=0, seed=0)


def test_chapter_04s_store_keys_are_the_ones_the_book_always_used():
    """The default profile's five decodes of chapter 04, keyed as before helpers.samplers.target existed (pinned)."""
    settings = chapter_settings(PowerConfig(alpha=2.0, block_size=40, mcmc_steps=1, mode="exact"),
                                SMCConfig(2.0, 4, 32, 0.5, 0), max_new_tokens=160, shots=2, seed=0)
    keys = {m: config_hash({**d.key(), **engine_key("transformers", d.samples)}) for m, d in settings.items()}
    assert keys == {"greedy": "9c39ad026ac245bd", "low_temperature": "024470439e98db9d",
                    "temperature": "85a6f071d7800e4d", "power": "89c82aa55e7393c6", "smc": "870200d0eadcb368"}


@pytest.mark.parametrize("make, field", [
    (lambda: Target(0.0), "alpha"),
    (lambda: Target(2.0, 0), "max_new_tokens"),
    (lambda: PowerConfig(alpha=2.0, block_size=0, max_new_tokens=8).validate(), "block_size"),
    (lambda: PowerConfig(alpha=2.0, block_size=4, mode="exact", top_k=5, max_new_tokens=8).validate(), "top_k"),
    (lambda: PowerConfig(alpha=2.0, block_size=16, max_new_tokens=8).validate(), "max_new_tokens"),
    (lambda: SMCConfig(alpha=2.0, particles=0, max_new_tokens=8).validate(), "particles"),
    (lambda: SMCConfig(alpha=2.0, ess_threshold=1.5, max_new_tokens=8).validate(), "ess_threshold"),
])
def test_a_refused_setting_names_its_field(make, field):
    """The runner points at the notebook parameter behind a field by the error's `field`, not by its wording."""
    with pytest.raises(SettingError) as caught:
        make()
    assert caught.value.field == field and isinstance(caught.value, ValueError)
