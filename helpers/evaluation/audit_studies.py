"""Audit stored studies against the model: compute each record again on the machine at hand and compare.

The decodes have their own audit (`helpers.evaluation.audit`); this one covers the studies built on them:

* logit lens (chapter 02): KL to the output and top-k overlap per layer, over a sequence's solution positions, and
  the lens explorer's table of one sequence (top tokens, their probabilities and the KL at each tap and position);
* agreement (chapter 03): a truncated model's KL to the full model and both models' NLL of the solution;
* chapter 01's studies of a gold text: its profile (norms, cosines, residual contributions and the lens per layer)
  and its layer-skip effects (at the same seeded split positions); and its erasure and integrated-gradients maps of
  the papers' two probes (the erasure baseline rebuilt from the gold texts its record names);
* critical depth (chapter 03): the stitched accuracies by depth, counted again from the released greedy decodes,
  and the collapse rule applied to them;
* toy convergence (chapter 04): the TV curves, run again from their seed.

A lens or agreement record names the sequence it read by a digest in its key: the audit rebuilds the candidates
from the problem the key names (the model's released greedy solutions after their prompts, and the gold solution)
and takes the one whose digest matches. Numbers are compared by relative deviation |a - b| / max(1, |b|), within
each kind's `tolerance` and `bfloat16_tolerance` (helpers/results/kinds.py; measured: the reproducibility page, "The
results release");
counts must match exactly.
"""

from __future__ import annotations

import math
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass

from helpers.core.progress import bar
from helpers.data.prompts import build_prompt
from helpers.data.sequences import analysis_sequence, solution_sequence
from helpers.data.sources import load_problems
from helpers.evaluation.audit import (
    AuditReport,
    Finding,
    audit,
    auditable,
    fresh_model,
    problem_from_id,
    record_label,
)
from helpers.models.handle import ModelHandle
from helpers.models.loading import stop_token_ids
from helpers.models.truncation import critical_depth
from helpers.results.identity import key_name, sequence_key
from helpers.results.kinds import KINDS, STUDIES, named

IDENTITY = ("weights", "depth", "truncation", "dtype")


def reason(record: dict) -> str | None:
    """Why a stored record cannot be audited here (None: it can), for decodes and studies alike."""
    kind = record.get("experiment")
    if kind == "decode":
        return auditable(record)
    if kind not in STUDIES:
        return f"{kind} records (the audit does not compute them again yet)"
    again = recompute(kind)
    for m in again.models(record.get("config", {})):
        if not str(m.get("source", "")).startswith("embedded:"):
            return "studies of models that are not embedded"
        if m.get("dtype") != "float32" and KINDS[kind].tolerance_in(m.get("dtype")) is None:
            return f"{m.get('dtype')} {kind} studies (no tolerance is measured for them)"
    if again.reads_problem and problem_from_id(_problem_id(record)) is None:
        return "studies of problems other than the arithmetic benchmark"
    return None


def split_auditable(records: Iterable[dict]) -> tuple[list[dict], Counter]:
    """The records that can be audited here, and how many cannot, by reason (`reason`)."""
    auditable, skipped = [], Counter()
    for record in records:
        if why := reason(record):
            skipped[why] += 1
        else:
            auditable.append(record)
    return auditable, skipped


def audit_records(records: Iterable[dict], decodes: Sequence[dict], progress: bool = True,
                  on_finding: Callable[[Finding], None] | None = None,
                  load: Callable[[str, str], ModelHandle] = fresh_model) -> AuditReport:
    """Audit decodes and studies together: `decodes` are the released (or stored) decode records a study's
    sequences and accuracies are rebuilt from. Records that cannot be audited are counted with the reason;
    `on_finding` receives each record's finding as soon as it exists; `load` gives the models (`audit.fresh_model`)."""
    auditable, skipped = split_auditable(records)
    chosen = [r for r in auditable if r["experiment"] == "decode"]
    studies = [r for r in auditable if r["experiment"] != "decode"]
    report = audit(chosen, progress=progress, on_finding=on_finding, load=load)
    more = audit_studies(studies, decodes, progress=progress, on_finding=on_finding, load=load)
    report.findings += more.findings
    report.seconds += more.seconds
    for why, n in skipped.items():
        report.skipped[why] = report.skipped.get(why, 0) + n
    return report


