"""The decode loop: batching, shared prefixes and stop tokens must not change what is generated."""

from __future__ import annotations

import pytest
import torch

import helpers.engines.protocol as decoding
from helpers.engines.engine import Engine
from helpers.engines.loop import run_programs
from helpers.engines.protocol import Charge, shared_prefix_length, split_evenly, total
from helpers.engines.reencode import ReencodeEngine
from helpers.engines.slot import SlotEngine
from helpers.samplers.plain import decode


def _prompts(tokenizer):
    texts = ["Ada has 3 apples .", "Then Ada receives 4 more apples . How many", "0 1 2", "the final answer is"]
    return [tokenizer(t)["input_ids"] for t in texts]


def test_batched_greedy_equals_one_at_a_time(tiny):
    model, tokenizer = tiny.module, tiny.tokenizer
    prompts = _prompts(tokenizer)
    batch = decode(model, prompts, 12, [tokenizer.eos_token_id])
    for prompt, got in zip(prompts, batch, strict=True):
        (alone,) = decode(model, [prompt], 12, [tokenizer.eos_token_id])
        assert got.tokens == alone.tokens
        assert torch.allclose(torch.tensor(got.logp), torch.tensor(alone.logp), atol=1e-4)
    assert total(batch, "decoded_tokens") == sum(len(c.tokens) for c in batch)
    assert total(batch, "prefill_tokens") == sum(len(p) - 1 for p in prompts)  # the last prompt token feeds the first step


def test_greedy_matches_transformers_generate(tiny):
    model, tokenizer = tiny.module, tiny.tokenizer
    prompt = _prompts(tokenizer)[1]
    (ours,) = decode(model, [prompt], 10, [])
    ref = model.generate(torch.tensor([prompt], device=model.device), max_new_tokens=10, do_sample=False, eos_token_id=None,
                         pad_token_id=tokenizer.pad_token_id)
    assert ours.tokens == ref[0, len(prompt):].tolist()


def test_shared_prefix_is_encoded_once_with_the_same_result(tiny, monkeypatch):
    model, tokenizer = tiny.module, tiny.tokenizer
    prefix = tokenizer("Can you solve the following math problem ? Please reason step by step , and put")["input_ids"] * 2
    prompts = [prefix + p for p in _prompts(tokenizer)]
    assert shared_prefix_length(prompts) >= len(prefix)
    fast = decode(model, prompts, 8, [tokenizer.eos_token_id])
    monkeypatch.setattr(decoding, "MIN_SHARED_PREFIX", 10**9)
    slow = decode(model, prompts, 8, [tokenizer.eos_token_id])
    assert [c.tokens for c in fast] == [c.tokens for c in slow]
    assert total(fast, "prefill_tokens") < sum(len(p) for p in prompts)


def test_rows_stop_at_a_stop_token(tiny):
    model, tokenizer = tiny.module, tiny.tokenizer
    prompts = _prompts(tokenizer)
    (first,) = decode(model, [prompts[0]], 6, [])
    stop = first.tokens[2]  # make the third greedy token a stop token
    (stopped,) = decode(model, [prompts[0]], 6, [stop])
    assert stopped.stopped and stopped.tokens == first.tokens[: first.tokens.index(stop) + 1]


def test_sampling_is_seeded_and_logq_is_a_log_probability(tiny):
    model, tokenizer = tiny.module, tiny.tokenizer
    prompts = _prompts(tokenizer)
    a = decode(model, prompts, 8, [], temperature=0.7, seeds=[3, 4, 5, 6])
    b = decode(model, prompts, 8, [], temperature=0.7, seeds=[3, 4, 5, 6])
    c = decode(model, prompts, 8, [], temperature=0.7, seeds=[7, 8, 9, 10])
    assert [x.tokens for x in a] == [x.tokens for x in b] != [x.tokens for x in c]
    assert all(q <= 0 for x in a for q in x.logq)


def test_a_sample_does_not_depend_on_its_batch(tiny):
    model, tokenizer = tiny.module, tiny.tokenizer
    prompts = _prompts(tokenizer)
    together = decode(model, prompts, 8, [tokenizer.eos_token_id], temperature=1.0, seeds=[11, 12, 13, 14])
    for prompt, seed, got in zip(prompts, [11, 12, 13, 14], together, strict=True):
        (alone,) = decode(model, [prompt], 8, [tokenizer.eos_token_id], temperature=1.0, seeds=[seed])
        assert got.tokens == alone.tokens
        assert max(abs(x - y) for x, y in zip(got.logq, alone.logq, strict=True)) < 1e-4


