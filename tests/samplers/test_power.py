"""Power sampling: the exact mode converges to p^α; caching changes nothing but the cost; bad input fails."""

from __future__ import annotations

import pytest

from helpers.core.checks import SettingError
from helpers.engines.reencode import ReencodeEngine
from helpers.engines.slot import SlotEngine
from helpers.samplers.power import PowerConfig, power_sample, run_chains
from helpers.samplers.target import Target
from helpers.samplers.toy import EOS, ToyLM, empirical, exact_distributions, tv_distance

ALPHA, T = 4.0, 4


@pytest.fixture(scope="module")
def toy():
    model = ToyLM(vocab=3, seed=0)
    return model, exact_distributions(model, [1], T, ALPHA)


def _tv(model, law, mode, steps, n=2000):
    """TV(empirical, law) of `n` chains, seeds 0..n-1, run together on the re-encoding engine (a chain's samples
    are what it draws alone: each row draws from its own generator)."""
    cfg = PowerConfig(block_size=2, mcmc_steps=steps, mode=mode)
    chains = run_chains(ReencodeEngine(model), [[1]] * n, [EOS], Target(ALPHA, T), cfg, list(range(n)))
    return tv_distance(empirical(c.tokens for c in chains), law)


@pytest.mark.toy
def test_exact_mode_converges_to_the_power_distribution(toy):
    model, dist = toy
    low_temperature_gap = tv_distance(dist["low_temperature"], dist["power"])
    assert low_temperature_gap > 0.2  # p^α is not low-temperature sampling
    no_steps = _tv(model, dist["power"], "exact", 0)  # = sampling from the proposal, block by block
    converged = _tv(model, dist["power"], "exact", 10)
    assert converged < 0.05 < no_steps
    assert no_steps > 4 * converged


@pytest.mark.toy
def test_reference_mode_is_biased(toy):
    model, dist = toy
    assert _tv(model, dist["power"], "reference", 10) > 0.1


@pytest.mark.toy
def test_the_re_encoding_engine_gives_each_chain_what_it_draws_alone():
    """Chains run all at once, refilled through three rows, or one at a time on the re-encoding engine draw the same
    tokens at the same per-chain cost; together, rows of one length share a forward pass, so the model runs fewer."""
    model = ToyLM(vocab=4, seed=3, sharpness=1.0)
    cfg, target, n = PowerConfig(block_size=2, mcmc_steps=3), Target(2.0, 6), 12
    runs = {}
    for capacity in (None, 3, 1):
        engine = ReencodeEngine(model)
        chains = run_chains(engine, [[1]] * n, [EOS], target, cfg, list(range(n)), batch_size=capacity)
        runs[capacity] = chains, engine.passes
    alone, one_at_a_time = runs[1]
    assert len({tuple(c.tokens) for c in alone}) > 3  # the chains differ: sharing a pass could have mixed them up
    assert one_at_a_time == sum(c.forward_passes for c in alone)  # alone: one model pass per row and token
    for chains, _ in (runs[None], runs[3]):
        for a, b in zip(chains, alone, strict=True):
            assert (a.tokens, a.moves, a.decoded_tokens, a.prefill_tokens, a.forward_passes) == \
                (b.tokens, b.moves, b.decoded_tokens, b.prefill_tokens, b.forward_passes)
            assert max(abs(x - y) for x, y in zip(a.logp + a.logq, b.logp + b.logq, strict=True)) < 1e-6
    assert runs[None][1] < runs[3][1] < one_at_a_time


@pytest.mark.toy
def test_the_re_encoding_engine_encodes_the_whole_sequence_for_every_token(monkeypatch):
    """Each token's pass encodes prompt and prefix (prefill 1 + 2 + 3 + 4 for four tokens after a two-token prompt),
    its recorded log p is the model's, and rows of one length beyond `pass_tokens` split into passes of at most
    that many tokens without changing a sample."""
    from helpers.samplers.plain import decode
    from helpers.samplers.toy import sequence_logprob

    model = ToyLM(vocab=4, seed=3, sharpness=1.0)
    engine = ReencodeEngine(model)
    (row,) = decode(model, [[1, 2]], 4, [], temperature=1.0, seeds=[0], engine=engine)
    assert (len(row.tokens), row.prefill_tokens, row.forward_passes) == (4, 1 + 2 + 3 + 4, 4)
    assert engine.prefill == 10 and engine.passes == 4
    assert abs(row.sum_logp - sequence_logprob(model, [1, 2], row.tokens)) < 1e-5
    prompts, seeds = [[1, 2]] * 6, list(range(6))
    together = decode(model, prompts, 4, [], temperature=1.0, seeds=seeds, engine=(shared := ReencodeEngine(model)))
    monkeypatch.setattr(ReencodeEngine, "pass_tokens", 7)  # three rows of 2 tokens a pass, two of 3, one of 4 or 5
    split = decode(model, prompts, 4, [], temperature=1.0, seeds=seeds, engine=(small := ReencodeEngine(model)))
    assert [c.tokens for c in split] == [c.tokens for c in together]
    assert (shared.passes, small.passes) == (4, 2 + 3 + 6 + 6)