def audit_studies(records: Sequence[dict], decodes: Sequence[dict], progress: bool = True,
                  on_finding: Callable[[Finding], None] | None = None,
                  load: Callable[[str, str], ModelHandle] = fresh_model) -> AuditReport:
    """Compute every study record again (models load once per name and number format) and compare;
    `on_finding` receives each finding as soon as it exists."""
    import time

    start = time.perf_counter()
    report = AuditReport()
    solutions, graded = _greedy_solutions(decodes), _greedy_grades(decodes)
    by_model: dict[tuple, list[dict]] = defaultdict(list)
    for record in records:
        again = recompute(record["experiment"])
        model = again.models(record["config"])[0] if again.loads else {}  # the one loaded
        by_model[(model.get("model", ""), model.get("dtype", ""))].append(record)  # ("", ""): no model needed
    with bar(total=len(records), desc="audit studies", unit="record", progress=progress) as shown:
        for (name, dtype), group in sorted(by_model.items()):
            loaded = load(name, dtype) if name else None
            for record in group:
                f = Finding(record_label(record), kind=record["experiment"])
                try:
                    recompute(f.kind).run(record, Context(loaded, solutions, graded, load), f)
                except (KeyError, TypeError, ValueError) as err:  # a record too malformed to compute from
                    f.problems.append(f"it cannot be computed again from what it says ({type(err).__name__}: {err})")
                allowed = KINDS[f.kind].tolerance_in(dtype)
                if not f.deviation <= allowed:
                    f.problems.append(f"its numbers deviate by {f.deviation:.2e} from this machine's (tolerance "
                                      f"{allowed:g})")
                report.findings.append(f)
                if on_finding:
                    on_finding(f)
                shown.update(1)
            del loaded
    report.seconds = time.perf_counter() - start
    return report


@dataclass(frozen=True)
class Context:
    """What every recomputation may read: the model loaded for its group (None where none is needed), the released
    greedy solutions by (model, problem) and their grades (`_greedy_grades`)."""

    loaded: ModelHandle | None
    solutions: dict
    graded: dict
    load: Callable[[str, str], ModelHandle] = fresh_model  # for a study that loads its models itself (the linear maps)


@dataclass(frozen=True)
class Recompute:
    """How the audit computes one kind of study again: `models`, the model configurations a record names (each must
    be an embedded model in a format with a measured tolerance); `loads`, whether it needs the first of them loaded;
    `reads_problem`, whether its key names a benchmark problem whose text it needs; `run`, which sets the finding's
    deviation or says what is wrong."""

    models: Callable[[dict], list[dict]]
    loads: bool
    reads_problem: bool
    run: Callable[[dict, Context, Finding], None]


def _no_model(c: dict) -> list[dict]:
    return []


def _its_model(c: dict) -> list[dict]:
    return [c]


def _models_under(*keys: str):
    """The models a study's configuration names under `keys`, in that order (an empty one where a key is absent)."""
    def models(c: dict) -> list[dict]:
        return [c.get(k, {}) for k in keys]
    return models


_both_models = _models_under("full", "truncated")


def _toy_again(record: dict, ctx: Context, f: Finding) -> None:
    f.deviation = _deviation(record["result"], _toy(record["config"]))


def _critical_again(record: dict, ctx: Context, f: Finding) -> None:
    _critical(record["config"], record["result"], ctx.graded, f)


def _probe_again(record: dict, ctx: Context, f: Finding) -> None:
    f.deviation = _probe(_model_as(ctx.loaded, record["config"], f, "model"), ctx.loaded.tokenizer, record, f)


def _maps_again(record: dict, ctx: Context, f: Finding) -> None:
    """Chapter 01's linear maps, fitted again on the problems the record names, each model loaded as it names it."""
    from helpers.interp.layer_maps import fit_layer_maps

    c, result = record["config"], record["result"]
    problems = [problem_from_id(pid) for pid in result["problems"]]
    if any(p is None for p in problems):
        f.problems.append("it names problems other than the arithmetic benchmark's")
        return

    def load(name: str) -> ModelHandle:
        side = c["source"] if name == c["source"]["model"] else c["target"]
        model = ctx.load(name, side["dtype"])
        _model_as(model, side, f, "source" if side is c["source"] else "target")
        return model

    f.deviation = _deviation(result, fit_layer_maps([c["source"]["model"], c["target"]["model"]], problems,
                                                    c["map_tokens"], load))