def test_the_cached_loop_equals_re_encoding_every_token(tiny):
    model, tokenizer = tiny.module, tiny.tokenizer
    prompts = _prompts(tokenizer)
    cached = decode(model, prompts, 8, [tokenizer.eos_token_id], temperature=0.8, top_k=5, seeds=[1, 2, 3, 4])
    slow = decode(model, prompts, 8, [tokenizer.eos_token_id], temperature=0.8, top_k=5, seeds=[1, 2, 3, 4],
                         engine=ReencodeEngine(model))
    assert [c.tokens for c in cached] == [c.tokens for c in slow]
    assert total(slow, "forward_passes") == total(slow, "decoded_tokens")  # one full pass per token


def test_refilled_rows_decode_as_if_alone(tiny):
    """More prompts than rows: a finished row's slot goes to the next prompt, and no sample changes."""
    model, tokenizer = tiny.module, tiny.tokenizer
    prompts = _prompts(tokenizer) * 2
    seeds = list(range(20, 28))
    done = []
    refilled = decode(model, prompts, 10, [tokenizer.eos_token_id], temperature=1.0, seeds=seeds, batch_size=3,
                      on_done=lambda i, c: done.append(i))
    together = decode(model, prompts, 10, [tokenizer.eos_token_id], temperature=1.0, seeds=seeds)
    assert [c.tokens for c in refilled] == [c.tokens for c in together]
    assert sorted(done) == list(range(8))
    assert total(refilled, "prefill_tokens") == sum(len(p) - 1 for p in prompts)


def test_prompts_are_encoded_in_bounded_passes_of_like_length_with_the_same_result(tiny, monkeypatch):
    """Admission splits its rows into passes of at most `prefill_tokens` padded tokens, rows of like length
    together; what is generated does not change."""
    from helpers.engines.slot import prompt_passes
    from helpers.engines.slot_runner import SlotRunner

    model, tokenizer = tiny.module, tiny.tokenizer
    prompts = _prompts(tokenizer)
    one = decode(model, prompts, 8, [tokenizer.eos_token_id], temperature=1.0, seeds=[1, 2, 3, 4])
    padded = []
    encode = SlotRunner.encode
    monkeypatch.setattr(SlotRunner, "encode", lambda self, slots, chunks, *a: (
        padded.append(len(chunks) * max(map(len, chunks))), encode(self, slots, chunks, *a))[1])
    most = max(len(p) for p in prompts)  # the longest prompt's chunk fits; two of them do not
    monkeypatch.setattr(SlotEngine, "prefill_tokens", most)
    split = decode(model, prompts, 8, [tokenizer.eos_token_id], temperature=1.0, seeds=[1, 2, 3, 4])
    assert [c.tokens for c in split] == [c.tokens for c in one]
    assert len(padded) > 1 and max(padded) <= most
    assert prompt_passes([5, 40, 6, 38, 100], 80) == [[4], [1, 3], [2, 0]]  # longest first, like with like
    assert prompt_passes([], 80) == [] and prompt_passes([3], 1) == [[0]]  # a row longer than the bound runs alone


def test_truncated_model_decodes_as_when_re_encoded(tiny):
    from helpers.models.truncation import truncate

    model, tokenizer = tiny.module, tiny.tokenizer
    short = truncate(model, 3)
    prompts = _prompts(tokenizer)
    cached = decode(short, prompts, 8, [tokenizer.eos_token_id], temperature=1.0, seeds=[1, 2, 3, 4])
    slow = decode(short, prompts, 8, [tokenizer.eos_token_id], temperature=1.0, seeds=[1, 2, 3, 4],
                  engine=ReencodeEngine(short))
    assert [c.tokens for c in cached] == [c.tokens for c in slow]


