"""Interventions and the depth metrics: invariants that hold whatever the weights are."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from helpers.interp.attribution import integrated_gradients
from helpers.interp.erasure import erasure_map, mean_residual
from helpers.interp.interventions import Erase, Skip, effects, reference_run
from helpers.interp.residual import capture, contributions, reduce_layers, summarise
from helpers.interp.skip_effects import depth_score, future_splits, later_layer_profile, skip_effects

TEXT = "Ada has 3 apples . Then Ada receives 4 more apples . How many apples does Ada have now ? 3 + 4 = 7"


def _ids(tokenizer):
    return tokenizer(TEXT)["input_ids"]


def test_contributions_match_their_definitions(tiny):
    model, tokenizer = tiny.module, tiny.tokenizer
    cap = capture(model, _ids(tokenizer))
    c = contributions(cap)
    L, T = cap.n_layers, cap.inputs.shape[1]
    assert all(v.shape == (L, T) for v in c.values())
    l, t = 1, 5
    h, a, m = cap.inputs[l, t], cap.attn[l, t], cap.mlp[l, t]
    assert c["rc_mlp"][l, t] == pytest.approx(float(m.norm() / (h + a).norm()), rel=1e-5)
    assert c["cos_layer"][l, t] == pytest.approx(float(torch.cosine_similarity(a + m, h, dim=0)), abs=1e-5)
    assert np.all(np.abs(c["cos_attn"]) <= 1 + 1e-5)


def test_reductions_weigh_tokens_or_prompts():
    short, long = np.array([[1.0, 1.0]]), np.array([[0.0, 0.0, 0.0, 0.0, 0.0, 0.0]])
    assert reduce_layers([short, long], "tokens")[0] == pytest.approx(2 / 8)
    assert reduce_layers([short, long], "prompts")[0] == pytest.approx(0.5)
    assert reduce_layers([summarise(short), summarise(long)], "max")[0] == 1.0
    with pytest.raises(ValueError, match="reduction"):
        reduce_layers([short], "median")


def test_reference_run_contributions_add_up_to_the_capture(tiny):
    model, tokenizer = tiny.module, tiny.tokenizer
    ids = _ids(tokenizer)
    ref, cap = reference_run(model, ids), capture(model, ids)
    assert torch.allclose(ref.contributions, cap.outputs - cap.inputs, atol=1e-5)
    assert torch.allclose(ref.probs, torch.softmax(cap.logits, -1), atol=1e-6)


def test_an_empty_edit_changes_nothing(tiny):
    model, tokenizer = tiny.module, tiny.tokenizer
    eff = effects(model, _ids(tokenizer), [None, None])
    assert eff.relative.max() < 1e-5 and eff.output.max() < 1e-6


@pytest.mark.parametrize("part", ["layer", "attn", "mlp"])
def test_future_skip_effects_are_zero_on_and_below_the_skipped_layer(tiny, part):
    model, tokenizer = tiny.module, tiny.tokenizer
    ids = _ids(tokenizer)
    L, t = model.config.num_hidden_layers, 9
    result = skip_effects(model, ids, part, splits=[t])
    lower = np.tril(result.matrix[0])  # row = skipped layer s, column = affected layer l ≤ s
    assert lower.max() == 0.0
    assert np.triu(result.matrix[0], 1).max() > 0  # later layers do notice
    assert result.output[0].max() <= np.sqrt(2) + 1e-6
    assert result.matrix.shape == (1, L, L)


def test_positions_outside_the_skip_are_untouched(tiny):
    model, tokenizer = tiny.module, tiny.tokenizer
    ids = _ids(tokenizer)
    t, s = 9, 1
    eff = effects(model, ids, [Skip(s, "layer", 1, t)])
    assert eff.relative[0, :, 0].max() == 0.0  # position 0 is protected
    assert eff.output[0, 0] == 0.0
    assert eff.relative[0, :s].max() == 0.0  # blocks before the skipped one run as before
    assert eff.relative[0, s, 1:t].min() == pytest.approx(1.0)  # the skipped block writes nothing there


def test_current_layer_skip_has_unit_diagonal(tiny):
    model, tokenizer = tiny.module, tiny.tokenizer
    result = skip_effects(model, _ids(tokenizer), "layer", splits=[None])
    assert np.allclose(np.diag(result.matrix[0]), 1.0, atol=1e-5)


def test_erasure_leaves_earlier_positions_untouched(tiny):
    model, tokenizer = tiny.module, tiny.tokenizer
    ids = _ids(tokenizer)
    baseline = mean_residual(model, [ids, ids[:10]])
    L = model.config.num_hidden_layers
    assert baseline.shape == (L + 1, model.config.hidden_size)
    t = 7
    eff = effects(model, ids, [Erase(2, t)], baseline=baseline)
    assert eff.output[0, :t].max() == 0.0 and eff.output[0, t:].max() > 0
    assert eff.relative[0, :, :t].max() == 0.0
    grid = erasure_map(model, ids, baseline, answer_start=len(ids) - 1)
    assert grid.shape == (L + 1, len(ids))
    assert grid[:, -1].max() < 1e-5  # erasing the last token cannot change the predictions before it (batched: float noise)


@pytest.mark.parametrize("limit", [3, 256])
def test_read_windows_in_one_product_give_each_edit_its_own_output_change(tiny, monkeypatch, limit):
    """Several edits' read windows go through the head together (grouped up to a limit of positions; a longer
    window alone): each edit's output change is what a run of that edit alone reads, and zero outside its window."""
    import helpers.interp.interventions as interventions

    model, tokenizer = tiny.module, tiny.tokenizer
    ids = _ids(tokenizer)
    T = len(ids)
    baseline = mean_residual(model, [ids])
    edits = [Erase(1, 4), Skip(2, "attn", 1, 6), Erase(3, 9), Skip(0, "layer", 1, None), Erase(2, T - 1)]
    starts = [T - 2, 6, T - 5, 0, T]  # one position, a middle, a few, the whole sequence, none
    monkeypatch.setattr(interventions, "READOUT_POSITIONS", limit)
    together = effects(model, ids, edits, baseline=baseline, batch_size=len(edits), read_from=starts)
    for i, (edit, lo) in enumerate(zip(edits, starts, strict=True)):
        alone = effects(model, ids, [edit], baseline=baseline, read_from=lo)
        np.testing.assert_allclose(together.output[i], alone.output[0], atol=2e-5)
        assert together.output[i, :lo].max(initial=0.0) == 0.0
        assert lo == T or together.output[i, lo:].max() > 0

