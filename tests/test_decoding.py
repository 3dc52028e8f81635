"""The decode loop: batching, shared prefixes and stop tokens must not change what is generated."""

from __future__ import annotations

import pytest
import torch

import helpers.decoding as decoding
from helpers.decoding import decode, decode_in_batches, shared_prefix_length


def _prompts(tokenizer):
    texts = ["Ada has 3 apples .", "Then Ada receives 4 more apples . How many", "0 1 2", "the final answer is"]
    return [tokenizer(t)["input_ids"] for t in texts]


def test_batched_greedy_equals_one_at_a_time(tiny):
    model, tokenizer, _ = tiny
    prompts = _prompts(tokenizer)
    batch, stats = decode(model, prompts, 12, [tokenizer.eos_token_id], tokenizer.pad_token_id)
    for prompt, got in zip(prompts, batch, strict=True):
        (alone,), _ = decode(model, [prompt], 12, [tokenizer.eos_token_id], tokenizer.pad_token_id)
        assert got.tokens == alone.tokens
        assert torch.allclose(torch.tensor(got.logp), torch.tensor(alone.logp), atol=1e-4)
    assert stats.decoded_tokens == sum(len(c.tokens) for c in batch)
    assert stats.prefill_tokens == sum(len(p) for p in prompts)


def test_greedy_matches_transformers_generate(tiny):
    model, tokenizer, _ = tiny
    prompt = _prompts(tokenizer)[1]
    (ours,), _ = decode(model, [prompt], 10, [], tokenizer.pad_token_id)
    ref = model.generate(torch.tensor([prompt]), max_new_tokens=10, do_sample=False, eos_token_id=None,
                         pad_token_id=tokenizer.pad_token_id)
    assert ours.tokens == ref[0, len(prompt):].tolist()


def test_shared_prefix_is_encoded_once_with_the_same_result(tiny, monkeypatch):
    model, tokenizer, _ = tiny
    prefix = tokenizer("Can you solve the following math problem ? Please reason step by step , and put")["input_ids"] * 2
    prompts = [prefix + p for p in _prompts(tokenizer)]
    assert shared_prefix_length(prompts) >= len(prefix)
    fast, fast_stats = decode(model, prompts, 8, [tokenizer.eos_token_id], tokenizer.pad_token_id)
    monkeypatch.setattr(decoding, "MIN_SHARED_PREFIX", 10**9)
    slow, _ = decode(model, prompts, 8, [tokenizer.eos_token_id], tokenizer.pad_token_id)
    assert [c.tokens for c in fast] == [c.tokens for c in slow]
    assert fast_stats.prefill_tokens < sum(len(p) for p in prompts)


def test_rows_stop_at_a_stop_token(tiny):
    model, tokenizer, _ = tiny
    prompts = _prompts(tokenizer)
    (first,), _ = decode(model, [prompts[0]], 6, [], tokenizer.pad_token_id)
    stop = first.tokens[2]  # make the third greedy token a stop token
    (stopped,), _ = decode(model, [prompts[0]], 6, [stop], tokenizer.pad_token_id)
    assert stopped.stopped and stopped.tokens == first.tokens[: first.tokens.index(stop) + 1]


def test_sampling_is_seeded_and_logq_is_a_log_probability(tiny):
    model, tokenizer, _ = tiny
    prompts = _prompts(tokenizer)
    a, _ = decode_in_batches(model, prompts, 8, [], tokenizer.pad_token_id, temperature=0.7, seed=3)
    b, _ = decode_in_batches(model, prompts, 8, [], tokenizer.pad_token_id, temperature=0.7, seed=3)
    c, _ = decode_in_batches(model, prompts, 8, [], tokenizer.pad_token_id, temperature=0.7, seed=4)
    assert [x.tokens for x in a] == [x.tokens for x in b] != [x.tokens for x in c]
    assert all(q <= 0 for x in a for q in x.logq)


@pytest.mark.parametrize("bad", [dict(max_new_tokens=0), dict(prompts=[[]]), dict(prompts=[])])
def test_bad_arguments(tiny, bad):
    model, tokenizer, _ = tiny
    args = dict(prompts=_prompts(tokenizer), max_new_tokens=4) | bad
    with pytest.raises(ValueError):
        decode(model, args["prompts"], args["max_new_tokens"], [], tokenizer.pad_token_id)