def test_cache_reuse_gives_the_same_chain(tiny):
    model, tokenizer = tiny.module, tiny.tokenizer
    prompt = tokenizer("Ada has 3 apples .")["input_ids"]
    for mode in ("exact", "reference"):
        cfg, target = PowerConfig(block_size=4, mcmc_steps=3, mode=mode), Target(2.0, 12)
        cached = power_sample(model, prompt, [tokenizer.eos_token_id], target, cfg, seed=1, cache=True)
        again = power_sample(model, prompt, [tokenizer.eos_token_id], target, cfg, seed=1, cache=False)
        assert cached.tokens == again.tokens and cached.moves == again.moves
        assert max(abs(a - b) for a, b in zip(cached.logp + cached.logq, again.logp + again.logq, strict=True)) < 1e-4
        assert cached.decoded_tokens == again.decoded_tokens
        assert cached.prefill_tokens < again.prefill_tokens


@pytest.mark.parametrize("mode", ["exact", "reference"])
def test_lockstep_batch_equals_one_chain_at_a_time(tiny, mode):
    model, tokenizer = tiny.module, tiny.tokenizer
    prompts = [tokenizer(t)["input_ids"] for t in ["Ada has 3 apples .", "Then Ada receives 4 more", "0 1 2"]]
    cfg, target = PowerConfig(block_size=4, mcmc_steps=3, mode=mode), Target(2.0, 12)
    stops = [tokenizer.eos_token_id]
    batched = run_chains(SlotEngine(model), prompts, stops, target, cfg, [1, 2, 3])
    reencoded = run_chains(ReencodeEngine(model), prompts, stops, target, cfg, [1, 2, 3])
    alone = [power_sample(model, p, stops, target, cfg, seed=s) for p, s in zip(prompts, [1, 2, 3], strict=True)]
    for a, b, c in zip(batched, reencoded, alone, strict=True):
        assert a.tokens == b.tokens == c.tokens and a.moves == b.moves
        assert max(abs(x - y) for x, y in zip(a.logp, b.logp, strict=True)) < 1e-4


def test_accounting(tiny):
    model, tokenizer = tiny.module, tiny.tokenizer
    cfg, target = PowerConfig(block_size=3, mcmc_steps=2), Target(2.0, 9)
    out = power_sample(model, tokenizer("Ada has")["input_ids"], [], target, cfg, seed=0)
    assert len(out.tokens) == 9 and len(out.acceptance) == 3 and len(out.moves) == 6
    assert out.decoded_tokens >= 9 and out.forward_passes >= out.decoded_tokens and out.seconds > 0


@pytest.mark.parametrize("bad", [dict(alpha=0), dict(alpha=-1.0), dict(block_size=0), dict(mcmc_steps=-1),
                                 dict(max_new_tokens=4, block_size=8), dict(mode="fast"), dict(top_k=-2)])
def test_bad_parameters_raise_clear_errors(tiny, bad):
    model = tiny.module
    given = {"alpha": 2.0, "block_size": 4, "mcmc_steps": 1, "max_new_tokens": 8, **bad}
    with pytest.raises(ValueError, match=next(iter(bad))):
        target = Target(given.pop("alpha"), given.pop("max_new_tokens"))
        power_sample(model, [1, 2], [], target, PowerConfig(**given))


def test_empty_prompt_is_rejected(tiny):
    with pytest.raises(ValueError, match="prompt is empty"):
        power_sample(tiny.module, [], [], Target(2.0, 4), PowerConfig(block_size=2))


@pytest.mark.parametrize("mode", ["exact", "reference"])
def test_refilled_slots_give_the_same_samples_as_chains_run_alone(tiny, mode):
    """Five chains through two slots: each finished chain's slot goes to the next one, and no sample changes."""
    model, tokenizer = tiny.module, tiny.tokenizer
    texts = ["Ada has 3 apples .", "Then Ada receives 4 more", "0 1 2", "the final answer is", "How many apples"]
    prompts = [tokenizer(t)["input_ids"] for t in texts]
    cfg, target = PowerConfig(block_size=4, mcmc_steps=3, mode=mode), Target(2.0, 12)
    stops = [tokenizer.eos_token_id]
    seeds = [5, 6, 7, 8, 9]
    done = []
    refilled = run_chains(SlotEngine(model), prompts, stops, target, cfg, seeds, batch_size=2,
                          on_done=lambda i, c: done.append(i))
    alone = [power_sample(model, p, stops, target, cfg, seed=s) for p, s in zip(prompts, seeds, strict=True)]
    for a, b in zip(refilled, alone, strict=True):
        assert a.tokens == b.tokens and a.moves == b.moves and a.decoded_tokens == b.decoded_tokens
        assert max(abs(x - y) for x, y in zip(a.logp, b.logp, strict=True)) < 1e-4
    assert sorted(done) == list(range(5))  # every chain reported as it ended


