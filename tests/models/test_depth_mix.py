"""Several truncations in one batch (`helpers.models.depth_mix`): each row computes what its truncated model
computes alone, in a forward pass and through both engines, and the original model is left untouched."""

from __future__ import annotations

import pytest
import torch

from helpers.engines.protocol import shared_prefix
from helpers.engines.reencode import ReencodeEngine
from helpers.engines.slot import SlotEngine
from helpers.models.depth_mix import DepthMix
from helpers.models.truncation import truncate
from helpers.samplers.plain import decode_work
from helpers.samplers.power import PowerConfig, chain_work
from helpers.samplers.target import Target
from helpers.samplers.work import run_together


def _variants(n_layers: int) -> list[tuple[str, int]]:
    return [("stitch", d) for d in range(2, n_layers + 1)] + [("naive", d) for d in range(1, n_layers)]


def _alone(model, method: str, depth: int):
    return model if depth == model.config.num_hidden_layers else truncate(model, depth, method)


@torch.inference_mode()
def test_each_row_of_a_mixed_pass_gets_its_truncation_s_logits(tiny):
    model, tokenizer = tiny.module, tiny.tokenizer
    variants = _variants(model.config.num_hidden_layers)
    mix = DepthMix(model, variants)
    ids = torch.tensor([tokenizer("Ada has 3 apples and 4 pears")["input_ids"]] * len(variants), device=model.device)
    routed = list(range(len(variants)))[::-1]  # rows in another order than the variants
    mix.route(routed)
    mixed = mix.model(input_ids=ids[:, :-1], use_cache=False).logits
    for b, v in enumerate(routed):
        alone = _alone(model, *variants[v])(input_ids=ids[b:b + 1, :-1], use_cache=False).logits[0]
        torch.testing.assert_close(mixed[b], alone, atol=1e-5, rtol=1e-4, msg=f"row {b}, variant {variants[v]}")
    # the original model has no hooks of the mix: its logits are the full model's, with and without the mix alive
    full = model(input_ids=ids[:1, :-1], use_cache=False).logits
    mix.close()
    torch.testing.assert_close(model(input_ids=ids[:1, :-1], use_cache=False).logits, full)


@pytest.mark.parametrize("engine", [SlotEngine, ReencodeEngine])
def test_a_mixed_run_decodes_what_each_truncation_decodes_alone(tiny, engine):
    model, tokenizer = tiny.module, tiny.tokenizer
    variants = _variants(model.config.num_hidden_layers)
    shots = "Ada has 3 apples and 4 pears . How many apples ? 3 . 0 1 2 3 4 5 6 7 . "  # a few-shot prefix
    prompts = [tokenizer(shots + t)["input_ids"] for t in ("Ada has 3 apples and 4 pears .", "0 1 2 3", "How many")]
    assert shared_prefix(prompts)  # encoded once per variant: the last block's keys differ between them
    stops = {tokenizer.eos_token_id}
    target, power = Target(2.0, 6), PowerConfig(block_size=3, mcmc_steps=1)

    def works():  # per variant: greedy, T = 1 and an MH chain on every prompt
        return [decode_work(prompts, 6, stops), decode_work(prompts, 6, stops, 1.0, 0, [3, 4, 5]),
                chain_work(prompts, stops, target, power, [6, 7, 8])]

    mixed_works = []
    for v in range(len(variants)):
        for work in works():
            for row, _ in work.tasks:
                row.variant = v
            mixed_works.append(work)
    mix = DepthMix(model, variants)
    together = run_together(engine(mix), mixed_works, stops, batch_size=13)
    for v, variant in enumerate(variants):
        alone = run_together(engine(_alone(model, *variant)), works(), stops, batch_size=13)
        for got, want in zip(together[3 * v:3 * v + 3], alone, strict=True):
            assert [c.tokens for c in got] == [c.tokens for c in want], f"variant {variant}"
            for a, b in zip(got, want, strict=True):
                assert max((abs(x - y) for x, y in zip(a.logp, b.logp, strict=True)), default=0) < 1e-4


@pytest.mark.parametrize("engine", [SlotEngine, ReencodeEngine])
def test_a_mixed_run_splits_a_pass_s_time_by_what_each_variant_costs(tiny, engine):
    model, tokenizer = tiny.module, tiny.tokenizer
    L = model.config.num_hidden_layers
    mix = DepthMix(model, [("naive", 2), ("stitch", L), ("stitch", 2)])
    assert mix.costs[1] == pytest.approx(1.0)
    assert mix.costs[0] == pytest.approx(mix.costs[2]) and mix.costs[0] < 1.0  # two blocks and the head, both
    prompts = [tokenizer("0 1 2 3")["input_ids"]] * 2
    works = [decode_work(prompts, 5, set()) for _ in range(2)]  # no stop token: every row in every pass
    for row, _ in works[0].tasks:
        row.variant = 0
    for row, _ in works[1].tasks:
        row.variant = 1
    shallow, deep = run_together(engine(mix), works, set())
    shared = 6 if engine is SlotEngine else 5  # (the prompts' pass and) five steps, all shared
    assert {c.forward_passes for c in shallow + deep} == {shared}
    seconds = [sum(c.seconds for c in cs) for cs in (shallow, deep)]
    assert seconds[0] / seconds[1] == pytest.approx(mix.costs[0] / mix.costs[1])


def test_variants_are_refused_where_the_model_is_not_a_mix(tiny):
    model, tokenizer = tiny.module, tiny.tokenizer
    work = decode_work([tokenizer("0 1 2")["input_ids"]], 3, {tokenizer.eos_token_id})
    work.tasks[0][0].variant = 1
    for engine in (SlotEngine, ReencodeEngine):
        with pytest.raises(ValueError, match="depth mix"):
            run_together(engine(model), [work], {tokenizer.eos_token_id})
    with pytest.raises(ValueError, match="naive truncation must be an integer"):
        DepthMix(model, [("naive", 0)])
    mix = DepthMix(model, [("naive", 1)])
    with pytest.raises(ValueError, match=r"variants 0\.\.0"):
        mix.route([1])


def test_vllm_is_not_handed_a_mix(tiny):
    from helpers.engines.vllm import VLLMEngine

    model = tiny.module
    with pytest.raises(ValueError, match="one model per engine"):
        VLLMEngine.for_model(DepthMix(model, [("stitch", 2)]))