def _gold_again(record: dict, ctx: Context, f: Finding) -> None:
    """Chapter 01's studies of a problem's gold text: its profile, or its layer-skip effects at the seeded splits."""
    from helpers.interp.depth import profile_one, skip_splits
    from helpers.interp.skip_effects import skip_effects

    c, pid = record["config"], _problem_id(record)
    full = _model_as(ctx.loaded, c, f, "model")
    ids, start = analysis_sequence(ctx.loaded.tokenizer, problem_from_id(pid))
    if sequence_key(pid, ids, start) != record["key"]:
        f.problems.append("its key does not name the gold text of the problem it names")
        return
    if record["experiment"] == "depth_profile":
        f.deviation = _deviation(record["result"], profile_one(full, ids))
        return
    n_splits = None if c["splits"] == "current" else c["splits"]
    splits = skip_splits(record["experiment"], ids, start, pid, n_splits, c["seed"])
    f.deviation = _deviation(record["result"], skip_effects(full, ids, c.get("part", "layer"), splits).as_dict())


def _solution_read(record: dict, ctx: Context, f: Finding, model_name: str) -> tuple[list[int], int] | None:
    """The sequence a lens or agreement record read: the released greedy solution or gold text its key names."""
    model, tokenizer = ctx.loaded.module, ctx.loaded.tokenizer
    found = _sequence(record["key"], _problem_id(record), model_name, tokenizer, ctx.solutions,
                      stop_token_ids(model, tokenizer)[0])
    if found is None:
        f.problems.append("no released greedy solution of its model, nor the gold solution, is the sequence its key "
                          "names")
    return found


def _lens_again(record: dict, ctx: Context, f: Finding) -> None:
    from helpers.interp.studies import lens_record

    c = record["config"]
    full = _model_as(ctx.loaded, c, f, "model")
    if found := _solution_read(record, ctx, f, c["model"]):
        f.deviation = _deviation(record["result"], lens_record(full, *found, c["k"], c["direction"]))


RANK_TIE = 1e-4  # two lens probabilities this close are a tie that rounding may order either way (the lens's
# largest measured deviation between machines is ~3e-5, relative to max(1, p))


def _table_again(record: dict, ctx: Context, f: Finding) -> None:
    """The lens explorer's table, computed again with one rank more than stored: its numbers must agree within the
    kind's tolerance, and each stored top token must be the recomputed token at its rank, or one tied with it
    (`_ranked_deviation`)."""
    from helpers.interp.lens import lens_table

    c, stored = record["config"], record["result"]
    full = _model_as(ctx.loaded, c, f, "model")
    if not (found := _solution_read(record, ctx, f, c["model"])):
        return
    again = lens_table(full, ctx.loaded.tokenizer, *found, c["n_positions"], c["n_top"] + 1)
    ranked = {"top_probs": [[p[:-1] for p in layer] for layer in again["top_probs"]]}
    f.deviation = max(_deviation({k: stored.get(k) for k in ("tokens", "kl", "top_probs")},
                                 {"tokens": again["tokens"], "kl": again["kl"], **ranked}),
                      _ranked_deviation(stored, again))


def _ranked_deviation(stored: dict, again: dict, tie: float = RANK_TIE) -> float:
    """How far the stored top tokens are from the recomputed ones (`again`, one rank more): 0 where each position's
    tokens are the recomputed ones rank by rank, or differ only where tokens whose recomputed probabilities lie within
    `tie` of each other trade places (across the last stored rank too, with the one extra rank); else inf. Each
    recomputed entry matches one stored token at most, so a token stored twice fails."""
    try:
        for layer, again_layer, again_probs in zip(stored["top_tokens"], again["top_tokens"], again["top_probs"],
                                                   strict=True):
            for top, tokens, probs in zip(layer, again_layer, again_probs, strict=True):
                if len(top) != len(tokens) - 1 or not _tied_match(top, tokens, probs, tie):
                    return math.inf
    except (KeyError, TypeError, ValueError):  # zip(strict=True) raises ValueError on lengths that differ
        return math.inf
    return 0.0


def _tied_match(top: list, tokens: list, probs: list[float], tie: float) -> bool:
    """Whether stored tokens `top` are `tokens` rank by rank up to swaps of tied ranks, one recomputed entry each."""
    used: set[int] = set()
    for rank, token in enumerate(top):
        if rank < len(tokens) and tokens[rank] == token and rank not in used:
            used.add(rank)
            continue
        tied = [j for j, t in enumerate(tokens) if t == token and j not in used
                and abs(probs[j] - probs[rank]) <= tie]  # NaN compares False: never tied
        if not tied:
            return False
        used.add(tied[0])
    return True


