"""Every decoding method of the book behind one call, with per-sample records kept in the results store.

Methods: greedy, temperature (T=1), low temperature (T=1/α), power sampling (block-wise MH towards
p^α, `helpers.samplers.power`) and SMC (K particles towards p^α, `helpers.samplers.smc`). Best-of-N by likelihood and majority vote are computed from temperature samples.
Records are keyed by (problem, sample index) and written as soon as each one ends; the store a
decode writes to is named by the model, the settings (`helpers.samplers.settings.DecodeSettings`) and the engine,
so every chapter that asks for the same decode reads the same records.
"""

from __future__ import annotations

import math
import sys
import time
from collections import Counter
from collections.abc import Mapping, Sequence
from contextlib import ExitStack
from pathlib import Path

from helpers.core.checks import is_count
from helpers.core.progress import bar
from helpers.core.pulse import Pulse
from helpers.data.problems import Problem
from helpers.data.prompts import build_prompt
from helpers.engines.protocol import Completion, Spent
from helpers.engines.registry import make_engine
from helpers.evaluation.grading import extract_answer, is_equivalent
from helpers.models.depth_mix import DepthMix
from helpers.models.handle import ModelHandle
from helpers.models.loading import stop_token_ids
from helpers.results.identity import problem_key, sample_key
from helpers.results.kinds import DECODE
from helpers.results.shapes import Sized
from helpers.results.store import Run
from helpers.samplers.plain import decode_work
from helpers.samplers.power import ChainCompletion, chain_work, resumable
from helpers.samplers.settings import METHODS, DecodeSettings, check_engine, engine_key
from helpers.samplers.smc import SMCCompletion, smc_work
from helpers.samplers.work import check_batch_size, run_together

__all__ = ["METHODS", "DecodeSettings", "accuracy", "decode_run", "sample", "sample_at_depths", "sample_methods",
           "solve"]


def _record(problem: Problem, tokenizer, prompt: list[int], c: Completion) -> dict:
    text = tokenizer.decode(c.tokens, skip_special_tokens=True)
    predicted = extract_answer(text)
    record = {"id": problem.id, "level": problem.level, "gold": problem.answer, "text": text, "tokens": c.tokens,
              "prompt_tokens": len(prompt), "predicted": predicted, "correct": is_equivalent(predicted, problem.answer),
              "n_tokens": len(c.tokens), "sum_logp": c.sum_logp, "stopped": c.stopped,
              "decoded_tokens": c.decoded_tokens, "prefill_tokens": c.prefill_tokens,
              "acceptance": (sum(c.acceptance) / len(c.acceptance))
              if isinstance(c, ChainCompletion) and c.acceptance else None}
    if isinstance(c, SMCCompletion):  # every particle's answer and weight, the returned one at `chosen`
        answers = [predicted if i == c.chosen else extract_answer(tokenizer.decode(p.tokens, skip_special_tokens=True))
                   for i, p in enumerate(c.particles)]  # the returned particle's text is decoded above already
        record.update(chosen=c.chosen, resamples=c.resamples, ess=c.ess, particles=[
            {"predicted": a, "correct": is_equivalent(a, problem.answer), "log_weight": w, "n_tokens": len(p.tokens),
             "sum_logp": p.sum_logp, "stopped": p.stopped}
            for a, w, p in zip(answers, c.log_weights, c.particles, strict=True)])
    return record


RECORD_SHAPE = {"id": str, "text": str, "tokens": [int], "predicted": (str, type(None)), "correct": bool,
                "n_tokens": int, "sum_logp": float, "stopped": bool, "decoded_tokens": int, "prefill_tokens": int,
                "acceptance": (float, type(None))}  # `_record`, as the store checks it
SMC_SHAPE = {**RECORD_SHAPE, "chosen": int, "resamples": float, "particles": Sized(
    {"predicted": (str, type(None)), "correct": bool, "log_weight": float, "n_tokens": int}, "particles")}


def sample_seed(base: int, problem_id: str, index: int) -> int:
    """The seed of sample `index` of a problem: fixed by (base seed, problem, index), not by batch composition."""
    return base * 1_000_003 + index * 10_007 + int.from_bytes(problem_id.encode()[-6:], "little") % 10_007


def record_shape(config: dict) -> dict:
    """The shape of a stored decode record of these settings: an SMC answer carries its particles too."""
    return SMC_SHAPE if config.get("method") == "smc" else RECORD_SHAPE


