"""Chapter 02: each model solves the problems greedily, the logit lens reads the solutions, the rules pick cuts.

The pipeline, shared with chapter 03, is `helpers.evaluation.solutions.solutions_and_lens`: the same decode and the
same lens records.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from helpers.chapters.exercises import layer_name, rerun_command
from helpers.data.problems import Problem, build_prompt
from helpers.data.sequences import solution_sequence
from helpers.evaluation.cost import model_size
from helpers.evaluation.decodes import accuracy
from helpers.evaluation.solutions import solutions_and_lens
from helpers.evaluation.stats import percent_with_interval
from helpers.interp.lens import (
    depth_ratio,
    lens_cut_points,
    lens_table,
)
from helpers.interp.studies import lens_over_problems
from helpers.models.loading import load_model, stop_token_ids
from helpers.models.registry import KNOWN_MODELS
from helpers.models.wheels import gguf_head


@dataclass
class LensStudy:
    """Everything chapter 02 shows: curves per model, a summary row per model, one explorer's arrays."""

    curves: dict[str, dict[str, np.ndarray]] = field(default_factory=dict)
    gold_curves: dict[str, dict[str, np.ndarray]] = field(default_factory=dict)
    summary: list[dict] = field(default_factory=list)
    explorer: dict | None = None
    explorer_question: str = ""


def lens_study(models: Sequence[str], problems: Sequence[Problem], *, max_new_tokens: int, shots: int,
               batch_size: int, kl_fraction: float, overlap_threshold: float,
               explorer_positions: int) -> LensStudy:
    """For each model: solve, read the lens over its own (and, where given, the gold) solutions, find the cuts."""
    study = LensStudy()
    for name in models:
        model, tokenizer, info = load_model(name)
        solved = solutions_and_lens(model, tokenizer, problems, max_new_tokens=max_new_tokens, shots=shots,
                                    batch_size=batch_size)
        study.curves[name] = solved.curves
        if all(p.solution for p in problems):
            stop = stop_token_ids(model, tokenizer)[0]
            gold = [(p.id, *solution_sequence(tokenizer, build_prompt(tokenizer, p.question, shots=shots),
                                         solution_text=p.solution, stop_id=stop)) for p in problems]
            study.gold_curves[name] = lens_over_problems(model, gold)
        kl, ov = solved.curves["kl"].mean(0), solved.curves["overlap"].mean(0)
        ed_kl, ed_ov, cuts = lens_cut_points(solved.curves, kl_fraction, overlap_threshold)
        study.summary.append({
            "model": name, "layers": info.n_layers, "width": info.hidden_size, "size": model_size(model.config),
            "ed_kl": ed_kl, "ed_overlap": ed_ov,
            "ratio_kl": depth_ratio(ed_kl, info.n_layers), "ratio_overlap": depth_ratio(ed_ov, info.n_layers),
            "accuracy": accuracy(solved.records), "kl_max": float(kl.max()), "kl_max_layer": int(kl.argmax()),
            "kl_last_tap": float(kl[-1]), "overlap_last_tap": float(ov[-1]), "cuts": cuts,
            "solution_tokens": float(np.mean([r["n_tokens"] for r in solved.records])),
            "by_level": by_level(problems, solved.records),
            "cut_off": sum(not r["stopped"] for r in solved.records), "n_problems": len(solved.records),
            "tied": bool(getattr(model.config, "tie_word_embeddings", False)),
            "family": str(getattr(model.config, "model_type", name))})
        if study.explorer is None:  # the first problem the model got right, else the first problem
            pick = next((i for i, r in enumerate(solved.records) if r["correct"]), 0)
            study.explorer = lens_table(model, tokenizer, solved.items[pick][1], solved.items[pick][2],
                                        n_positions=explorer_positions)
            study.explorer_question = problems[pick].question
        del model
    return study


