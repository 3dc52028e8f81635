"""Parameter and FLOP counts from the config."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from helpers.evaluation.cost import Shape, block_flops, depth_savings, model_cost


def test_parameter_count_matches_the_loaded_model(tiny):
    model = tiny.module
    assert model_cost(model.config).params_total == sum(p.numel() for p in model.parameters())


def test_truncated_depth_counts_only_kept_blocks(tiny):
    model, info = tiny.module, tiny.info
    full, half = model_cost(model.config), model_cost(model.config, depth=info.n_layers // 2)
    assert half.params_blocks * 2 == full.params_blocks
    assert half.flops_unembedding == full.flops_unembedding and half.flops_per_token < full.flops_per_token


def test_attention_cost_grows_with_context(tiny):
    shape = Shape.of(tiny.module.config)
    assert block_flops(shape, 100) - block_flops(shape, 0) == pytest.approx(4 * shape.heads * shape.head_dim * 100)


def test_report_seven_percent_for_qwen_7b():
    from transformers import Qwen2Config

    qwen7b = Qwen2Config(hidden_size=3584, intermediate_size=18944, num_attention_heads=28, num_key_value_heads=4,
                         vocab_size=152064, num_hidden_layers=28, tie_word_embeddings=False)
    assert model_cost(qwen7b).params_total == pytest.approx(7.62e9, rel=0.01)  # the published 7.6 B
    assert depth_savings(qwen7b, 26) == pytest.approx(0.07, abs=0.01)  # "saving roughly 7%" (report §4.2.4)


# --------------------------------------------------------------------------------------------------
# The token count of power sampling
# --------------------------------------------------------------------------------------------------

from helpers.evaluation.cost import (  # noqa: E402
    break_even_depth,
    expected_decoded_tokens,
    flops_share,
    qwen25_math_configs,
    report_multiplier,
    schedule_multiplier,
)


def test_report_formula_gives_its_eight_point_eight_four():
    assert report_multiplier(679, 192, 10) == pytest.approx(8.84, abs=0.005)  # report §4.2.4


def test_exact_count_of_the_report_settings_sums_four_blocks():
    # blocks end at 192, 384, 576, 679; each of the 10 moves per block regenerates (t + 1) / 2 tokens on average
    assert expected_decoded_tokens(679, 192, 10) == 679 + 10 * (193 + 385 + 577 + 680) / 2
    assert schedule_multiplier(679, 192, 10) == pytest.approx(13.5, abs=0.05)


def _simulate(length_model, stops, max_new_tokens, block_size, steps, mode, n_chains=600):
    from helpers.engines.reencode import ReencodeEngine
    from helpers.samplers.power import PowerConfig, run_chains
    from helpers.samplers.target import Target

    target, cfg = Target(2.0, max_new_tokens), PowerConfig(block_size=block_size, mcmc_steps=steps, mode=mode)
    chains = run_chains(ReencodeEngine(length_model), [[1]] * n_chains, stops, target, cfg, list(range(n_chains)))
    decoded = np.array([c.decoded_tokens for c in chains], dtype=float)
    return chains, decoded.mean(), decoded.std() / np.sqrt(n_chains)


@pytest.mark.toy
@pytest.mark.parametrize("mode", ["exact", "reference"])
def test_exact_count_matches_the_sampler_without_eos(mode):
    """No stop token: every answer has max_new_tokens tokens and the sampler's own count is the schedule's."""
    from helpers.samplers.toy import ToyLM

    chains, mean, se = _simulate(ToyLM(vocab=3, seed=1), [], 12, 4, 3, mode)
    assert {len(c.tokens) for c in chains} == {12}
    assert abs(mean - expected_decoded_tokens(12, 4, 3, mode=mode)) < 4 * se + 1e-9


def _fixed_length_toy(length: int):
    """A toy model whose every completion ends with EOS as its `length`-th token (prompt of one token)."""
    from helpers.samplers.toy import EOS, ToyLM

    toy = ToyLM(vocab=3, seed=2)
    with torch.no_grad():
        toy.table[..., EOS] = -40.0
        toy.table[:, :, length - 1, EOS] = 40.0  # position length−1 predicts the length-th generated token
    return toy


@pytest.mark.toy
@pytest.mark.parametrize("mode", ["exact", "reference"])
def test_exact_count_matches_the_sampler_when_answers_end_early(mode):
    """EOS at T = 6 < max_new_tokens = 12: reference mode stops after the block holding EOS, exact keeps moving."""
    from helpers.samplers.toy import EOS

    chains, mean, se = _simulate(_fixed_length_toy(6), [EOS], 12, 4, 2, mode)
    assert {len(c.tokens) for c in chains} == {6}
    expected = expected_decoded_tokens(6, 4, 2, mode=mode, max_new_tokens=12)
    assert abs(mean - expected) < 4 * se + 1e-9
    assert expected_decoded_tokens(6, 4, 2, mode="exact", max_new_tokens=12) > expected_decoded_tokens(6, 4, 2)


def test_schedule_inputs_are_checked():
    for bad in (0, -3, float("nan"), True):
        with pytest.raises(ValueError, match="length"):
            expected_decoded_tokens(bad, 4, 2)
    with pytest.raises(ValueError, match="block_size"):
        report_multiplier(100, 0, 2)
    with pytest.raises(ValueError, match="mode"):
        expected_decoded_tokens(10, 4, 2, mode="fast")


def test_report_models_and_break_even():
    configs = qwen25_math_configs()
    assert model_cost(configs["Qwen2.5-Math-1.5B"]).params_total == pytest.approx(1.54e9, rel=0.01)
    seven = configs["Qwen2.5-Math-7B"]
    assert flops_share(seven, 28) == pytest.approx(1.0)
    assert break_even_depth(seven, 1.0) == 28  # no extra tokens: the full model breaks even with itself
    assert break_even_depth(seven, 14.5) is None  # the unembedding alone costs more than 1/14.5 of a token
    depth = break_even_depth(seven, 3.0)
    assert 3.0 * flops_share(seven, depth) <= 1.0 < 3.0 * flops_share(seven, depth + 1)


def test_net_cost_is_one_for_the_proposal_alone_at_full_depth_and_falls_with_depth():
    from helpers.evaluation.cost import expected_decoded_tokens, flops_share, net_cost_ratio

    seven = qwen25_math_configs()["Qwen2.5-Math-7B"]
    assert net_cost_ratio(seven, 28, 679, 192, 0) == pytest.approx(1.0)  # no move: one greedy-length decode
    report = [net_cost_ratio(seven, d, 679, 192, 10, context=339.5) for d in (28, 26, 20)]
    assert report[0] > report[1] > report[2] and report[1] > 1  # the report's trade: two blocks do not pay
    assert report[1] == pytest.approx(expected_decoded_tokens(679, 192, 10) / 679 * flops_share(seven, 26, 339.5))


def test_the_token_multiplier_pairs_the_problems_both_ran():
    """One definition of "times the tokens of a greedy answer": decoded tokens per power-sampled answer over those
    per greedy answer, on the problems both ran (the first k, where the power samples ran on a subset)."""
    from helpers.evaluation.cost import token_multiplier

    power = [[{"decoded_tokens": 300}, {"decoded_tokens": 500}], [{"decoded_tokens": 200}, {"decoded_tokens": 200}]]
    greedy = [[{"decoded_tokens": 100}], [{"decoded_tokens": 50}], [{"decoded_tokens": 1000}]]
    assert token_multiplier(power, greedy) == pytest.approx(300 / 75)  # the third problem has no power sample
    assert token_multiplier(power[:1], greedy) == pytest.approx(400 / 100)
