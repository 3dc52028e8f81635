"""Named hook points: handlers see the right tensors, replacements take effect, and nothing stays installed."""

from __future__ import annotations

import pytest
import torch

from helpers.models.adapter import adapter
from helpers.models.hooks import hooked, recorder


def _logits(model, ids):
    with torch.inference_mode():
        return model(input_ids=torch.tensor([ids], device=model.device), use_cache=False).logits[0]


def test_points_see_the_residual_identity_and_replacements_take_effect(tiny):
    model, tokenizer = tiny.module, tiny.tokenizer
    ad = adapter(model)
    ids = tokenizer("Ada has 3 apples .")["input_ids"]
    seen: dict = {}
    points = ("block_input", "attn_output", "mlp_output", "block_output")
    with hooked(ad, {(p, 1): recorder(seen, p) for p in points}):
        clean = _logits(model, ids)
    h, a, m, out = (seen[p] for p in points)
    assert torch.allclose(h + a + m, out, atol=1e-5)
    # Zeroing the last block's write leaves the final norm reading that block's input.
    last = ad.n_layers - 1
    final: dict = {}
    with hooked(ad, {("block_input", last): recorder(final, "h"), ("block_output", last): lambda x, kw: final["h"],
                     ("final_input", 0): recorder(final, "final")}):
        edited = _logits(model, ids)
    assert torch.equal(final["final"], final["h"]) and not torch.allclose(edited, clean)
    assert torch.equal(_logits(model, ids), clean)  # nothing stays installed


def test_hooks_are_removed_when_the_block_raises_and_bad_points_are_named(tiny):
    model, tokenizer = tiny.module, tiny.tokenizer
    ad = adapter(model)
    ids = tokenizer("0 1 2")["input_ids"]
    clean = _logits(model, ids)

    def boom(h, kw):
        raise KeyError("inside")

    with pytest.raises(KeyError), hooked(ad, {("mlp_output", 0): boom}):
        _logits(model, ids)
    assert torch.equal(_logits(model, ids), clean)
    with pytest.raises(ValueError, match="unknown hook point"), hooked(ad, {("residual", 0): boom}):
        pass
    with pytest.raises(ValueError, match="outside"), hooked(ad, {("block_input", 99): boom}):
        pass