def result_values(study: LensStudy, n_problems: int) -> dict:
    """The numbers and the peak sentence the chapter's result paragraph glues (first model)."""
    first = study.summary[0]
    if first["kl_max_layer"] == 0:
        peak = ("The maximum sits at the embedding itself (layer 0)"
                + (", because this model ties its input and output embeddings: read through the unembedding, the "
                   "embedding of a token mostly predicts that same token again, which is far from the real next-token "
                   "distribution. " if first["tied"] else ". ")
                + "The half-maximum rule is therefore anchored on layer 0, the artefact that Hu et al. also report "
                  "for one of their models.")
    else:
        peak = f"The maximum sits at layer {first['kl_max_layer']}, inside the network."
    return {"model": first["model"], "n_layers": first["layers"], "n_problems_total": n_problems,
            "greedy_accuracy": 100 * first["accuracy"], "solution_tokens": first["solution_tokens"],
            "kl_max": first["kl_max"], "kl_max_layer": first["kl_max_layer"], "kl_last_tap": first["kl_last_tap"],
            "overlap_last_tap": first["overlap_last_tap"], "ed_kl": first["ed_kl"], "ed_overlap": first["ed_overlap"],
            "ratio_kl": first["ratio_kl"], "ratio_overlap": first["ratio_overlap"], "peak_sentence": peak,
            "cuts": ", ".join(str(c) for c in first["cuts"]) or "not defined (neither rule finds a layer)",
            "blocks_after_cut": first["layers"] - min(first["cuts"], default=first["layers"])}


EXERCISE_THRESHOLD = 0.5  # the overlap rule's threshold in exercise "a stricter overlap"
EXERCISE_FRACTION = 0.25  # the KL rule's fraction in the same exercise


def exercise_values(study: LensStudy, kl_fraction: float, overlap_threshold: float, profile: str) -> dict:
    """What the exercises' solutions quote (first model): the cut points under stricter rules, read from the
    chapter's curves as a re-run with those parameters would give them."""
    curves, first = study.curves[study.summary[0]["model"]], study.summary[0]
    ed_kl, ed_ov, _ = lens_cut_points(curves, EXERCISE_FRACTION, EXERCISE_THRESHOLD)
    return {"rerun_command": rerun_command(profile, "02_logit_lens", overlap_threshold=EXERCISE_THRESHOLD,
                                           kl_fraction=EXERCISE_FRACTION),
            "ex_threshold": EXERCISE_THRESHOLD, "ex_fraction": EXERCISE_FRACTION, "ex_ed_overlap": layer_name(ed_ov),
            "ex_ed_kl": layer_name(ed_kl), "ex_ed_overlap_chapter": layer_name(first["ed_overlap"]),
            "ex_ed_kl_chapter": layer_name(first["ed_kl"]), "ex_tied": tied_sentence(first["model"], first["tied"])}


def tied_sentence(name: str, tied: bool) -> str:
    """Whether the weights this build runs tie the embeddings, and, for an embedded model, why its GGUF file makes
    them differ from the published checkpoint's (an output matrix stored and quantized on its own)."""
    entry, head = KNOWN_MODELS.get(name), gguf_head(name)
    runs = f"The weights of {name} this build runs {'tie' if tied else 'do not tie'} their embeddings"
    if entry is None or head is None or tied or not head["separate"]:
        return runs + "."
    upstream = "The published checkpoint ties them, but its" if entry.tied_upstream else "Its"
    return (f"{runs}. {upstream} GGUF file stores the output matrix as a tensor of its own, quantized to "
            f"{head['output']} where the token embedding is {head['embedding']}, so the two differ by their rounding "
            "and the loader keeps both.")


def by_level(problems: Sequence[Problem], records: Sequence[dict]) -> dict[int, tuple[int, int]]:
    """(correct, total) greedy solutions per difficulty level, in level order (problems without a level: 0)."""
    out: dict[int, list[int]] = {}
    for p, r in zip(problems, records, strict=True):
        tally = out.setdefault(p.level or 0, [0, 0])
        tally[0] += bool(r["correct"])
        tally[1] += 1
    return {level: (c, n) for level, (c, n) in sorted(out.items())}


def level_table(study: LensStudy) -> str:
    """Greedy accuracy per level and model with 95% intervals, and how many solutions hit the token limit."""
    levels = sorted({lv for s in study.summary for lv in s["by_level"]})
    head = "| model | " + " | ".join(f"level {lv}" for lv in levels) + " | cut off at the token limit |"
    rows = [head, "|---" * (len(levels) + 2) + "|"]
    for s in study.summary:
        cells = [percent_with_interval(c / n, n) if (c, n) != (0, 0) else "–"
                 for c, n in (s["by_level"].get(lv, (0, 0)) for lv in levels)]
        rows.append(f"| {s['model']} | " + " | ".join(cells) + f" | {s['cut_off']} of {s['n_problems']} |")
    return "\n".join(rows)