def _agreement_again(record: dict, ctx: Context, f: Finding) -> None:
    from helpers.interp.studies import agreement

    c = record["config"]
    full, truncated = (_model_as(ctx.loaded, c[side], f, side) for side in ("full", "truncated"))
    if found := _solution_read(record, ctx, f, c["full"]["model"]):
        f.deviation = _deviation(record["result"], agreement(full, truncated, *found))


# How each study kind is computed again; its entry in helpers/results/kinds.py names one of these.
LENS_AGAIN = Recompute(_its_model, True, True, _lens_again)
TABLE_AGAIN = Recompute(_its_model, True, True, _table_again)
AGREEMENT_AGAIN = Recompute(_both_models, True, True, _agreement_again)
GOLD_AGAIN = Recompute(_its_model, True, True, _gold_again)  # chapter 01's profile, skip effects and depth score
PROBE_AGAIN = Recompute(_its_model, True, False, _probe_again)
TOY_AGAIN = Recompute(_no_model, False, False, _toy_again)
MAPS_AGAIN = Recompute(_models_under("source", "target"), False, False, _maps_again)  # loads each model of the pair itself, one at a time
CRITICAL_AGAIN = Recompute(_its_model, False, False, _critical_again)  # counted from the decodes of its model


def recompute(kind: str) -> Recompute:
    """How the audit computes a study of `kind` again (its entry's `recompute`)."""
    return named(KINDS[kind].recompute)


def _probe(model, tokenizer, record: dict, f: Finding) -> float:
    """An erasure or integrated-gradients map of a probe, computed again; its deviation (0 where it cannot be)."""
    from helpers.data.sequences import PROBES, probe_sequence
    from helpers.interp.erasure import mean_residual
    from helpers.interp.probes import parse_unit, probe_record, probe_rows

    c, name = record["config"], _problem_id(record)
    kind, component, stride = parse_unit(name)
    found = next(((ids, start) for ids, start in (probe_sequence(tokenizer, p, a) for p, a in PROBES)
                  if sequence_key(name, ids, start) == record["key"]), None)
    if found is None:
        f.problems.append("its key names neither of the papers' probes")
        return 0.0
    baseline = None
    if kind == "erasure":
        texts = []
        for key in c["baseline"]:
            problem = problem_from_id(key_name(key))
            texts.append(analysis_sequence(tokenizer, problem) if problem else None)
            if texts[-1] is None or sequence_key(problem.id, *texts[-1]) != key:
                f.problems.append(f"its baseline names {key}, which is no gold text here")
                return 0.0
        baseline = mean_residual(model, [ids for ids, _ in texts])
    rows = probe_rows(model.config.num_hidden_layers, stride)
    return _deviation(record["result"], probe_record(model, *found, kind, component, rows, baseline, c["ig_steps"]))


def _model_as(model: ModelHandle, identity: dict, f: Finding, what: str):
    """The module of `model` cut as `identity` says, its identity checked against the record's."""
    cut = model.at_depth(identity["depth"], identity.get("truncation") or "stitch")
    here = cut.identity()
    for k in IDENTITY:
        if identity.get(k) != here.get(k):
            f.problems.append(f"its {what}'s {k} is {identity.get(k)!r}, the model here has {here.get(k)!r}")
    return cut.module


def _problem_id(record: dict) -> str:
    return key_name(str(record.get("key", "")))


def _greedy_solutions(decodes: Sequence[dict]) -> dict[tuple[str, str], list[dict]]:
    """(model, problem id) -> that model's greedy decodes at its full depth: the solutions chapters 02-03 read."""
    out: dict[tuple[str, str], list[dict]] = defaultdict(list)
    for r in decodes:
        c = r.get("config", {})
        if r.get("experiment") == "decode" and c.get("method") == "greedy" and c.get("truncation") is None:
            out[(c.get("model"), r.get("result", {}).get("id"))].append(r)
    return out


def _sequence(key: str, pid: str, model: str, tokenizer, solutions: dict, stop: int) -> tuple[list[int], int] | None:
    """The (ids, start) whose digest `key` holds, among the candidates rebuilt for problem `pid`."""
    for ids, start in _candidates(pid, model, tokenizer, solutions, stop):
        if sequence_key(pid, ids, start) == key:
            return ids, start
    return None