def decode_run(model: ModelHandle, settings: DecodeSettings, root: Path | None = None, engine: str = "slot") -> Run:
    """The store of one model's decodes under `settings` on `engine` (see `helpers.samplers.settings`)."""
    identity = model.identity()
    return Run(DECODE, {**identity, **settings.key(),
                        **engine_key(engine, settings.samples, identity["dtype"], model.device)}, root=root)


def sample(model: ModelHandle, problems: Sequence[Problem], settings: DecodeSettings | None = None, *, n_seeds: int = 1,
           batch_size: int = 16, progress: bool = True, root: Path | None = None, engine: str = "slot",
           **fields) -> list[list[dict]]:
    """records[problem][sample] for `settings` (or a `DecodeSettings(**fields)`: method=..., max_new_tokens=...);
    missing ones are computed in batches and stored as they finish.

    The store key comes from the model (`ModelHandle.identity`), the settings and the engine; records are keyed by
    problem content and sample index. `engine` is 'slot' (`helpers.engines.slot.SlotEngine`) or 'vllm'
    (`helpers.engines.vllm`, which runs the model from a checkpoint written for it). At most `batch_size` samples
    decode at once (SMC's counts particles, rounded to whole problems); a finished one is stored at once and its
    row goes to the next. Each record also carries `seconds`, its share of the wall time of the passes that
    computed it. Greedy decoding takes one sample per problem whatever `n_seeds` says.
    """
    if settings is None:
        settings = DecodeSettings(**fields)
    elif fields:
        raise ValueError(f"give the settings either as DecodeSettings or as fields, not both: {sorted(fields)}")
    return sample_methods(model, problems, {settings.method: settings}, n_seeds=n_seeds,
                          batch_size=batch_size, engine=engine, root=root, progress=progress)[settings.method]


def sample_methods(model: ModelHandle, problems: Sequence[Problem], settings: Mapping[str, DecodeSettings], *,
                   n_seeds: int, batch_size: int, engine: str = "slot", root: Path | None = None,
                   limits: Mapping[str, int] | None = None, progress: bool = True) -> dict[str, list[list[dict]]]:
    """records[problem][sample] for each named decode (`helpers.samplers.settings.chapter_settings`) of one model, as
    `sample` gives them: `sample_at_depths` at the model's own depth."""
    here = ("stitch", model.n_layers)
    return sample_at_depths(model, problems, settings, [here], n_seeds=n_seeds, batch_size=batch_size,
                            engine=engine, root=root, limits={here: limits} if limits else None,
                            progress=progress)[here]


def sample_at_depths(model: ModelHandle, problems: Sequence[Problem], settings: Mapping[str, DecodeSettings],
                     variants: Sequence[tuple[str, int]], *, n_seeds: int, batch_size: int, engine: str = "slot",
                     root: Path | None = None, limits: Mapping[tuple[str, int], Mapping[str, int]] | None = None,
                     seeds: Mapping[tuple[str, int], int] | None = None,
                     progress: bool = True) -> dict[tuple[str, int], dict[str, list[list[dict]]]]:
    """{(method, depth): {name: records[problem][sample]}}: each named decode of `settings`, for each truncation
    (method, depth) of `model` (`ModelHandle.at_depth`: at full depth the model itself), as `sample` on that truncation gives
    them and under the same store keys. The one function through which chapters 03-06 decode, so that a chapter
    reads another's records by construction. `limits[variant][name]` = k: that decode on the first k problems only;
    `seeds[variant]` = k: the sampled decodes of that truncation take its first k samples per problem, not `n_seeds`
    (a depth off the headline searched on fewer seeds).

    Whatever is missing, of every decode at every depth, is computed in one engine run: the batch holds rows of
    every method and depth (a depth mix, `helpers.models.depth_mix`) until the last ends, with the costly searches
    admitted first, where one run per method or depth would drain its batch at each one's end. On vLLM, which runs
    one model per engine, each truncation has a run of its own."""
    _check_counts(n_seeds, batch_size)
    limits = dict(limits or {})
    seeds = dict(seeds or {})
    for variant, k in seeds.items():
        if not is_count(k, 1):
            raise ValueError(f"seeds[{variant!r}] must be a number of samples of at least 1, got {k!r}")
    decodes: dict[tuple[str, int], dict[str, _Decode]] = {}
    shared: dict[tuple[str, int], _Decode] = {}  # the full depth under two methods is one model, one decode
    for variant in dict.fromkeys((method, depth) for method, depth in variants):  # in order, once each
        m = model.at_depth(variant[1], variant[0])
        by_name = _method_decodes(m, problems, settings, seeds.get(variant, n_seeds), limits.get(variant), root, engine)
        decodes[variant] = {name: shared.setdefault((str(d.run.path), len(d.problems), d.n_seeds), d)
                            for name, d in by_name.items()}
    every = list({id(d): d for by_name in decodes.values() for d in by_name.values()}.values())
    missing = {id(d): d.missing() for d in every}
    for d in every:  # a build that reads the release as complete stops here, before any decoding
        d.run.refuse_work([d.key(p, s) for p, s in missing[id(d)]])
    if any(missing.values()):
        with ExitStack() as locks:  # another process on the same decodes: wait for it, then compute what is missing
            for d in sorted(every, key=lambda d: str(d.run.path)):  # one order: no two processes cross
                locks.enter_context(d.run.locked())
            for d in every:
                d.jobs = d.missing()  # read again under the locks
            todo = [d for d in every if d.jobs]
            if todo:
                _decode(model, sorted(todo, key=_searches_first), batch_size, progress, engine)
    return {v: {name: d.records() for name, d in by_name.items()} for v, by_name in decodes.items()}


