"""Residual capture and the logit lens: identities that must hold exactly."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from helpers.interp.lens import (
    cut_points,
    depth_ratio,
    effective_depth_cosine,
    effective_depth_kl,
    effective_depth_overlap,
    logit_lens,
)
from helpers.interp.metrics import kl_divergence, topk_overlap
from helpers.interp.residual import capture
from helpers.models.adapter import UnsupportedArchitecture, adapter


def _ids(tokenizer):
    return tokenizer("Ada has 3 apples . Then Ada receives 4 more apples . How many apples does Ada have now ?")["input_ids"]


def test_residual_adds_up_on_tiny_models(tiny):
    model, tokenizer = tiny.module, tiny.tokenizer
    cap = capture(model, _ids(tokenizer))
    assert cap.residual_error() < 1e-5
    assert torch.allclose(cap.inputs[1:], cap.outputs[:-1])  # block l+1 reads what block l wrote


def test_last_tap_reproduces_the_model_output(tiny):
    model, tokenizer = tiny.module, tiny.tokenizer
    result = logit_lens(model, _ids(tokenizer), include_output=True)
    assert result.kl.shape[0] == model.config.num_hidden_layers + 1
    assert result.kl[-1].max() < 1e-5 and np.all(result.overlap[-1] == 1.0)
    assert np.all(result.kl >= 0)
    assert set(np.round(result.overlap.ravel() * 5, 6)) <= {0, 1, 2, 3, 4, 5}
    ids = _ids(tokenizer)
    reused = logit_lens(model, ids, include_output=True, cap=capture(model, ids))  # a capture saves the forward
    assert np.array_equal(reused.kl, result.kl) and np.array_equal(reused.overlap, result.overlap)


def test_start_restricts_columns_without_changing_values(tiny):
    model, tokenizer = tiny.module, tiny.tokenizer
    ids = _ids(tokenizer)
    full, part = logit_lens(model, ids), logit_lens(model, ids, start=5)
    assert np.allclose(full.kl[:, 5:], part.kl, atol=1e-5) and np.array_equal(full.overlap[:, 5:], part.overlap)
    with pytest.raises(ValueError):
        logit_lens(model, ids, start=len(ids))
    late = capture(model, ids, parts="io", logits_from=5)  # the head runs only where the lens reads
    assert late.logits.shape[0] == len(ids) - 5
    assert torch.allclose(late.logits, capture(model, ids, parts="io").logits[5:], atol=1e-5)
    with pytest.raises(ValueError, match="logits from position 5"):
        logit_lens(model, ids, start=4, cap=late)


def test_kl_and_overlap_primitives():
    logits = torch.randn(3, 7, 50)
    logp = torch.log_softmax(logits, -1)
    assert torch.allclose(kl_divergence(logp, logp), torch.zeros(3, 7), atol=1e-6)
    other = torch.log_softmax(torch.randn(3, 7, 50), -1)
    assert torch.all(kl_divergence(logp, other) > 0)
    assert not torch.allclose(kl_divergence(logp, other), kl_divergence(logp, other, "final||layer"))
    assert torch.all(topk_overlap(logits, logits) == 1)
    with pytest.raises(ValueError):
        kl_divergence(logp, other, "sideways")


def test_effective_depth_rules():
    kl = [8.0, 10.0, 9.0, 6.0, 4.9, 2.0, 0.5]
    assert effective_depth_kl(kl) == 4  # first below 5.0 = half of the maximum 10
    assert effective_depth_kl([4.0, *kl[1:]]) == 0  # the rule's known artefact: an early low layer counts
    assert effective_depth_kl(kl, fraction=0.1) == -1  # 0.5 at the last tap is not counted
    assert effective_depth_overlap([0.0, 0.1, 0.3, 0.4, 0.8]) == 3  # strictly above 0.3
    assert effective_depth_cosine([0.1, -0.2, 0.1, -0.1, 0.2, 0.3]) == 3  # the last upward crossing
    assert effective_depth_cosine([0.1, 0.2]) == -1
    assert depth_ratio(22, 28) == pytest.approx(23 / 28)
    assert cut_points([22, 23, 22, -1]) == [22, 23]


def test_unsupported_architecture_is_a_clear_error():
    from transformers import GPT2Config, GPT2LMHeadModel

    model = GPT2LMHeadModel(GPT2Config(n_layer=2, n_embd=16, n_head=2, vocab_size=20))
    with pytest.raises(UnsupportedArchitecture, match="Llama, Qwen2 and Gemma 3"):
        adapter(model)


@pytest.mark.slow
def test_embedded_model_identities(smol):
    model, tokenizer = smol.module, smol.tokenizer
    ids = tokenizer("Lina has 7 coins. Then Lina receives 5 more coins. 7 + 5 = 12")["input_ids"]
    cap = capture(model, ids)
    assert cap.residual_error() < 1e-5
    assert torch.allclose(adapter(model).readout(cap.outputs[-1]), cap.logits, atol=1e-4)
    result = logit_lens(model, ids, include_output=True)
    assert result.kl[-1].max() < 1e-4 and result.kl[:-1].mean() > 0.1


def test_every_sequence_builder_marks_the_first_solution_token(tiny):
    from helpers.data.problems import Problem
    from helpers.data.sequences import analysis_sequence, probe_sequence, solution_sequence

    tokenizer = tiny.tokenizer
    prompt = tokenizer("Ada has 3 apples .")["input_ids"]
    ids, start = solution_sequence(tokenizer, prompt, solution_tokens=[7, 8])
    assert start == len(prompt) and ids[start:] == [7, 8]
    ids, start = solution_sequence(tokenizer, prompt, solution_text="the final answer is", stop_id=2)
    assert ids[start:] == tokenizer("the final answer is", add_special_tokens=False)["input_ids"] + [2]
    ids, start = analysis_sequence(tokenizer, Problem(id="a", question="0 1", answer="7", solution="3 + 4 = 7"))
    assert ids[start:] == tokenizer(" 3 + 4 = 7", add_special_tokens=False)["input_ids"]
    ids, start = probe_sequence(tokenizer, "3 + 4 =", " 7")
    assert ids[start:] == tokenizer(" 7", add_special_tokens=False)["input_ids"]


def test_the_explorer_table_is_stored_and_read_back_without_running_the_model(tiny, tmp_path, monkeypatch):
    """The explorer's table is a record like the lens curves: computed once, conforming to its kind's shape, and read
    back by the next build (here: a lens that fails if called) with every number as computed."""
    from helpers.interp import studies
    from helpers.results.kinds import LENS_TABLE
    from helpers.results.shapes import conforms, shape_sizes

    monkeypatch.setenv("SVD_RESULTS", str(tmp_path))
    ids = _ids(tiny.tokenizer)
    item = ("ada", ids, len(ids) - 5)
    first = studies.lens_explorer_table(tiny, item, n_positions=8, n_top=2)
    config = {**tiny.identity(), "n_positions": 8, "n_top": 2}
    assert conforms(first, LENS_TABLE.shape_for(config), shape_sizes(config))
    assert len(first["tokens"]) == 5 and len(first["kl"]) == tiny.n_layers  # the sequence ends before 8 positions
    assert [len(row) for row in first["top_tokens"][0]] == [2] * 5

    def no_lens(*args, **kwargs):
        raise AssertionError("the stored table was computed again")

    monkeypatch.setattr(studies, "lens_table", no_lens)
    assert studies.lens_explorer_table(tiny, item, n_positions=8, n_top=2) == first