def test_the_engine_runs_in_bfloat16(tiny_dir, monkeypatch):
    """The GPU's dtype, on the CPU: the KV buffer takes the model's dtype, and each greedy token with its recorded
    log p is what re-encoding the whole sequence in that dtype gives, to bfloat16's resolution. (Comparing two
    whole greedy decodes instead is fragile: one near-tie decided differently changes every later token.)"""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    model = AutoModelForCausalLM.from_pretrained(tiny_dir, dtype=torch.bfloat16).eval()
    tokenizer = AutoTokenizer.from_pretrained(tiny_dir)
    prompts = _prompts(tokenizer)
    from helpers.engines import slot

    made = []

    class Recorded(slot.SlotCache):  # the engine lets go of its buffer when a run ends: look at it as it is made
        def __init__(self, *args):
            super().__init__(*args)
            made.append((self.keys.dtype, self.values.dtype))

    monkeypatch.setattr(slot, "SlotCache", Recorded)
    cached = decode(model, prompts, 8, [], engine=SlotEngine(model))
    assert made == [(torch.bfloat16, torch.bfloat16)]  # transformers' own attention: keys in the model's format
    for prompt, completion in zip(prompts, cached, strict=True):
        with torch.inference_mode():
            logits = model(input_ids=torch.tensor([prompt + completion.tokens])).logits[0, len(prompt) - 1:-1]
        logp = torch.log_softmax(logits.float(), -1)
        chosen = logp.gather(-1, torch.tensor(completion.tokens)[:, None])[:, 0]
        assert (logp.max(-1).values - chosen).max() < 0.1  # the best token, or within a near-tie of it
        assert (chosen - torch.tensor(completion.logp)).abs().max() < 0.1


@pytest.mark.parametrize("bad, message", [(dict(max_new_tokens=0), "max_new_tokens"), (dict(prompts=[[]]), "prompt"),
                                          (dict(prompts=[]), "prompt"), (dict(temperature=-1.0), "temperature"),
                                          (dict(seeds=[1]), "one seed per prompt")])
def test_bad_arguments(tiny, bad, message):
    model, tokenizer = tiny.module, tiny.tokenizer
    args = dict(prompts=_prompts(tokenizer), max_new_tokens=4, temperature=1.0, seeds=None) | bad
    with pytest.raises(ValueError, match=message):
        decode(model, args["prompts"], args["max_new_tokens"], [], temperature=args["temperature"], seeds=args["seeds"])


def test_batch_costs_are_split_exactly():
    assert split_evenly(10, 3) == [4, 3, 3] and sum(split_evenly(7, 7)) == 7 and split_evenly(0, 2) == [0, 0]


class _Recorder(Engine):
    """An engine that decodes nothing itself: it records the loop's calls, and each step gives every pending
    extension one token by hand (7 + the row's index) and a second of wall time."""

    def __init__(self):
        self.prefill = self.passes = 0
        self.calls, self.pending, self.taken = [], [], 0

    def admit(self, waiting):
        admitted = list(waiting)
        waiting.clear()
        self.calls += [("admit", t.index) for t in admitted]
        return admitted, None

    def extend(self, task, request):
        self.calls.append(("extend", task.index, request.limit))
        if request.limit > 0:
            self.pending.append((task, request))

    def decoding(self):
        return bool(self.pending)

    def step(self):
        ended, self.pending = self.pending, []
        for task, request in ended:
            request.append(7 + task.index, 0.0, 0.0)
        return ended, Charge([t for t, _ in ended], 1.0, [3] * len(ended), tokens=len(ended))

    def adopt(self, task, extension):
        self.calls.append(("adopt", task.index, list(extension.tokens)))

    def park(self, task):
        self.calls.append(("park", task.index))

    def copy(self, copies):
        self.calls.append(("copy", len(copies)))

    def end(self, task):
        self.calls.append(("end", task.index))

    def close_run(self):
        self.calls.append(("close",))


class _Pair(decoding.Group):
    size = 2

    def __init__(self):
        self.rows = []

    def release(self):
        return [(self.rows[0], self.rows[1])]


def _program(row, group):
    """Asks for nothing (answered at once), then one token (adopted), then meets its group, then ends."""
    empty = yield decoding.Extension(row, 0, 0)
    assert empty.tokens == []
    ext = yield decoding.Extension(row, 0, 1)
    yield decoding.Adopt(ext)
    group.rows.append(row)
    yield decoding.Barrier(group)
    return decoding.Completion(list(row.tokens), [], [], stopped=False)


def test_the_one_loop_answers_empty_requests_adopts_meets_barriers_charges_and_finishes():
    engine, group, done = _Recorder(), _Pair(), []
    rows = [decoding.Row([1, 2]), decoding.Row([1, 3])]
    results = run_programs(engine, [(row, _program(row, group)) for row in rows], set(),
                           on_done=lambda i, c: done.append(i))
    calls = engine.calls
    assert ("extend", 0, 0) in calls and ("extend", 0, 1) in calls  # the empty request is heard of, then answered
    assert ("adopt", 0, [7]) in calls and ("adopt", 1, [8]) in calls and ("copy", 1) in calls
    assert calls.index(("park", 1)) < calls.index(("copy", 1)) < calls.index(("end", 0)) < calls.index(("close",))
    assert calls[-1] == ("close",)
    assert [c.tokens for c in results] == [[7], [8]] and sorted(done) == [0, 1]
    # the accounting, once, in the loop: one step charged to both rows, split evenly; the engine's totals add up
    assert [(c.decoded_tokens, c.prefill_tokens, c.forward_passes) for c in results] == [(1, 3, 1), (1, 3, 1)]
    assert [c.seconds for c in results] == pytest.approx([0.5, 0.5], abs=0.01)
    assert (engine.prefill, engine.passes) == (6, 1)