def _check_counts(n_seeds: int, batch_size: int) -> None:
    if not is_count(n_seeds, 1):
        raise ValueError(f"n_seeds must be an integer of at least 1, got {n_seeds!r}")
    check_batch_size(batch_size)


def _method_decodes(model: ModelHandle, problems: Sequence[Problem], settings: Mapping[str, DecodeSettings], n_seeds: int,
                    limits: Mapping[str, int] | None, root: Path | None, engine: str) -> dict[str, _Decode]:
    """One `_Decode` per named decode of `model`, `limits[name]` = k: on the first k problems only."""
    limits = dict(limits or {})
    unknown = sorted(set(limits) - set(settings))
    if unknown:
        raise ValueError(f"limits name decodes that are not asked for: {unknown}; the decodes are {sorted(settings)}")
    for name, k in limits.items():
        if not is_count(k, 1):
            raise ValueError(f"limits[{name!r}] must be a number of problems of at least 1, got {k!r}")
    keys = {p.id: problem_key(p) for p in problems}
    return {name: _Decode(s, decode_run(model, s, root, engine), list(problems)[:limits.get(name, len(problems))],
                          n_seeds if s.samples else 1, keys, model) for name, s in settings.items()}


class _Decode:
    """One named decode of `sample_methods`: its settings, its store, its problems and samples."""

    def __init__(self, settings: DecodeSettings, run: Run, problems: list[Problem], n_seeds: int, keys: dict,
                 model: ModelHandle):
        self.settings, self.run, self.problems, self.n_seeds, self.keys = settings, run, problems, n_seeds, keys
        self.model = model  # the model it decodes with: the chapter's, or a truncation of it
        self.jobs: list[tuple[Problem, int]] = []  # what this call decodes, set under the store's lock

    def key(self, problem: Problem, s: int) -> str:
        return sample_key(self.keys[problem.id], s)

    def missing(self) -> list[tuple[Problem, int]]:
        """The (problem, sample) pairs whose record the store does not hold."""
        return [(p, s) for p in self.problems for s in range(self.n_seeds) if self.key(p, s) not in self.run]

    def records(self) -> list[list[dict]]:
        keys = [self.key(p, s) for p in self.problems for s in range(self.n_seeds)]
        flat = [{**r, "seconds": self.run.seconds(k)} for k, r in zip(keys, self.run.get_many(keys), strict=True)]
        return [flat[i:i + self.n_seeds] for i in range(0, len(flat), self.n_seeds)]


def _searches_first(d: _Decode) -> int:
    """The order decodes are admitted in: the searches first, whose rows run longest; the cheap ones fill in."""
    return {"power": 0, "smc": 1}.get(d.settings.method, 2)