def _candidates(pid: str, model: str, tokenizer, solutions: dict, stop: int) -> Iterator[tuple[list[int], int]]:
    """Prompt + each released greedy solution of `model` for the problem; then prompt + the gold solution."""
    problem = problem_from_id(pid)
    shots = []
    for r in solutions.get((model, pid), []):
        s = r["config"]["shots"]
        prompt = build_prompt(tokenizer, problem.question, shots=s)
        shots.append(s)
        yield solution_sequence(tokenizer, prompt, solution_tokens=r["result"]["tokens"])
    for s in sorted(set(shots)) if problem.solution else []:
        yield solution_sequence(tokenizer, build_prompt(tokenizer, problem.question, shots=s),
                                solution_text=problem.solution, stop_id=stop)


GRADED = ("model", "weights", "dtype", "max_new_tokens", "shots")  # what a critical depth's greedy decodes share


def _greedy_grades(decodes: Sequence[dict]) -> dict[tuple, dict[tuple, dict[str, bool]]]:
    """The greedy decodes' grades, indexed once: (`GRADED` settings) -> (depth, truncation) -> problem id -> right."""
    out: dict[tuple, dict[tuple, dict[str, bool]]] = defaultdict(lambda: defaultdict(dict))
    for r in decodes:
        d = r.get("config", {})
        if r.get("experiment") == "decode" and d.get("method") == "greedy":
            out[tuple(d.get(k) for k in GRADED)][(d.get("depth"), d.get("truncation"))][r["result"]["id"]] = \
                bool(r["result"]["correct"])
    return out


def _critical(c: dict, stored: dict, graded: dict, f: Finding) -> None:
    """The accuracies by depth, counted again from the greedy decodes of the sweep's problems, and the rule."""
    problems = load_problems(c["dataset"], n=c["n_problems"], levels=c["levels"], seed=c["seed"])
    correct = graded.get(tuple(c[k] for k in GRADED), {})
    accuracy = {}
    for text in stored["accuracy"]:
        depth = int(text)
        got = correct.get((depth, None if depth == c["depth"] else "stitch"), {})
        missing = [p.id for p in problems if p.id not in got]
        if missing:
            f.problems.append(f"no greedy decode at {depth} blocks of {len(missing)} of its problems ({missing[0]}, ...)")
            return
        accuracy[depth] = sum(got[p.id] for p in problems) / len(problems)
    full = accuracy[max(accuracy)]
    f.deviation = _deviation(stored, {"accuracy": {str(d): a for d, a in accuracy.items()}, "full_accuracy": full,
                                      "depth": critical_depth(accuracy, full, c["collapse_fraction"]),
                                      "n_problems": len(problems)})


def _toy(c: dict) -> dict:
    from helpers.results.kinds import TOY_CONVERGENCE
    from helpers.samplers.toy_curves import toy_curves

    now = dict(TOY_CONVERGENCE.revisions)
    if any(c.get(k) != v for k, v in now.items()):
        raise ValueError(f"it was computed with {({k: c.get(k) for k in now})}, this code draws with {now}")
    return toy_curves(c["alpha"], c["steps"], c["n_chains"], c["seed"], c["particles"], c["max_new_tokens"],
                      bool(c.get("acceptance")))


def _deviation(stored, computed) -> float:
    """The largest relative deviation of `stored` from `computed` (both nested dicts and lists of numbers); inf
    where their shapes, keys or counts differ, or a stored number is not finite where the computed one is."""
    if isinstance(computed, dict):
        if not isinstance(stored, dict) or set(stored) != {str(k) for k in computed}:
            return math.inf
        return max((_deviation(stored[str(k)], v) for k, v in computed.items()), default=0.0)
    if isinstance(computed, list | tuple):
        if not isinstance(stored, list) or len(stored) != len(computed):
            return math.inf
        return max((_deviation(a, b) for a, b in zip(stored, computed, strict=True)), default=0.0)
    if computed is None or isinstance(computed, str | bool):
        return 0.0 if stored == computed else math.inf
    if isinstance(computed, int) and not isinstance(stored, float):
        return 0.0 if stored == computed else math.inf
    if isinstance(stored, bool) or not isinstance(stored, int | float):
        return math.inf
    a, b = float(stored), float(computed)
    if math.isnan(a) and math.isnan(b):
        return 0.0
    return abs(a - b) / max(1.0, abs(b)) if math.isfinite(a) else math.inf