def test_the_loop_hands_on_checkpoints_and_beats_the_pulse_for_every_engine():
    """A program's checkpoint reaches `on_checkpoint` with its row's costs so far, and a row restored from one goes
    on from the costs it was saved with (what restoring it cost is the interruption's), so no engine need know of
    budgets; after each step the loop beats the pulse it is handed with the tokens the engine says it decoded."""
    from helpers.core.pulse import Pulse

    class Beats(Pulse):  # a pulse that keeps what it is told
        def beat(self, tokens: int, rows: int, computed: int | None = None) -> None:
            beats.append((tokens, rows))

    def twice(row):
        ext = yield decoding.Extension(row, 0, 1)
        yield decoding.Adopt(ext)
        yield decoding.Checkpoint({"at": len(row.tokens)})
        ext = yield decoding.Extension(row, 1, 1)
        return decoding.Completion(row.tokens + ext.tokens, [], [], stopped=False)

    beats, saved = [], []
    rows = [decoding.Row([1, 2]), decoding.Row([1, 3], restored=decoding.Spent(5, 9, 4, 2.0))]
    engine = _Recorder()
    results = run_programs(engine, [(row, twice(row)) for row in rows], set(),
                           on_checkpoint=lambda i, state, spent: saved.append((i, state, spent)), pulse=Beats(None))
    assert saved == [(0, {"at": 1}, decoding.Spent(1, 3, 1, 0.5)), (1, {"at": 1}, decoding.Spent(6, 12, 5, 2.5))]
    assert [(c.decoded_tokens, c.prefill_tokens, c.forward_passes, c.seconds) for c in results] == \
           [(2, 6, 2, 1.0), (7, 15, 6, 3.0)]
    assert beats == [(2, 2), (2, 2)] and engine.calls[-1] == ("close",)


def test_rows_stranded_at_a_barrier_raise_and_the_run_is_closed():
    engine, group = _Recorder(), _Pair()
    group.size = 3  # a third row never comes
    rows = [decoding.Row([1, 2]), decoding.Row([1, 3])]
    with pytest.raises(RuntimeError, match="can never reach"):
        run_programs(engine, [(row, _program(row, group)) for row in rows], set())
    assert engine.calls[-1] == ("close",)


def test_only_the_loop_sends_to_programs():
    """The engines (slot, re-encoding, generate, vLLM) never run programs: `run_programs` does, written once."""
    from pathlib import Path

    engines = Path(decoding.__file__).parent
    senders = sorted(p.name for p in engines.glob("*.py") if ".program.send(" in p.read_text(encoding="utf-8"))
    assert senders == ["loop.py"]


def test_a_sequence_past_a_local_attention_window_decodes_exactly(tiny):
    """Gemma 3's sliding-window layers see only the last `window` positions: the slot engine hands them a mask of
    their own, so a row decodes as transformers' `generate` decodes it, inside the window and well past it."""
    from helpers.models.attention import local_window
    from helpers.models.tiny import GEMMA_WINDOW

    model, tokenizer = tiny.module, tiny.tokenizer
    window = local_window(model.config)
    assert window == (GEMMA_WINDOW if model.config.model_type.startswith("gemma3") else None)
    if window is None:
        return
    prompts = _prompts(tokenizer)[:2]
    n = 2 * window  # every row crosses the window, the longer prompt first
    rows = decode(model, prompts, n, [])
    for prompt, row in zip(prompts, rows, strict=True):
        ref = model.generate(torch.tensor([prompt], device=model.device), max_new_tokens=n, do_sample=False, eos_token_id=None,
                             pad_token_id=tokenizer.pad_token_id)
        assert row.tokens == ref[0, len(prompt):].tolist()
        with torch.no_grad():  # the model's own masks over the whole sequence: its log-probability of the tokens
            logits = model(torch.tensor([prompt + row.tokens], device=model.device)).logits[0, len(prompt) - 1:-1].float()
        forced = torch.log_softmax(logits, -1).gather(-1, torch.tensor(row.tokens, device=logits.device)[:, None]
                                                      ).sum().item()
        assert row.sum_logp == pytest.approx(forced, abs=1e-3)
