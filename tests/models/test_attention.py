"""The attention registered for every loaded model: its one-query path computes what SDPA computes."""

from __future__ import annotations

import pytest
import torch
from torch.nn import functional as F

from helpers.models import attention
from helpers.samplers.plain import decode


@pytest.mark.parametrize("heads,kv_heads", [(4, 4), (9, 3), (14, 2)])
@pytest.mark.parametrize("mask_kind", ["none", "bool", "float"])
def test_one_query_attention_equals_sdpa(heads, kv_heads, mask_kind):
    torch.manual_seed(0)
    b, width, dim = 5, 37, 16
    query = torch.randn(b, heads, 1, dim)
    key, value = torch.randn(b, kv_heads, width, dim), torch.randn(b, kv_heads, width, dim)
    allowed = torch.rand(b, 1, 1, width) < 0.7
    allowed[..., 0] = True
    mask = {"none": None, "bool": allowed,
            "float": torch.zeros(allowed.shape).masked_fill(~allowed, float("-inf"))}[mask_kind]
    expected = F.scaled_dot_product_attention(query, key, value, attn_mask=mask, scale=0.3,
                                              enable_gqa=heads != kv_heads).transpose(1, 2)
    got, _ = attention.sdpa_gqa_forward(None, query, key, value, mask, scaling=0.3)
    assert got.shape == (b, 1, heads, dim)
    torch.testing.assert_close(got, expected, atol=2e-6, rtol=1e-5)


def test_decoding_with_either_attention_gives_the_same_tokens(tiny, monkeypatch):
    model, tokenizer, _ = tiny
    assert model.config._attn_implementation == attention.NAME
    prompts = [tokenizer(t)["input_ids"] for t in ["Ada has 3 apples .", "Then Ada receives 4 more", "0 1 2"]]
    matmuls = decode(model, prompts, 8, [], temperature=1.0, seeds=[1, 2, 3])
    monkeypatch.setattr(attention, "ONE_QUERY_MATMULS", False)
    fused = decode(model, prompts, 8, [], temperature=1.0, seeds=[1, 2, 3])
    assert [c.tokens for c in matmuls] == [c.tokens for c in fused]
    assert max(abs(x - y) for a, b in zip(matmuls, fused, strict=True) for x, y in zip(a.logp, b.logp, strict=True)) < 1e-5
