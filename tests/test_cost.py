"""Parameter and FLOP counts from the config."""

from __future__ import annotations

import pytest

from helpers.cost import Shape, block_flops, depth_savings, model_cost


def test_parameter_count_matches_the_loaded_model(tiny):
    model, _, info = tiny
    assert model_cost(model.config).params_total == info.n_params


def test_truncated_depth_counts_only_kept_blocks(tiny):
    model, _, info = tiny
    full, half = model_cost(model.config), model_cost(model.config, depth=info.n_layers // 2)
    assert half.params_blocks * 2 == full.params_blocks
    assert half.flops_unembedding == full.flops_unembedding and half.flops_per_token < full.flops_per_token


def test_attention_cost_grows_with_context(tiny):
    shape = Shape.of(tiny[0].config)
    assert block_flops(shape, 100) - block_flops(shape, 0) == pytest.approx(4 * shape.heads * shape.head_dim * 100)


def test_report_seven_percent_for_qwen_7b():
    from transformers import Qwen2Config

    qwen7b = Qwen2Config(hidden_size=3584, intermediate_size=18944, num_attention_heads=28, num_key_value_heads=4,
                         vocab_size=152064, num_hidden_layers=28, tie_word_embeddings=False)
    assert model_cost(qwen7b).params_total == pytest.approx(7.62e9, rel=0.01)  # the published 7.6 B
    assert depth_savings(qwen7b, 26) == pytest.approx(0.07, abs=0.01)  # "saving roughly 7%" (report §4.2.4)
