"""Chapter 02: each model solves the problems greedily, the logit lens reads the solutions, the rules pick cuts.

The pipeline, shared with chapter 03, is `helpers.evaluation.solutions.solutions_and_lens`: the same decode and the
same lens records.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from helpers.data.problems import Problem
from helpers.data.prompts import build_prompt
from helpers.data.sequences import solution_sequence
from helpers.evaluation.cost import model_size
from helpers.evaluation.decodes import accuracy
from helpers.evaluation.solutions import solutions_and_lens
from helpers.interp.lens import depth_ratio, lens_cut_points
from helpers.interp.studies import lens_explorer_table, lens_over_problems
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
               explorer_positions: int, dtype: str = "auto") -> LensStudy:
    """For each model: solve, read the lens over its own (and, where given, the gold) solutions, find the cuts."""
    study = LensStudy()
    for name in models:
        model = load_model(name, dtype=dtype)
        tokenizer, info = model.tokenizer, model.info
        solved = solutions_and_lens(model, problems, max_new_tokens=max_new_tokens, shots=shots,
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
            study.explorer = lens_explorer_table(model, solved.items[pick], n_positions=explorer_positions)
            study.explorer_question = problems[pick].question
        del model
    return study


def by_level(problems: Sequence[Problem], records: Sequence[dict]) -> dict[int, tuple[int, int]]:
    """(correct, total) greedy solutions per difficulty level, in level order (problems without a level: 0)."""
    out: dict[int, list[int]] = {}
    for p, r in zip(problems, records, strict=True):
        tally = out.setdefault(p.level or 0, [0, 0])
        tally[0] += bool(r["correct"])
        tally[1] += 1
    return {level: (c, n) for level, (c, n) in sorted(out.items())}


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


def size_marks(study: LensStudy, models: Sequence[str]) -> dict[str, dict[str, int]]:
    """`effective_depth_marks` for the given models only."""
    marks = effective_depth_marks(study)
    return {m: marks[m] for m in models}
