"""Every decoding method of the book behind one call, with per-sample records kept in the results store.

Methods: greedy, temperature (T=1), low temperature (T=1/α), power sampling (block-wise MH towards
p^α, `helpers.power`) and SMC (K particles towards p^α, `helpers.smc`). Best-of-N by likelihood and majority vote are computed from temperature samples.
Records are keyed by (problem, sample index) and written as soon as each one ends; the store a
decode writes to is named by the model and the settings (`decode_settings`), so every chapter that asks for
the same decode reads the same records.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

from helpers.checks import is_count
from helpers.data import Problem, build_prompt
from helpers.decoding import Completion, decode
from helpers.grading import extract_answer, is_equivalent
from helpers.identity import model_identity, problem_key
from helpers.models import stop_token_ids
from helpers.power import CachedEngine, PowerConfig, run_chains
from helpers.progress import bar
from helpers.smc import SMCCompletion, SMCConfig, run_smc
from helpers.store import Run

METHODS = ("greedy", "temperature", "low_temperature", "power", "smc")
PROMPT_FORMAT = 1  # bump when `build_prompt` changes what a prompt looks like: stored decodes then recompute


def _record(problem: Problem, tokenizer, prompt: list[int], c: Completion) -> dict:
    text = tokenizer.decode(c.tokens, skip_special_tokens=True)
    predicted = extract_answer(text)
    record = {"id": problem.id, "level": problem.level, "gold": problem.answer, "text": text, "tokens": c.tokens,
              "prompt_tokens": len(prompt), "predicted": predicted, "correct": is_equivalent(predicted, problem.answer),
              "n_tokens": len(c.tokens), "sum_logp": c.sum_logp, "stopped": c.stopped,
              "decoded_tokens": c.decoded_tokens, "prefill_tokens": c.prefill_tokens,
              "acceptance": (sum(c.acceptance) / len(c.acceptance)) if c.acceptance else None}
    if isinstance(c, SMCCompletion):  # every particle's answer and weight, the returned one at `chosen`
        answers = [predicted if i == c.chosen else extract_answer(tokenizer.decode(p.tokens, skip_special_tokens=True))
                   for i, p in enumerate(c.particles)]  # the returned particle's text is decoded above already
        record.update(chosen=c.chosen, resamples=c.resamples, ess=c.ess, particles=[
            {"predicted": a, "correct": is_equivalent(a, problem.answer), "log_weight": w, "n_tokens": len(p.tokens),
             "sum_logp": p.sum_logp, "stopped": p.stopped}
            for a, w, p in zip(answers, c.log_weights, c.particles, strict=True)])
    return record


def sample_seed(base: int, problem_id: str, index: int) -> int:
    """The seed of sample `index` of a problem: fixed by (base seed, problem, index), not by batch composition."""
    return base * 1_000_003 + index * 10_007 + int.from_bytes(problem_id.encode()[-6:], "little") % 10_007


def decode_settings(method: str, *, max_new_tokens: int, shots: int = 0, seed: int = 0, alpha: float | None = None,
                    top_k: int = 0, power: PowerConfig | None = None, smc: SMCConfig | None = None) -> dict:
    """The settings of a decode that change its numbers (and nothing else), validated.

    Greedy decoding depends on no seed, α or top-k, so every chapter that decodes greedily with the same
    model, prompt and length shares one record set. Which problems and how many samples are asked for are
    not settings: records are stored per problem and sample, and a larger request reuses the smaller one's.
    """
    if method not in METHODS:
        raise ValueError(f"method must be one of {METHODS}, got {method!r}")
    if not is_count(max_new_tokens, 1):
        raise ValueError(f"max_new_tokens must be an integer of at least 1, got {max_new_tokens!r}")
    if not is_count(shots, 0):
        raise ValueError(f"shots must be an integer of at least 0, got {shots!r}")
    if not is_count(seed, 0):
        raise ValueError(f"seed must be an integer of at least 0, got {seed!r}")
    if not is_count(top_k, 0):
        raise ValueError(f"top_k must be 0 (off) or a positive integer, got {top_k!r}")
    if (power is not None) != (method == "power"):
        raise ValueError("power sampling needs power=PowerConfig(...), and only power sampling takes one")
    if (smc is not None) != (method == "smc"):
        raise ValueError("SMC needs smc=SMCConfig(...), and only SMC takes one")
    settings = {"method": method, "max_new_tokens": max_new_tokens, "shots": shots, "prompt_format": PROMPT_FORMAT}
    if method == "greedy":
        return settings
    if method == "power":
        power.validate(need_length=False)
        if power.max_new_tokens not in (None, max_new_tokens):
            raise ValueError(f"power.max_new_tokens ({power.max_new_tokens}) differs from max_new_tokens "
                             f"({max_new_tokens}); set one of them")
        return {**settings, "seed": seed, **power.as_dict()}
    if method == "smc":
        smc.validate(need_length=False)
        if smc.max_new_tokens not in (None, max_new_tokens):
            raise ValueError(f"smc.max_new_tokens ({smc.max_new_tokens}) differs from max_new_tokens "
                             f"({max_new_tokens}); set one of them")
        return {**settings, "seed": seed, **smc.as_dict()}
    if method == "low_temperature":
        if isinstance(alpha, bool) or not isinstance(alpha, int | float) or not 0 < alpha < math.inf:
            raise ValueError(f"low-temperature sampling draws at T = 1/alpha: alpha must be a positive, finite "
                             f"number, got {alpha!r}")
        return {**settings, "seed": seed, "alpha": float(alpha), "top_k": top_k}
    return {**settings, "seed": seed, "top_k": top_k}


def decode_run(model, settings: dict, root: Path | None = None) -> Run:
    """The store of one model's decodes under `settings` (from `decode_settings`)."""
    return Run("decode", {**model_identity(model), **settings}, root=root)


