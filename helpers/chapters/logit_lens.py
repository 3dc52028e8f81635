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
            "model": name, "layers": info.n_layers, "width": info.hidden_size, "ed_kl": ed_kl, "ed_overlap": ed_ov,
            "ratio_kl": depth_ratio(ed_kl, info.n_layers), "ratio_overlap": depth_ratio(ed_ov, info.n_layers),
            "accuracy": accuracy(solved.records), "kl_max": float(kl.max()), "kl_max_layer": int(kl.argmax()),
            "kl_last_tap": float(kl[-1]), "overlap_last_tap": float(ov[-1]), "cuts": cuts,
            "solution_tokens": float(np.mean([r["n_tokens"] for r in solved.records])),
            "by_level": by_level(problems, solved.records),
            "cut_off": sum(not r["stopped"] for r in solved.records), "n_problems": len(solved.records),
            "tied": bool(getattr(model.config, "tie_word_embeddings", False))})
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
            "ex_ed_kl_chapter": layer_name(first["ed_kl"]), "ex_tied": "ties" if first["tied"] else "does not tie"}


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