def test_rows_moved_down_into_freed_slots_keep_their_samples(tiny, monkeypatch):
    """Five chains in five slots: as chains end, the highest rows move down into the freed slots."""
    from helpers.engines.slot import SlotCache

    model, tokenizer = tiny.module, tiny.tokenizer
    texts = ["Ada has 3 apples .", "Then Ada receives 4 more", "0 1 2", "the final answer is", "How many apples"]
    prompts = [tokenizer(t)["input_ids"] for t in texts]
    cfg, target = PowerConfig(block_size=3, mcmc_steps=2), Target(2.0, 10)
    stops = [tokenizer.eos_token_id]
    seeds = [11, 12, 13, 14, 15]
    moves = []
    trade = SlotCache.trade
    monkeypatch.setattr(SlotCache, "trade", lambda self, a, b, n_a, n_b: (moves.append((a, b, n_a, n_b)),
                                                                         trade(self, a, b, n_a, n_b)))
    monkeypatch.setattr(SlotEngine, "pack", False)  # only compaction moves rows into free slots
    together = run_chains(SlotEngine(model), prompts, stops, target, cfg, seeds)
    assert any(a < b and n_a == 0 < n_b for a, b, n_a, n_b in moves), "no row was moved down into a free slot"
    alone = [power_sample(model, p, stops, target, cfg, seed=s) for p, s in zip(prompts, seeds, strict=True)]
    for a, b in zip(together, alone, strict=True):
        assert a.tokens == b.tokens and a.moves == b.moves and a.decoded_tokens == b.decoded_tokens
        assert max(abs(x - y) for x, y in zip(a.logp, b.logp, strict=True)) < 1e-4


@pytest.mark.toy
def test_toy_tests_touch_no_transformers_code():
    """The `toy` marker's promise, which lets the run on the lowest transformers skip those tests."""
    import subprocess
    import sys

    check = "import sys, helpers.samplers.power, helpers.samplers.toy, helpers.evaluation.cost; print('transformers' in sys.modules)"
    done = subprocess.run([sys.executable, "-c", check], capture_output=True, text=True, timeout=120)
    assert done.stdout.strip() == "False", done.stderr[-2000:]


SCHEDULE = dict(alpha=2.0, block_size=2, mcmc_steps=4, max_new_tokens=4)


@pytest.mark.toy
def test_reference_mode_follows_the_published_block_schedule():
    """Reference mode's law is the published loop's, enumerated over every path (`reference_law`), on a toy where
    that loop and growth to the cap kB give laws apart by more than the sampling noise."""
    from helpers.samplers.toy import noise_floor, reference_law

    model = ToyLM(vocab=4, seed=1, sharpness=1.0)  # EOS first about 30% of the time under p^2
    published = reference_law(model, [1], **SCHEDULE)
    capped = reference_law(model, [1], **SCHEDULE, growth="cap")
    assert sum(published.values()) == pytest.approx(1.0, abs=1e-9)
    n = 2000
    floor = noise_floor(published, n)
    assert tv_distance(published, capped) > 4 * floor  # the toy tells the two schedules apart
    cfg = PowerConfig(block_size=SCHEDULE["block_size"], mcmc_steps=SCHEDULE["mcmc_steps"], mode="reference")
    target = Target(SCHEDULE["alpha"], SCHEDULE["max_new_tokens"])
    chains = run_chains(ReencodeEngine(model), [[1]] * n, [EOS], target, cfg, list(range(n)))
    tv = tv_distance(empirical(c.tokens for c in chains), published)
    assert tv < 2 * floor, f"TV {tv:.4f} from the published loop's law, noise floor {floor:.4f}"
    assert tv_distance(empirical(c.tokens for c in chains), capped) > 3 * floor