def summary_table(study: LensStudy) -> str:
    """One Markdown row per model: blocks, width, both effective depths, cut points, greedy accuracy."""
    rows = [f"| {s['model']} | {s['layers']} | {s['width']} | {s['ed_kl']} ({s['ratio_kl']:.2f}) | "
            f"{s['ed_overlap']} ({s['ratio_overlap']:.2f}) | {', '.join(map(str, s['cuts']))} | "
            f"{100 * s['accuracy']:.0f}% |" for s in study.summary]
    return "\n".join(["| model | blocks | width | KL ED (ratio) | overlap ED (ratio) | cut points | greedy accuracy |",
                      "|---|---|---|---|---|---|---|", *rows])


def gold_comparison(study: LensStudy, kl_fraction: float, overlap_threshold: float) -> tuple[dict, str]:
    """(curves of both texts by label, the sentence comparing their effective depths) for the first model."""
    if not study.gold_curves:
        return {}, "This problem set has no gold solutions, so only generated text was read."
    both = {}
    for name, gold in study.gold_curves.items():
        both[f"{name} · generated"] = study.curves[name]
        both[f"{name} · gold"] = gold
    first = study.summary[0]
    ed_kl, ed_ov, _ = lens_cut_points(study.gold_curves[first["model"]], kl_fraction, overlap_threshold)
    return both, (f"On the gold solutions the effective depths are layer {ed_kl} (KL) and layer {ed_ov} (overlap), "
                  f"against {first['ed_kl']} and {first['ed_overlap']} on the model's own solutions.")


def report_comparison(study: LensStudy) -> str:
    """Where the first model's KL rule settles, set beside the report's and Hu et al.'s Qwen2.5-Math numbers."""
    s = study.summary[0]
    ratio = s["ratio_kl"]
    relation = ("earlier in relative depth than" if ratio < 0.78 else "at a similar relative depth to" if ratio <= 0.9
                else "later in relative depth than")
    return (f"For {s['model']} the KL rule settles at ratio {ratio:.2f}, {relation} the Qwen2.5-Math models "
            f"(0.82 and 0.86 in Hu et al.; layers 21–25 of 28, ratio 0.75–0.89, in the report); the overlap rule "
            f"gives {s['ratio_overlap']:.2f} against 0.86 and 0.89.")


def effective_depth_marks(study: LensStudy) -> dict[str, dict[str, int]]:
    """The layers the lens figure marks for each model: both effective depths."""
    return {s["model"]: {f"KL ED={s['ed_kl']}": s["ed_kl"], f"overlap ED={s['ed_overlap']}": s["ed_overlap"]}
            for s in study.summary}


@dataclass(frozen=True)
class SizeContrast:
    """The report's Figure 1 question for two sizes of one family, read on the same problems: where each model's KL
    drops (the KL rule's effective depth as a share of its depth) and how abruptly (the largest fall across one
    block as a share of the whole fall), with paired bootstrap intervals over problems for larger minus smaller."""

    small: str
    large: str
    layers: tuple[int, int]
    drop: tuple[float, float]  # (ED + 1) / L by the KL rule, smaller and larger model
    steepest: tuple[float, float]  # largest one-block fall of the mean KL / (its maximum − its last tap)
    drop_interval: tuple[float, float]  # 95% paired bootstrap interval of larger − smaller
    steep_interval: tuple[float, float]
    n_problems: int


def size_pair(study: LensStudy) -> tuple[str, str] | None:
    """The smallest and largest model (by `model_size`) of the first family this build runs at two sizes, or None."""
    by_family: dict[str, list[dict]] = {}
    for s in study.summary:
        by_family.setdefault(s["family"], []).append(s)
    for members in by_family.values():
        sizes = sorted(members, key=lambda s: s["size"])
        if len(sizes) > 1 and sizes[0]["size"] < sizes[-1]["size"]:
            return sizes[0]["model"], sizes[-1]["model"]
    return None


