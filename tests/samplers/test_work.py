"""Samplers sharing one engine run (`helpers.samplers.work`): every row decodes as it would in a run of its own,
each at its own temperature and top-k, and the run takes fewer forward passes than one run per sampler."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch

from helpers.engines.categorical import draw, draw_each
from helpers.engines.loop import run_programs
from helpers.engines.protocol import Adopt, Barrier, Completion, Extension, Group, Row
from helpers.engines.reencode import ReencodeEngine
from helpers.engines.slot import SlotEngine
from helpers.samplers.plain import decode_work
from helpers.samplers.power import PowerConfig, chain_work
from helpers.samplers.smc import SMCConfig, smc_work
from helpers.samplers.target import Target
from helpers.samplers.work import capacity, run_together

TARGET = Target(2.0, 8)
POWER = PowerConfig(block_size=4, mcmc_steps=2)
REFERENCE = PowerConfig(block_size=4, mcmc_steps=1, mode="reference", top_k=5)
SMC = SMCConfig(particles=2, block_size=4, ess_threshold=0.9)  # 2: a group straddles a batch
SEEDS = [5, 6, 7]


def _works(tokenizer):
    prompts = [tokenizer(t)["input_ids"] for t in ("Ada has 3 apples .", "0 1 2", "How many apples")]
    stops = {tokenizer.eos_token_id}
    return [chain_work(prompts, stops, TARGET, POWER, SEEDS), smc_work(prompts, stops, TARGET, SMC, SEEDS),
            chain_work(prompts, stops, TARGET, REFERENCE, SEEDS), decode_work(prompts, 8, stops, 0.5, 0, SEEDS),
            decode_work(prompts, 8, stops, 1.0, 3, SEEDS), decode_work(prompts, 8, stops)], stops


@pytest.mark.parametrize("engine", [SlotEngine, ReencodeEngine])
def test_samplers_sharing_a_run_decode_as_in_runs_of_their_own(tiny, engine):
    model, tokenizer = tiny.module, tiny.tokenizer
    works, stops = _works(tokenizer)
    heard = []
    shared = engine(model)
    together = run_together(shared, works, stops, batch_size=7, on_done=lambda w, i, c: heard.append((w, i)))
    assert sorted(heard) == [(w, i) for w in range(len(works)) for i in range(3)]  # every job heard of, once
    passes = 0
    for w, got in enumerate(together):
        alone_engine = engine(model)
        (alone,) = run_together(alone_engine, [_works(tokenizer)[0][w]], stops, batch_size=7)
        passes += alone_engine.passes
        assert [c.tokens for c in got] == [c.tokens for c in alone], f"work {w}"
        for a, b in zip(got, alone, strict=True):
            assert max((abs(x - y) for x, y in zip(a.logq, b.logq, strict=True)), default=0) < 1e-4
    greedy, low = together[-1], together[3]
    assert all(q == 0 for c in greedy for q in c.logq)  # greedy rows drew nothing, beside sampled ones
    assert any(abs(q - p) > 1e-3 for c in low for p, q in zip(c.logp, c.logq, strict=True))  # T = 0.5 is not T = 1
    if engine is SlotEngine:  # the point of sharing: the batch stays full, so fewer passes decode everything
        assert shared.passes < passes


def test_draw_each_gives_each_row_what_its_own_law_gives_it():
    logits = torch.randn(5, 3000, generator=torch.Generator().manual_seed(0))
    laws = [(0.0, 0), (0.5, 0), (1.0, 7), (0.5, 0), (1.0, 0)]
    seeds = [1, 2, 3, 4, 5]
    got = draw_each(logits, laws, [torch.Generator().manual_seed(s) for s in seeds])
    for b, ((t, k), s) in enumerate(zip(laws, seeds, strict=True)):
        alone = draw(logits[b:b + 1], t, k, [torch.Generator().manual_seed(s)])
        assert [x[b] for x in got] == pytest.approx([x[0] for x in alone], abs=1e-9)
    with pytest.raises(ValueError, match="one \\(temperature, top_k\\) per row"):
        draw_each(logits, laws[:2], [None] * 5)


def test_capacity_holds_whole_groups():
    tiny_groups = [SimpleNamespace(group=g) for g in (1, 3)]
    assert capacity(None, tiny_groups) is None
    assert capacity(7, tiny_groups) == 6  # whole groups of the largest
    assert capacity(2, tiny_groups) == 3  # never below one group: its rows must all be able to run
    with pytest.raises(ValueError, match="batch_size"):
        capacity(0, tiny_groups)


def test_a_run_of_no_work_is_empty(tiny):
    assert run_together(SlotEngine(tiny.module), [], set()) == []


class _Meet(Group):
    size = 2

    def release(self):
        return []


def _meets_late(row, group, first):
    """Decode `first` tokens, wait for the group, then decode 4 more."""
    yield Adopt((yield Extension(row, 0, first)))
    yield Barrier(group)
    yield Adopt((yield Extension(row, len(row.tokens), 4)))
    return Completion(row.tokens, row.logp, row.logq, False)


def test_a_row_waiting_at_a_barrier_keeps_its_cache_while_others_decode(tiny):
    """A row that reaches its barrier early rides along in the other rows' passes for many steps (a part-admitted
    SMC group in a shared run); those passes must not write over its keys and values."""
    model, tokenizer = tiny.module, tiny.tokenizer
    prompts = [tokenizer(t)["input_ids"] for t in ("Ada has 3 apples .", "0 1 2 3 + 4")]

    def tasks():
        group = _Meet()
        rows = [Row(list(p)) for p in prompts]
        return [(r, _meets_late(r, group, first)) for r, first in zip(rows, (1, 12), strict=True)]

    cached, reencoded = run_programs(SlotEngine(model), tasks(), set()), run_programs(ReencodeEngine(model), tasks(), set())
    assert [c.tokens for c in cached] == [c.tokens for c in reencoded]