@pytest.mark.toy
def test_reference_mode_runs_the_blocks_it_is_given_under_a_token_cap():
    """With more blocks than the token cap holds (the published 16 under a shorter cap), a chain whose ending a move
    replaced gets blocks to finish in, and one that ends a block at the cap without EOS ends there: the chains follow
    that loop's enumerated law, it leaves fewer answers unfinished than the cap's own blocks, and each chain's moves
    are those of the blocks it ran."""
    from helpers.samplers.toy import noise_floor, reference_law

    model = ToyLM(vocab=4, seed=1, sharpness=1.0)
    settings = dict(SCHEDULE, mcmc_steps=2)
    few = reference_law(model, [1], **settings)
    blocks = 5
    more = reference_law(model, [1], **settings, blocks=blocks)
    assert sum(more.values()) == pytest.approx(1.0, abs=1e-9)

    def unfinished(law):
        return sum(w for x, w in law.items() if EOS not in x)

    assert unfinished(more) < unfinished(few)
    n = 2000
    floor = noise_floor(more, n)
    cfg = PowerConfig(block_size=settings["block_size"], mcmc_steps=settings["mcmc_steps"], mode="reference",
                      blocks=blocks)
    chains = run_chains(ReencodeEngine(model), [[1]] * n, [EOS], Target(2.0, settings["max_new_tokens"]), cfg,
                        list(range(n)))
    assert all(len(c.tokens) <= settings["max_new_tokens"] for c in chains)
    cap_blocks = settings["max_new_tokens"] // settings["block_size"]
    at_cap = [c for c in chains if len(c.tokens) == settings["max_new_tokens"] and EOS not in c.tokens]
    assert any(len(c.acceptance) < blocks for c in at_cap)  # at the cap without EOS, a chain ends with its block
    assert any(len(c.acceptance) > cap_blocks for c in chains)  # the later blocks ran, for chains below the cap
    assert all(len(c.moves) == settings["mcmc_steps"] * len(c.acceptance) for c in chains)
    tv = tv_distance(empirical(c.tokens for c in chains), more)
    assert tv < 2 * floor, f"TV {tv:.4f} from the five-block loop's law, noise floor {floor:.4f}"


def test_the_block_count_is_keyed_only_where_set_and_refused_where_it_cannot_hold():
    """A chain of the cap's own blocks keeps its key; a block count set is in the key; exact mode, whose blocks the
    length sets, refuses one with a message that says what to do, as does a count that is not one."""
    assert "blocks" not in PowerConfig(mode="reference").as_dict()
    assert PowerConfig(mode="reference", blocks=16).as_dict()["blocks"] == 16
    assert "at_cap" not in PowerConfig(mode="reference").as_dict()  # the rule cannot move a chain of the cap's blocks
    assert PowerConfig(mode="reference", blocks=16).as_dict()["at_cap"] == "ends"  # records before the rule stay apart
    assert PowerConfig(mode="reference", blocks=16).n_blocks(384) == 16
    assert PowerConfig(mode="reference", block_size=192).n_blocks(384) == 2
    with pytest.raises(SettingError, match="mode='reference'"):
        PowerConfig(mode="exact", blocks=4).validate()
    with pytest.raises(SettingError, match="blocks must be 0 or a positive integer"):
        PowerConfig(mode="reference", blocks=-1).validate()


def test_reference_mode_records_are_keyed_by_their_schedule():
    """Records of the schedule before the published one are never reused: reference mode's key names it."""
    assert PowerConfig(mode="reference").as_dict()["schedule"] == "extend"
    assert "schedule" not in PowerConfig(mode="exact").as_dict()  # the exact mode's keys stay as they were


@pytest.mark.parametrize("mode", ["exact", "reference"])
def test_a_chain_goes_on_from_any_checkpoint_as_it_would_have(tiny, mode):
    """A chain offers a checkpoint after each block's growth and after each move; resumed from any of them (as the
    store keeps it, through JSON), it ends as the uninterrupted chain does: the same tokens, moves and acceptance."""
    import json

    from helpers.samplers.power import chain_work
    from helpers.samplers.work import run_together

    model, tokenizer = tiny.module, tiny.tokenizer
    prompt, stops = tokenizer("Ada has 3 apples .")["input_ids"], {tokenizer.eos_token_id}
    target, cfg = Target(2.0, 12), PowerConfig(block_size=4, mcmc_steps=3, mode=mode)
    states = []
    ((whole,),) = run_together(SlotEngine(model), [chain_work([prompt], stops, target, cfg, [5])], stops,
                               on_checkpoint=lambda w, i, state, spent: states.append((json.loads(json.dumps(state)),
                                                                                        spent)))
    assert {(s["block"], s["step"], s["grown"]) for s, _ in states} >= {(0, 0, True), (0, 1, True), (0, 2, True)}
    for state, spent in states:
        ((again,),) = run_together(SlotEngine(model), [chain_work([prompt], stops, target, cfg, [5],
                                                                  resume=[(state, spent)])], stops)
        assert (again.tokens, again.moves, again.acceptance) == (whole.tokens, whole.moves, whole.acceptance), state