def _decode(model: ModelHandle, decodes: Sequence[_Decode], batch_size: int, progress: bool, engine: str) -> None:
    """Decode every decode's missing (problem, sample) jobs in one engine run of `batch_size` rows, storing each
    record as it ends. Decodes on several truncations of `model` share the run through a depth mix; vLLM runs
    one model per engine, so there each truncation has a run of its own."""
    models = list({id(d.model): d.model for d in decodes}.values())
    if len(models) > 1 and check_engine(engine) == "vllm":
        for m in models:
            _decode(m, [d for d in decodes if d.model is m], batch_size, progress, engine)
        return
    mix = None
    if len(models) > 1:
        variants = [(m.truncation.method, m.truncation.depth) if m.truncation else ("stitch", m.n_layers)
                    for m in models]
        mix = DepthMix(model.module, variants)
    tokenizer = model.tokenizer
    stops = set(stop_token_ids(model.module, tokenizer))
    works, prompts = [], []
    for d in decodes:
        s = d.settings
        ps = [build_prompt(tokenizer, p.question, shots=s.shots) for p, _ in d.jobs]
        seeds = [sample_seed(s.seed, p.id, i) for p, i in d.jobs]
        if s.method == "power":
            work = chain_work(ps, stops, s.target, s.power, seeds, _checkpoints(d, stops))
        elif s.method == "smc":
            work = smc_work(ps, stops, s.target, s.smc, seeds)
        else:
            work = decode_work(ps, s.max_new_tokens, stops, s.temperature, s.top_k, seeds)
        if mix is not None:
            for row, _ in work.tasks:
                row.variant = next(i for i, m in enumerate(models) if m is d.model)
        works.append(work)
        prompts.append(ps)
    what = "+".join(dict.fromkeys(d.settings.method for d in decodes))
    total = sum(len(d.jobs) for d in decodes)
    done = bar(total=total, desc=what, progress=progress)
    stored = [0]  # a disabled bar counts nothing
    meter = Pulse.from_env()  # this decode's progress, for the runner
    meter.records(0, total, what)

    def store(w: int, i: int, c: Completion) -> None:
        d = decodes[w]
        p, s = d.jobs[i]
        d.run.add(d.key(p, s), _record(p, tokenizer, prompts[w][i], c), seconds=c.seconds, seed=s)
        done.update(1)
        stored[0] += 1
        meter.records(stored[0], total, what)

    saved: dict[tuple[int, int], float] = {}  # when each chain's last checkpoint was stored

    def checkpoint(w: int, i: int, state: dict, spent: Spent) -> None:
        now = time.monotonic()
        if state.get("grown") and now - saved.get((w, i), -math.inf) < CHECKPOINT_EVERY:
            return  # a move's checkpoint soon after the last one stored: the next will do
        d = decodes[w]
        p, s = d.jobs[i]
        d.run.save_checkpoint(d.key(p, s), {"chain": state, "spent": vars(spent)})
        saved[(w, i)] = now

    try:
        with done:
            run_together(make_engine("slot", mix) if mix else engine_for(models[0], engine), works, stops,
                         batch_size, store, checkpoint, pulse=meter)
    finally:
        if mix is not None:
            mix.close()


CHECKPOINT_EVERY = 60.0  # seconds: within a block a chain's checkpoint is stored at most this often (each is a synced
# write); between blocks always. A run its budget stops loses at most this much of each chain's work.


def _checkpoints(d: _Decode, stops: set[int]) -> list[tuple[dict, Spent] | None]:
    """Each MH chain's newest checkpoint in the store, checked, where one was left by a run its budget stopped:
    the chain goes on from there. One that does not fit the chain's settings is dropped, and the chain starts
    again (said on stderr)."""
    saved = d.run.checkpoints()
    resume, refused = [], 0
    for p, i in d.jobs:
        entry = saved.get(d.key(p, i))
        try:
            spent = Spent.read(entry.get("spent")) if isinstance(entry, dict) else None
        except ValueError:
            spent = None
        chain = entry.get("chain") if isinstance(entry, dict) else None
        ok = spent is not None and isinstance(chain, dict) and resumable(chain, d.settings.target, d.settings.power,
                                                                         stops)
        refused += entry is not None and not ok
        resume.append((chain, spent) if ok else None)
    if refused or any(resume):
        print(f"[decode] {sum(r is not None for r in resume)} MH chains go on from their checkpoints"
              + (f"; {refused} checkpoints do not fit their chains and those start again" if refused else ""),
              file=sys.stderr, flush=True)
    return resume


def engine_for(model: ModelHandle, engine: str = "slot"):
    """The engine that runs `model`'s decodes: the book's slot engine, or vLLM on a checkpoint of it."""
    return make_engine(check_engine(engine), model)


def solve(model: ModelHandle, problems: Sequence[Problem], *, max_new_tokens: int, shots: int = 0,
          batch_size: int = 16, progress: bool = True, root: Path | None = None) -> list[dict]:
    """One greedy record per problem: the completion, its answer, whether it is right, what it cost."""
    records = sample(model, problems, DecodeSettings("greedy", max_new_tokens, shots), batch_size=batch_size,
                     progress=progress, root=root)
    return [per_problem[0] for per_problem in records]


def accuracy(records: Sequence[dict]) -> float:
    """Share of correct records (0 for an empty list)."""
    return sum(bool(r["correct"]) for r in records) / len(records) if records else 0.0


# --------------------------------------------------------------------------------------------------
# Scores over records[problem][seed]
# --------------------------------------------------------------------------------------------------


