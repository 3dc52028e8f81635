"""Truncated models share weights, keep the KV cache consistent and leave the original untouched."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from helpers.interp.lens import logit_lens
from helpers.interp.residual import capture
from helpers.interp.studies import agreement, agreement_over
from helpers.models.truncation import (
    critical_depth,
    critical_is_bound,
    kept_blocks,
    naive_truncate,
    stitch_and_preserve,
    truncate,
)
from helpers.samplers.plain import decode


def _ids(tokenizer):
    return tokenizer("Ada has 3 apples . Then Ada receives 4 more apples . How many apples")["input_ids"]


@pytest.mark.parametrize("method", ["stitch", "naive"])
def test_full_depth_gives_identical_logits(tiny, method):
    model, tokenizer, info = tiny.module, tiny.tokenizer, tiny.info
    x = torch.tensor([_ids(tokenizer)], device=model.device)
    with torch.inference_mode():
        assert torch.equal(truncate(model, info.n_layers, method)(x).logits, model(x).logits)


def test_at_depth_is_the_model_itself_at_full_depth_and_a_truncation_below(tiny):
    x = torch.tensor([_ids(tiny.tokenizer)], device=tiny.module.device)
    L = tiny.n_layers
    assert tiny.at_depth(L) is tiny and tiny.at_depth(L, "naive") is tiny
    with torch.inference_mode():
        for method in ("stitch", "naive"):
            shallow = tiny.at_depth(L - 1, method)
            assert shallow.truncation.kept_blocks == tuple(kept_blocks(L, L - 1, method))
            assert shallow.n_layers == L - 1 and shallow.original_layers == L and shallow.info is tiny.info
            assert torch.equal(shallow.module(x).logits, truncate(tiny.module, L - 1, method)(x).logits)
            with pytest.raises(ValueError, match="already cut"):  # a cut of a cut would lose the original's blocks
                shallow.at_depth(L - 2)
    with pytest.raises(ValueError, match="method must be one of"):
        tiny.at_depth(L, "middle")  # checked at full depth too
    with pytest.raises(ValueError, match="depth for stitch"):
        tiny.at_depth(L + 1)


def test_kept_blocks_and_invalid_depths():
    assert kept_blocks(6, 3, "naive") == [0, 1, 2]
    assert kept_blocks(6, 3, "stitch") == [0, 1, 5]
    assert kept_blocks(6, 6, "stitch") == list(range(6))
    for depth, method in [(0, "naive"), (7, "naive"), (1, "stitch"), (7, "stitch"), (2.5, "naive"), (True, "naive")]:
        with pytest.raises(ValueError, match="integer in"):
            kept_blocks(6, depth, method)
    with pytest.raises(ValueError, match="method"):
        kept_blocks(6, 3, "random")


def test_error_names_the_valid_range(tiny):
    model, info = tiny.module, tiny.info
    with pytest.raises(ValueError, match=rf"2\.\.{info.n_layers}"):
        stitch_and_preserve(model, 1)
    with pytest.raises(ValueError, match=rf"1\.\.{info.n_layers}"):
        naive_truncate(model, info.n_layers + 1)


@pytest.mark.parametrize("method", ["stitch", "naive"])
def test_kv_cache_generation_equals_no_cache(tiny, method):
    model, tokenizer = tiny.module, tiny.tokenizer
    shallow = truncate(model, 2, method)
    x = torch.tensor([_ids(tokenizer)], device=model.device)
    kwargs = dict(max_new_tokens=10, do_sample=False, eos_token_id=None, pad_token_id=tokenizer.pad_token_id)
    with_cache = shallow.generate(x, use_cache=True, **kwargs)
    without = shallow.generate(x, use_cache=False, **kwargs)
    assert torch.equal(with_cache, without)
    (ours,) = decode(shallow, [x[0].tolist()], 10, [])  # the book's own decode loop
    assert ours.tokens == with_cache[0, x.shape[1]:].tolist()


def test_original_is_unchanged_and_weights_are_shared(tiny):
    model, tokenizer, info = tiny.module, tiny.tokenizer, tiny.info
    x = torch.tensor([_ids(tokenizer)], device=model.device)
    with torch.inference_mode():
        before = model(x).logits.clone()
    layer_ids = [b.self_attn.layer_idx for b in model.model.layers]
    shallow = stitch_and_preserve(model, 2)
    with torch.inference_mode():
        shallow(x)
        assert torch.equal(model(x).logits, before)
    assert [b.self_attn.layer_idx for b in model.model.layers] == layer_ids
    assert model.config.num_hidden_layers == info.n_layers and len(model.model.layers) == info.n_layers
    assert [b.self_attn.layer_idx for b in shallow.model.layers] == [0, 1]
    assert shallow.config.num_hidden_layers == 2
    originals = {p.data_ptr() for p in model.parameters()}
    assert all(p.data_ptr() in originals for p in shallow.parameters())
    assert shallow.model.layers[1].mlp.down_proj.weight is model.model.layers[-1].mlp.down_proj.weight
    assert shallow.lm_head.weight is model.lm_head.weight


def test_hooks_on_a_truncated_model_do_not_touch_the_original(tiny):
    model, tokenizer = tiny.module, tiny.tokenizer
    shallow = naive_truncate(model, 2)
    cap = capture(shallow, _ids(tokenizer))  # helpers.interp.residual hooks on the shared blocks
    assert cap.n_layers == 2 and cap.residual_error() < 1e-5
    assert all(not b._forward_hooks and not b._forward_pre_hooks for b in model.model.layers)


def test_naive_truncation_is_the_logit_lens_at_that_tap(tiny):
    model, tokenizer, info = tiny.module, tiny.tokenizer, tiny.info
    ids = _ids(tokenizer)
    lens = logit_lens(model, ids)
    for depth in range(1, info.n_layers):
        out = agreement(model, naive_truncate(model, depth), ids, 1)
        assert out["kl"] == pytest.approx(float(np.mean(lens.kl[depth, :-1])), rel=1e-4, abs=1e-5)


def test_agreement_at_full_depth_is_zero(tiny):
    model, tokenizer, info = tiny.module, tiny.tokenizer, tiny.info
    out = agreement(model, stitch_and_preserve(model, info.n_layers), _ids(tokenizer), 3)
    assert out["kl"] == pytest.approx(0, abs=1e-6) and out["nll"] == pytest.approx(out["nll_full"])


def test_agreement_over_many_truncations_equals_each_pair_and_is_stored(tiny, tmp_path, monkeypatch):
    """One full-model pass per sequence serves every truncation: each truncation's means equal those of `agreement`
    pair by pair, and a second call reads every value back from the store without running a model."""
    ids = _ids(tiny.tokenizer)
    items = [("a", ids, 3), ("b", ids[:-2], 5)]
    shallow = {("stitch", 3): tiny.at_depth(3, "stitch"), ("naive", 2): tiny.at_depth(2, "naive"),
               ("stitch", tiny.n_layers): tiny}
    together = agreement_over(tiny, shallow, items, root=tmp_path)
    for key, truncated in shallow.items():
        pairs = [agreement(tiny.module, truncated.module, i, start) for _, i, start in items]
        for name in ("kl", "nll", "nll_full"):
            assert together[key][name] == pytest.approx(np.mean([p[name] for p in pairs]), rel=1e-5, abs=1e-7)
    assert together[("stitch", tiny.n_layers)]["kl"] == pytest.approx(0, abs=1e-6)
    assert together[("stitch", 3)]["kl"] > 0

    def refuse(*args, **kwargs):
        raise AssertionError("a stored agreement was computed again")

    monkeypatch.setattr(type(tiny.module), "forward", refuse)
    assert agreement_over(tiny, shallow, items, root=tmp_path) == together


def test_critical_depth():
    acc = {20: 0.0, 22: 0.05, 24: 0.3, 26: 0.2, 28: 0.4, 30: 0.4}
    assert critical_depth(acc, 0.4) == 24
    assert critical_depth(acc, 0.4, fraction=0.9) == 28
    assert critical_depth({20: 0.5, 30: 0.4}, 0.4) == 20
    assert critical_depth(acc, 0.0) is None


def test_a_critical_depth_at_the_shallowest_depth_tested_is_only_a_bound():
    """Where the shallowest depth a sweep ran still keeps the share, the depth that fails was never reached: the
    critical depth is that one or shallower, unless the cut can go no lower or nothing below full depth ran."""
    acc = {20: 0.0, 22: 0.05, 24: 0.3, 26: 0.2, 28: 0.4, 30: 0.4}
    assert not critical_is_bound(acc, critical_depth(acc, 0.4))  # 22 was tested and fails: 24 is measured
    held = {22: 0.3, 23: 0.35, 24: 0.4}
    assert critical_depth(held, 0.4) == 22 and critical_is_bound(held, 22)
    assert not critical_is_bound({2: 0.3, 3: 0.4}, 2, "stitch")  # a stitched cut keeps at least two blocks
    assert critical_is_bound({2: 0.3, 3: 0.4}, 2, "naive")
    assert not critical_is_bound({24: 0.4}, 24) and not critical_is_bound(acc, None)
    assert not critical_is_bound({23: 0.0, 24: 0.4}, 24)  # at full depth: nothing below keeps it


@pytest.mark.slow
def test_embedded_model_truncation(smol):
    model, tokenizer, info = smol.module, smol.tokenizer, smol.info
    ids = tokenizer("Lina has 7 coins. Then Lina receives 5 more coins.")["input_ids"]
    x = torch.tensor([ids])
    with torch.inference_mode():
        assert torch.equal(stitch_and_preserve(model, info.n_layers)(x).logits, model(x).logits)
    shallow = stitch_and_preserve(model, 26)
    kwargs = dict(max_new_tokens=8, do_sample=False, eos_token_id=None, pad_token_id=tokenizer.pad_token_id)
    assert torch.equal(shallow.generate(x, use_cache=True, **kwargs), shallow.generate(x, use_cache=False, **kwargs))


def test_the_project_sets_nothing_on_a_model_or_its_config_and_still_knows_what_each_is(tiny_dir):
    """Where a model came from and which blocks a truncation runs are held by the handle the project owns, never
    set on the transformers model or its config; a truncation keeps its parent's origin."""
    from helpers.models.handle import ModelHandle
    from helpers.models.loading import load_model

    model = load_model(str(tiny_dir))
    cut = model.at_depth(model.n_layers - 1, "naive")
    for m in (model, cut):
        assert not [k for k in vars(m.module) if k.startswith("svd")] and "truncation" not in m.config.to_dict()
    assert model.truncation is None and cut.truncation.kept_blocks == tuple(range(model.n_layers - 1))
    full, shallow = model.identity(), cut.identity()
    assert shallow == {**full, "depth": model.n_layers - 1, "truncation": "naive"} and full["truncation"] is None
    assert full["source"].startswith("local:") and full["weights"]  # the origin, inherited by its truncation
    assert model.truncated(model.n_layers, "naive").identity() == full  # every block, under the original's identity
    bare = ModelHandle.wrap(model.module)  # a module the project did not load: named, but with no weights to key
    assert bare.identity()["source"] == "unregistered" and "weights" not in bare.identity()