def _drop_and_steepness(kl: np.ndarray, kl_fraction: float) -> tuple[float, float]:
    """(the KL rule's (ED + 1) / L, the largest one-block fall / the whole fall) of a mean KL curve."""
    from helpers.interp.lens import effective_depth_kl

    curve = kl.mean(0)
    whole = float(curve.max() - curve[-1])
    falls = curve[:-1] - curve[1:]
    return depth_ratio(effective_depth_kl(curve, kl_fraction), len(curve)), float(falls.max() / whole) if whole > 0 else 0.0


def size_contrast(study: LensStudy, kl_fraction: float, n_boot: int = 2000, seed: int = 0) -> SizeContrast | None:
    """The two sizes' drop and steepness with paired bootstrap intervals (problems resampled together for both
    models, each reading its own solution of the same problem); None where the build runs one size per family."""
    pair = size_pair(study)
    if pair is None:
        return None
    small, large = (np.asarray(study.curves[m]["kl"]) for m in pair)
    if small.shape[0] != large.shape[0]:
        raise ValueError(f"the two sizes read {small.shape[0]} and {large.shape[0]} problems; a paired contrast needs "
                         "the same problems for both")
    point = [_drop_and_steepness(k, kl_fraction) for k in (small, large)]
    rng = np.random.default_rng(seed)
    diffs = []
    for _ in range(n_boot):
        idx = rng.integers(0, small.shape[0], small.shape[0])
        (ds, ss), (dl, sl) = _drop_and_steepness(small[idx], kl_fraction), _drop_and_steepness(large[idx], kl_fraction)
        diffs.append((dl - ds, sl - ss))
    lo, hi = np.quantile(np.asarray(diffs), [0.025, 0.975], axis=0)
    return SizeContrast(pair[0], pair[1], (small.shape[1], large.shape[1]), (point[0][0], point[1][0]),
                        (point[0][1], point[1][1]), (float(lo[0]), float(hi[0])), (float(lo[1]), float(hi[1])),
                        small.shape[0])


def size_values(contrast: SizeContrast | None) -> dict:
    """The glued numbers and sentence of the two-size section: which model drops later and which more smoothly, said
    only where the paired interval excludes zero, and set beside the report's 7B against 1.5B."""
    if contrast is None:
        return {"size_sentence": "This build runs one size of each model family, so it has no two curves of one "
                                 "family to set side by side; the `full` profile runs Qwen2.5-Coder at 0.5B and 1.5B."}
    c = contrast
    (ds, dl), (ss, sl) = c.drop, c.steepest

    def direction(lo: float, hi: float, more: str, less: str) -> str | None:
        return more if lo > 0 else less if hi < 0 else None

    later = direction(*c.drop_interval, "later", "earlier")
    smoother = direction(*c.steep_interval, "more abrupt", "smoother")
    drop = (f"the larger model's KL drops {later} in relative depth" if later else
            "the two drops sit at relative depths these problems cannot tell apart")
    shape = (f"and the larger model's curve is {smoother}" if smoother else
             "and their steepness cannot be told apart")
    agrees = [later == "later", smoother == "smoother"]
    verdict = ("as the report saw for Qwen2.5-Math-7B against 1.5B" if all(agrees) else
               "partly as the report saw for Qwen2.5-Math-7B against 1.5B (a later, smoother drop)" if any(agrees) else
               "where the report saw a later, smoother drop for Qwen2.5-Math-7B against 1.5B")
    sentence = (f"On the same {c.n_problems} problems, {c.large}'s KL falls below half its maximum at relative depth "
                f"{dl:.2f} against {ds:.2f} for {c.small} (paired 95% interval of the difference "
                f"[{c.drop_interval[0]:+.2f}, {c.drop_interval[1]:+.2f}]), and its steepest fall across one block is "
                f"{100 * sl:.0f}% of its whole fall against {100 * ss:.0f}% (interval "
                f"[{100 * c.steep_interval[0]:+.0f}, {100 * c.steep_interval[1]:+.0f}] points): {drop}, {shape}, "
                f"{verdict}.")
    return {"size_small": c.small, "size_large": c.large, "size_drop_small": ds, "size_drop_large": dl,
            "size_steep_small": 100 * ss, "size_steep_large": 100 * sl, "size_sentence": sentence}


def size_marks(study: LensStudy, models: Sequence[str]) -> dict[str, dict[str, int]]:
    """`effective_depth_marks` for the given models only."""
    marks = effective_depth_marks(study)
    return {m: marks[m] for m in models}
