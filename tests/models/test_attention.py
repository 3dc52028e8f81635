"""The attention registered for every loaded model: its one-query path computes what SDPA computes."""

from __future__ import annotations

import pytest
import torch
from torch.nn import functional as F

from helpers.models import attention
from helpers.results.kinds import DECODE
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
    model, tokenizer = tiny.module, tiny.tokenizer
    assert model.config._attn_implementation == attention.NAME
    prompts = [tokenizer(t)["input_ids"] for t in ["Ada has 3 apples .", "Then Ada receives 4 more", "0 1 2"]]
    matmuls = decode(model, prompts, 8, [], temperature=1.0, seeds=[1, 2, 3])
    monkeypatch.setattr(attention, "ONE_QUERY_MATMULS", False)
    fused = decode(model, prompts, 8, [], temperature=1.0, seeds=[1, 2, 3])
    assert [c.tokens for c in matmuls] == [c.tokens for c in fused]
    assert max(abs(x - y) for a, b in zip(matmuls, fused, strict=True) for x, y in zip(a.logp, b.logp, strict=True)) < 1e-5


def test_one_query_attention_in_bfloat16_keeps_its_scores_in_float32():
    """The bfloat16 path is as close to exact attention (in float64, on the same bfloat16 inputs) as PyTorch's fused
    kernel, within a bfloat16 step of its output; rounding the scores to bfloat16 (a plain bfloat16 product) would
    be several steps off."""
    torch.manual_seed(0)
    b, heads, kv_heads, width, dim = 16, 14, 2, 300, 64
    query = (2 * torch.randn(b, heads, 1, dim)).bfloat16()
    key, value = (2 * torch.randn(b, kv_heads, width, dim)).bfloat16(), torch.randn(b, kv_heads, width, dim).bfloat16()
    allowed = torch.rand(b, 1, 1, width) < 0.9
    exact = F.scaled_dot_product_attention(query.double(), key.double(), value.double(), attn_mask=allowed,
                                           enable_gqa=True).transpose(1, 2)
    fused = F.scaled_dot_product_attention(query, key, value, attn_mask=allowed, enable_gqa=True).transpose(1, 2)
    got, _ = attention.sdpa_gqa_forward(None, query, key, value, allowed)
    assert got.dtype == torch.bfloat16 and got.shape == (b, 1, heads, dim)
    step = 2 ** -7  # bfloat16's spacing at outputs between 1 and 2
    err, fused_err = (got.double() - exact).abs().max().item(), (fused.double() - exact).abs().max().item()
    assert err <= max(2 * fused_err, step), (err, fused_err)
    scores = torch.softmax((query.reshape(b * kv_heads, 7, dim) @ key.reshape(b * kv_heads, width, dim).transpose(1, 2)
                            / 8).masked_fill(~allowed.expand(b, heads, 1, width).reshape(b * kv_heads, 7, width),
                                             float("-inf")), dim=-1)  # scores rounded to bfloat16 by the product
    rounded = (scores @ value.reshape(b * kv_heads, width, dim)).view(b, 1, heads, dim)
    assert (rounded.double() - exact).abs().max().item() > 2 * err


def test_a_bfloat16_decodes_key_carries_the_attention_revision_and_a_float32_ones_is_unchanged():
    from helpers.samplers.settings import engine_key

    assert engine_key("slot", False) == {} and engine_key("slot", True, "float32") == engine_key("slot", True)
    assert engine_key("slot", False, "bfloat16") == {"attention": DECODE.revision("attention")["bfloat16"]}
    assert engine_key("vllm", True, "bfloat16") == {"engine": "vllm"}
    # the revised path runs on CPUs only: a GPU's bfloat16 decodes keep the key they always had
    assert engine_key("slot", True, "bfloat16", "cuda:0") == engine_key("slot", True) == {"draw": "inverse-cdf"}
    assert engine_key("slot", False, "bfloat16", "cpu") == engine_key("slot", False, "bfloat16")