def test_integrated_gradients_complete(tiny):
    """Completeness: attributions summed over positions approach p(x) − p(baseline) as steps grow."""
    model, tokenizer = tiny.module, tiny.tokenizer
    ids = _ids(tokenizer)
    start = len(ids) - 2
    l = 1
    attr = integrated_gradients(model, ids, start, "layer", steps=64, layers=[l])
    assert attr.shape == (model.config.num_hidden_layers, len(ids)) and attr[0].max() == 0.0
    cap = capture(model, ids)
    x = cap.outputs[l]
    base = x.mean(0, keepdim=True).expand_as(x)

    def answer_prob(h):
        handle = model.model.layers[l].register_forward_hook(lambda m, a, o: (h[None], *o[1:]) if isinstance(o, tuple) else h[None])
        try:
            with torch.no_grad():
                logits = model(input_ids=torch.tensor([ids]), use_cache=False).logits[0].float()
        finally:
            handle.remove()
        probs = torch.softmax(logits[start - 1:-1], -1)
        return float(probs.gather(-1, torch.tensor(ids[start:])[:, None]).sum())

    gap = answer_prob(x) - answer_prob(base)
    assert attr[l].sum() == pytest.approx(gap, abs=0.05 * max(abs(gap), 0.05))


def test_depth_score_and_profiles():
    assert depth_score([0, 0, 1]) == 2.0 and depth_score([1, 1]) == 0.5
    with pytest.raises(ValueError):
        depth_score([0, 0])
    m = np.triu(np.ones((4, 4)), 1)
    assert later_layer_profile(m).tolist() == [1.0, 1.0, 1.0, 0.0]


def test_split_positions_and_bad_edits(tiny):
    assert future_splits(40, n=4, seed=1) == sorted(future_splits(40, n=4, seed=1))
    assert set(future_splits(40, n=10)) == {8, 16, 24, 32}
    with pytest.raises(ValueError, match="too short"):
        future_splits(10)
    model, tokenizer = tiny.module, tiny.tokenizer
    ids = _ids(tokenizer)
    with pytest.raises(ValueError, match="skipped layer"):
        effects(model, ids, [Skip(99)])
    with pytest.raises(ValueError, match="part"):
        effects(model, ids, [Skip(0, "heads")])
    with pytest.raises(ValueError, match="baseline"):
        effects(model, ids, [Erase(0, 1)])
    with pytest.raises(ValueError, match="split"):
        skip_effects(model, ids, splits=[len(ids)])