def sample(model, tokenizer, problems: Sequence[Problem], *, method: str, max_new_tokens: int, shots: int = 0,
           n_seeds: int = 1, seed: int = 0, alpha: float | None = None, top_k: int = 0,
           power: PowerConfig | None = None, smc: SMCConfig | None = None, batch_size: int = 16, progress: bool = True,
           root: Path | None = None) -> list[list[dict]]:
    """records[problem][sample] for `method`; missing ones are computed in batches and stored as they finish.

    The store key comes from the model (`model_identity`) and `decode_settings`; records are keyed by problem
    content and sample index. `alpha` is the low-temperature method's T = 1/α; power sampling takes all of its
    settings from `power`, SMC from `smc` (whose `batch_size` counts particles, rounded to whole problems).
    Every method runs through the same engine (`helpers.slot_engine.CachedEngine` unless `engine` names another).
    At most `batch_size` samples decode at once; a finished one is stored at once and its row goes to the next.
    Each record also carries `seconds`, its share of the wall time of the passes that computed it.
    """
    settings = decode_settings(method, max_new_tokens=max_new_tokens, shots=shots, seed=seed, alpha=alpha,
                               top_k=top_k, power=power, smc=smc)
    if method == "greedy":
        n_seeds = 1
    if not is_count(n_seeds, 1):
        raise ValueError(f"n_seeds must be an integer of at least 1, got {n_seeds!r}")
    if not is_count(batch_size, 1):
        raise ValueError(f"batch_size must be an integer of at least 1, got {batch_size!r}")
    given = power if power is not None else smc
    cfg = replace(given, max_new_tokens=max_new_tokens) if given is not None else None
    run = decode_run(model, settings, root)
    keys = {p.id: problem_key(p) for p in problems}
    if all(f"{keys[p.id]}#{s}" in run for p in problems for s in range(n_seeds)):
        return _stored(run, keys, problems, n_seeds)
    with run.locked():  # another process on the same decode: wait for it, then compute only what is missing
        _decode_missing(model, tokenizer, problems, run, keys, method, settings, cfg, max_new_tokens, shots, n_seeds,
                        seed, top_k, batch_size, progress)
    return _stored(run, keys, problems, n_seeds)


def _stored(run: Run, keys: dict, problems: Sequence[Problem], n_seeds: int) -> list[list[dict]]:
    return [[{**run.get(f"{keys[p.id]}#{s}"), "seconds": run.seconds(f"{keys[p.id]}#{s}")} for s in range(n_seeds)]
            for p in problems]


def _decode_missing(model, tokenizer, problems, run, keys, method, settings, cfg, max_new_tokens, shots, n_seeds,
                    seed, top_k, batch_size, progress) -> None:
    """Decode every missing (problem, sample) in one engine run of `batch_size` rows, storing each as it ends."""
    stops = stop_token_ids(model, tokenizer)
    jobs = [(p, s) for p in problems for s in range(n_seeds) if f"{keys[p.id]}#{s}" not in run]
    if not jobs:
        return
    prompts = [build_prompt(tokenizer, p.question, shots=shots) for p, _ in jobs]
    seeds = [sample_seed(seed, p.id, s) for p, s in jobs]
    done = bar(total=len(jobs), desc=method, progress=progress)

    def store(i: int, c: Completion) -> None:
        (p, s), prompt = jobs[i], prompts[i]
        run.add(f"{keys[p.id]}#{s}", _record(p, tokenizer, prompt, c), seconds=c.seconds, seed=s)
        done.update(1)

    with done:
        if method == "power":
            run_chains(CachedEngine(model), prompts, stops, cfg, seeds, batch_size=batch_size, on_done=store)
        elif method == "smc":
            run_smc(CachedEngine(model), prompts, stops, cfg, seeds, batch_size=batch_size, on_done=store)
        else:
            temperature = {"greedy": 0.0, "temperature": 1.0}.get(method, 1.0 / settings.get("alpha", 1.0))
            decode(model, prompts, max_new_tokens, stops, temperature, top_k, seeds, batch_size=batch_size,
                   on_done=store)


def solve(model, tokenizer, problems: Sequence[Problem], *, max_new_tokens: int, shots: int = 0,
          batch_size: int = 16, progress: bool = True, root: Path | None = None) -> list[dict]:
    """One greedy record per problem: the completion, its answer, whether it is right, what it cost."""
    records = sample(model, tokenizer, problems, method="greedy", max_new_tokens=max_new_tokens, shots=shots,
                     batch_size=batch_size, progress=progress, root=root)
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


OUTCOMES = ("correct", "wrong answer", "no answer", "cut off")


def outcome(record: dict) -> str:
    """How a sample ended: correct, a wrong answer, stopped without an answer, or cut off at the token limit."""
    if record["correct"]:
        return "correct"
    if not record["stopped"]:
        return "cut off"
    return "no answer" if record["predicted"] is None else "wrong answer"


def outcome_shares(records: Sequence[Sequence[dict]]) -> dict[str, float]:
    """The share of samples (over problems and seeds) that ended each way in `OUTCOMES`."""
    flat = [outcome(r) for per_problem in records for r in per_problem]
    return {name: (flat.count(name) / len(flat) if flat else 0.0) for name in OUTCOMES}


def tokens_per_problem(records: Sequence[Sequence[dict]]) -> float:
    """Decoded tokens per problem and sample, rejected proposals included."""
    flat = [r["decoded_tokens"] for per_problem in records for r in per_problem]
    return sum(flat) / len(flat) if flat else 0.0
