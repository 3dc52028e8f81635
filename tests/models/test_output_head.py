"""The sliced output head: bit-for-bit the logits of one product, swapped in only where it applies."""

from __future__ import annotations

import pytest
import torch
from torch import nn
from torch.nn import functional as F

from helpers.models.output_head import MIN_VOCABULARY, SLICE, SlicedHead, use_sliced_head


def _head(vocab: int, width: int = 64, bias: bool = False) -> nn.Linear:
    torch.manual_seed(0)
    head = nn.Linear(width, vocab, bias=bias)
    nn.init.normal_(head.weight, std=0.5)
    return head


@pytest.mark.parametrize("rows", [1, 2, 3, 7, 22, 32, 64, 100, 129])
def test_sliced_logits_equal_one_product_bit_for_bit(rows):
    head = _head(MIN_VOCABULARY + SLICE // 2 + 3)  # a last slice shorter than the others
    sliced = SlicedHead.sharing(_head(head.out_features))
    x = torch.randn(rows, 1, head.in_features)
    with torch.inference_mode():
        expected = F.linear(x, head.weight)
        assert torch.equal(sliced(x), expected)
        assert torch.equal(sliced(x.transpose(0, 1)), expected.transpose(0, 1))  # [1, rows, width] too


def _model(vocab: int, tied: bool = False):
    from transformers import LlamaConfig, LlamaForCausalLM

    config = LlamaConfig(vocab_size=vocab, hidden_size=32, intermediate_size=64, num_hidden_layers=1,
                         num_attention_heads=4, num_key_value_heads=2, tie_word_embeddings=tied)
    return LlamaForCausalLM(config).eval()


def test_the_swapped_head_shares_the_weight_and_keeps_a_tied_embedding_tied():
    model = _model(MIN_VOCABULARY + 5, tied=True)
    weight = model.get_output_embeddings().weight
    assert weight is model.get_input_embeddings().weight
    use_sliced_head(model)
    head = model.get_output_embeddings()
    assert type(head) is SlicedHead and head.weight is weight and head.weight is model.get_input_embeddings().weight


def test_only_large_bias_free_float32_heads_are_swapped(tiny):
    small = tiny.module
    assert type(small.get_output_embeddings()) is nn.Linear  # a 40-token vocabulary gains nothing
    large = _model(MIN_VOCABULARY + 5)
    keys = set(large.state_dict())
    use_sliced_head(large)
    assert type(large.get_output_embeddings()) is SlicedHead and set(large.state_dict()) == keys
    half = _model(MIN_VOCABULARY + 5).to(torch.bfloat16)
    use_sliced_head(half)
    assert type(half.get_output_embeddings()) is nn.Linear


def test_the_swapped_head_keeps_hooks_and_gradients():
    model = _model(MIN_VOCABULARY + 5)
    use_sliced_head(model)
    seen = []
    model.get_output_embeddings().register_forward_hook(lambda module, args, out: seen.append(out.shape))
    ids = torch.tensor([[1, 2, 3], [4, 5, 6]])
    out = model(input_ids=ids).logits  # gradients on: the plain product, which autograd can follow
    out[:, -1].sum().backward()
    assert model.get_output_embeddings().weight.grad is not None and seen == [out.shape]
    with torch.inference_mode():
        again = model(input_ids=ids, logits_to_keep=1).logits  # two rows of one position: the sliced product
    assert torch.allclose(again[:, -1], out[:, -1], atol=1e-5)


def test_the_embedded_model_decodes_the_same_tokens_and_log_probabilities(smol):
    from helpers.samplers.plain import decode

    model, tokenizer = smol.module, smol.tokenizer
    head = model.get_output_embeddings()
    assert type(head) is SlicedHead
    prompts = [tokenizer(t)["input_ids"] for t in ["Ada has 3 apples.", "Then Ada gets 4 more.", "2 + 2 ="]]
    sliced = decode(model, prompts, 6, [], temperature=1.0, seeds=[1, 2, 3])
    plain_head = nn.Linear(head.in_features, head.out_features, bias=False, device="meta")
    plain_head.weight = head.weight
    model.set_output_embeddings(plain_head)
    try:
        plain = decode(model, prompts, 6, [], temperature=1.0, seeds=[1, 2, 3])
    finally:
        model.set_output_embeddings(head)
    assert [c.tokens for c in sliced] == [c.tokens for c in plain]
    assert [c.logp for c in sliced] == [c.logp for c in plain]  # exactly, not approximately