def test_a_bfloat16_model_keeps_its_keys_in_float32_and_decodes_as_it_would_from_bfloat16_keys(tiny_dir, monkeypatch):
    """The slot engine keeps a bfloat16 CPU model's keys in float32, converted once when written: the same bfloat16
    values its one-query path would convert at every step, so the tokens and log-probabilities are the same to the
    last bit, whether a pass has one query (decoding) or many (the prompt and multi-token extensions)."""
    from helpers.engines import slot
    from helpers.models.loading import load_model

    loaded = load_model(str(tiny_dir), device="cpu", dtype="bfloat16")
    model, tokenizer = loaded.module, loaded.tokenizer
    assert attention.key_format(model) == torch.float32
    prompts = [tokenizer(t)["input_ids"] for t in ["Ada has 3 apples .", "Then Ada receives 4 more", "0 1 2"]]
    made = []

    class Recorded(slot.SlotCache):
        def __init__(self, *args):
            super().__init__(*args)
            made.append((self.keys.dtype, self.values.dtype))

    monkeypatch.setattr(slot, "SlotCache", Recorded)
    kept = decode(model, prompts, 24, [], temperature=1.0, seeds=[1, 2, 3])
    monkeypatch.setattr("helpers.engines.kv_slots.key_format", lambda m: next(m.parameters()).dtype)
    converted = decode(model, prompts, 24, [], temperature=1.0, seeds=[1, 2, 3])
    assert made == [(torch.float32, torch.bfloat16), (torch.bfloat16, torch.bfloat16)]
    assert [c.tokens for c in kept] == [c.tokens for c in converted]
    assert [c.logp for c in kept] == [c.logp for c in converted]
    monkeypatch.undo()
    cache = slot.SlotCache(model, 2, 4)
    cache.grow(10)  # a buffer that grows keeps each store's format
    assert (cache.keys.dtype, cache.values.dtype, cache.length) == (torch.float32, torch.bfloat16, 10)
    float32_model = load_model(str(tiny_dir), device="cpu", dtype="float32").module
    assert attention.key_format(float32_model) == torch.float32



@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device (SVD_TEST_DEVICE=cuda)")
def test_on_cuda_the_attention_never_runs_cudnns_kernel():
    """cuDNN's attention prepares a plan for each new key length, which every decoding step is: on a GPU the
    attention takes the other backends, on the engine's shapes (bfloat16, grouped queries, a boolean padding mask),
    with the outputs of the math backend, even where cuDNN is enabled around it."""
    from torch.nn.attention import SDPBackend, sdpa_kernel
    from torch.profiler import ProfilerActivity, profile

    torch.manual_seed(0)
    b, heads, kv_heads, width, dim = 3, 12, 2, 40, 128
    keys, values = (torch.randn(b, kv_heads, width, dim, device="cuda", dtype=torch.bfloat16) for _ in range(2))
    allowed = torch.ones(b, 1, 1, width, dtype=torch.bool, device="cuda")
    allowed[1, ..., :7] = False  # a left-padded row
    query = torch.randn(b, heads, 1, dim, device="cuda", dtype=torch.bfloat16)
    every = [SDPBackend.CUDNN_ATTENTION, SDPBackend.FLASH_ATTENTION, SDPBackend.EFFICIENT_ATTENTION, SDPBackend.MATH]
    with sdpa_kernel(every), profile(activities=[ProfilerActivity.CPU]) as prof:
        out, _ = attention.sdpa_gqa_forward(None, query, keys, values, allowed, scaling=dim ** -0.5)
    assert not [e.key for e in prof.key_averages() if "cudnn" in e.key.lower()]
    with sdpa_kernel(SDPBackend.MATH):
        expected = F.scaled_dot_product_attention(query, keys, values, attn_mask=allowed, scale=dim ** -0.5,
                                                  enable_gqa=True).transpose(1, 2)
    torch.testing.assert_close(out, expected, atol=2e-2, rtol=2e-2)