def mean_accuracy(records: Sequence[Sequence[dict]]) -> float:
    """Expected single-sample accuracy: the share of correct samples, averaged over seeds and problems."""
    flat = [r["correct"] for per_problem in records for r in per_problem]
    return sum(flat) / len(flat) if flat else 0.0


def pass_at_k(records: Sequence[Sequence[dict]], k: int) -> float:
    """Unbiased pass@k (Chen et al.): 1 − C(n−c, k)/C(n, k), averaged over problems."""
    scores = []
    for per_problem in records:
        n, c = len(per_problem), sum(r["correct"] for r in per_problem)
        if k > n:
            raise ValueError(f"pass@{k} needs at least {k} samples per problem, have {n}")
        scores.append(1.0 - (math.comb(n - c, k) / math.comb(n, k) if n - c >= k else 0.0))
    return sum(scores) / len(scores) if scores else 0.0


def per_problem(records: Sequence[Sequence[dict]], rule: str = "mean") -> list[float]:
    """Each problem's score under `rule`: 'mean' (share of correct samples), 'best_of_n' or 'majority'."""
    if rule == "mean":
        return [sum(r["correct"] for r in p) / len(p) if p else 0.0 for p in records]
    if rule == "best_of_n":  # the sample the model itself finds most likely (largest Σ log p)
        return [float(max(p, key=lambda r: r["sum_logp"])["correct"]) if p else 0.0 for p in records]
    if rule == "majority":  # the most frequent extracted answer (ties: the first sample's answer wins)
        scores = []
        for p in records:
            answers = [r["predicted"] for r in p if r["predicted"] is not None]
            top = Counter(answers).most_common(1)[0][0] if answers else None
            scores.append(float(next(r["correct"] for r in p if r["predicted"] == top)) if answers else 0.0)
        return scores
    raise ValueError(f"Unknown rule {rule!r}; use 'mean', 'best_of_n' or 'majority'.")


def best_of_n(records: Sequence[Sequence[dict]]) -> float:
    """Accuracy when each problem keeps the sample the model itself finds most likely (largest Σ log p)."""
    picks = per_problem(records, "best_of_n")
    return sum(picks) / len(picks) if picks else 0.0


def majority_vote(records: Sequence[Sequence[dict]]) -> float:
    """Accuracy of the most frequent extracted answer per problem (ties: the first sample's answer wins)."""
    wins = per_problem(records, "majority")
    return sum(wins) / len(wins) if wins else 0.0


OUTCOMES = ("correct", "wrong answer", "no answer", "ending replaced", "cut off")


def outcome(record: dict, cap: int | None = None) -> str:
    """How a sample ended. An unfinished sample is "cut off" where it ran to the token limit `cap`, "ending replaced"
    where it ended short of it: an MH chain (reference mode) whose last block's move swapped a finished ending for a
    proposal regenerated only up to the current length that had not finished there, with no block left to finish
    it (without `cap`, every unfinished sample counts as cut off). A sample that finished is "correct", a "wrong
    answer" or "no answer". Unfinished comes first: an unfinished answer the grader credits (its text already holds
    the right number) is counted as unfinished here, so "correct" is right among the finished, never the cap's."""
    if not record["stopped"]:
        return "cut off" if cap is None or record["n_tokens"] >= cap else "ending replaced"
    if record["correct"]:
        return "correct"
    return "no answer" if record["predicted"] is None else "wrong answer"


UNFINISHED = ("ending replaced", "cut off")


def ended(records: Sequence[Sequence[dict]], cap: int | None = None) -> list[list[str]]:
    """How each sample ended (`outcome`), per problem."""
    return [[outcome(r, cap) for r in per_problem] for per_problem in records]


def outcome_shares(records: Sequence[Sequence[dict]], cap: int | None = None) -> dict[str, float]:
    """The share of samples (over problems and seeds) that ended each way in `OUTCOMES`."""
    flat = [outcome(r, cap) for per_problem in records for r in per_problem]
    return {name: (flat.count(name) / len(flat) if flat else 0.0) for name in OUTCOMES}


def cost_per_problem(records: Sequence[Sequence[dict]], field: str = "decoded_tokens") -> list[float]:
    """Each problem's mean cost per sample: its decoded tokens (rejected proposals included), or with `field`
    'seconds' its share of the wall time."""
    return [sum(float(r.get(field) or 0.0) for r in p) / len(p) if p else 0.0 for p in records]


def tokens_per_problem(records: Sequence[Sequence[dict]]) -> float:
    """Decoded tokens per problem and sample, rejected proposals included."""
    flat = [r["decoded_tokens"] for per_problem in records for r in per_problem]
    return sum(flat) / len(flat) if flat else 0.0
