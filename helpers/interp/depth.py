"""How a model uses its depth, over a problem set: the analyses of Csordás et al. and Hu et al. (chapter 01).

Every analysis reads teacher-forced gold text ("Problem: …\nAnswer: <worked solution>", as Csordás et al.
do for MATH), keeps one record per problem in the results store (so long runs resume), and reduces the
records to per-layer curves only when asked, with the reduction as an argument.
"""

from __future__ import annotations

import math
import random
import zlib
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from helpers.core.progress import bar
from helpers.data.problems import Problem, by_level, interleaved
from helpers.data.sequences import analysis_sequence
from helpers.interp.lens import (
    depth_ratio,
    effective_depth_cosine,
    effective_depth_kl,
    effective_depth_overlap,
    logit_lens,
)
from helpers.interp.residual import CONTRIBUTION_METRICS, capture, contributions, reduce_layers, summarise
from helpers.interp.skip_effects import (
    SkipEffects,
    depth_score,
    future_splits,
    later_layer_profile,
    skip_effects,
)
from helpers.models.handle import ModelHandle
from helpers.results.identity import sequence_key
from helpers.results.kinds import DEPTH_PROFILE, DEPTH_SCORE, SKIP_EFFECTS, Kind
from helpers.results.shapes import Sized
from helpers.results.store import Run

COSINES = ("cos_attn", "cos_mlp", "cos_layer")

def analysis_run(kind: Kind, model: ModelHandle, root: Path | None = None, **settings) -> Run:
    """The stored records of one of this chapter's analyses, keyed by the model's identity and the analysis's
    own settings; each problem is a unit keyed by the tokens it reads (`analysis_key`)."""
    return Run(kind, {**model.identity(), **settings}, root=root)


def analysis_key(tokenizer, problem: Problem) -> str:
    """The unit key of a problem's gold text: its id and a digest of the tokens and the solution's start."""
    return sequence_key(problem.id, *analysis_sequence(tokenizer, problem))


def _lists(d: dict) -> dict:
    return {k: (v.tolist() if isinstance(v, np.ndarray) else v) for k, v in d.items()}


# --------------------------------------------------------------------------------------------------
# Norms, cosines and the logit lens: one record per problem
# --------------------------------------------------------------------------------------------------


_LAYERS = Sized(float, "depth")
SKIP_SHAPE = {"part": str, "splits": [(int, type(None))], "matrix": [Sized(_LAYERS, "depth")], "output": [_LAYERS],
              "matrix_mean": [Sized(_LAYERS, "depth")], "output_mean": [_LAYERS]}  # `SkipEffects.as_dict`, per layer
PROFILE_SHAPE = {name: {"sum": Sized(float, "depth"), "n": int, "max": Sized(float, "depth")}
                 for name in (*CONTRIBUTION_METRICS, "kl", "overlap")}  # per layer of the model that computed it


def profile_one(model, ids: Sequence[int]) -> dict:
    """Per-layer summaries (sum, count, max over positions) of every contribution metric and of the lens."""
    cap = capture(model, ids)
    values = contributions(cap)
    lens = logit_lens(model, ids, cap=cap)
    values["kl"], values["overlap"] = lens.kl, lens.overlap
    return {name: _lists(summarise(v)) for name, v in values.items()}


def profiles(model: ModelHandle, problems: Sequence[Problem], root: Path | None = None, progress: bool = True
             ) -> list[dict]:
    """`profile_one` for every problem's gold text, stored per problem as it finishes."""
    run = analysis_run(DEPTH_PROFILE, model, root)
    keys = [analysis_key(model.tokenizer, p) for p in problems]
    for key, p in bar(list(zip(keys, problems, strict=True)), desc="norms and lens", progress=progress):
        if key not in run:
            ids, _ = analysis_sequence(model.tokenizer, p)
            run.compute(key, lambda ids=ids: profile_one(model.module, ids))
    return run.get_many(keys)


def curves(records: Sequence[dict], how: str = "tokens") -> dict[str, np.ndarray]:
    """Per-layer curves of every metric, reduced over records; 'cos_mean' averages the three cosines."""
    out = {name: reduce_layers([r[name] for r in records], how) for name in (*CONTRIBUTION_METRICS, "kl", "overlap")}
    out["cos_mean"] = np.mean([out[c] for c in COSINES], axis=0)
    return out


def effective_depths(curve: dict[str, np.ndarray], kl_fraction: float = 0.5, overlap_threshold: float = 0.3
                     ) -> dict:
    """The three effective depths of Hu et al. (0-based layers) and their ratios (ED + 1)/L; None when undefined."""
    n_layers = len(curve["kl"])
    eds = {"cosine": effective_depth_cosine(curve["cos_mean"]),
           "kl": effective_depth_kl(curve["kl"], kl_fraction),
           "overlap": effective_depth_overlap(curve["overlap"], overlap_threshold)}
    return {"n_layers": n_layers, "effective_depth": {k: (v if v >= 0 else None) for k, v in eds.items()},
            "ratio": {k: (round(depth_ratio(v, n_layers), 3) if v >= 0 else None) for k, v in eds.items()},
            "thresholds": {"kl_fraction": kl_fraction, "overlap_threshold": overlap_threshold}}


# --------------------------------------------------------------------------------------------------
# Layer-skip effects over a problem set
# --------------------------------------------------------------------------------------------------


def skip_splits(study: str, ids: Sequence[int], start: int, problem_id: str, n_splits: int | None, seed: int
                ) -> list[int | None]:
    """Where a problem's skip study splits its gold text, fixed per problem whatever else runs (its id's crc32 is
    added to `seed`): for 'depth_score', `n_splits` positions inside the solution (`answer_splits`); for
    'skip_effects', `n_splits` sampled future splits (`future_splits`), or [None] (the current token) without any."""
    problem_seed = seed + zlib.crc32(problem_id.encode())
    if study == "depth_score":
        return answer_splits(start, len(ids), n_splits, seed=problem_seed)
    return [None] if n_splits is None else future_splits(len(ids), n_splits, seed=problem_seed)


def _skip_records(model: ModelHandle, problems: Sequence[Problem], run: Run, part: str, n_splits: int | None,
                  seed: int, desc: str, progress: bool) -> list[SkipEffects]:
    """Skip effects per problem at its `skip_splits` for the run's study, stored as each finishes."""
    keys = []
    for p in bar(problems, desc=desc, progress=progress):
        ids, start = analysis_sequence(model.tokenizer, p)
        keys.append(sequence_key(p.id, ids, start))
        if keys[-1] in run:
            continue
        splits = skip_splits(run.experiment, ids, start, p.id, n_splits, seed)
        run.compute(keys[-1], lambda ids=ids, splits=splits: skip_effects(model.module, ids, part, splits).as_dict())
    return [SkipEffects.from_dict(r) for r in run.get_many(keys)]


def skip_effects_over(model: ModelHandle, problems: Sequence[Problem], part: str, n_splits: int | None,
                      seed: int = 123, root: Path | None = None, progress: bool = True) -> list[SkipEffects]:
    """Skip effects per problem: future tokens with `n_splits` sampled split positions, or current (None)."""
    run = analysis_run(SKIP_EFFECTS, model, root, part=part, splits=n_splits if n_splits is not None else "current",
                       seed=seed)
    return _skip_records(model, problems, run, part, n_splits, seed, f"skip {part}", progress)


def combine(effects: Sequence[SkipEffects], over_splits: str = "max", over_prompts: str = "max"
            ) -> tuple[np.ndarray, np.ndarray]:
    """One [L, L] matrix and [L] output-change vector from per-problem effects ('max' as in the paper, or 'mean')."""
    pick = {"max": np.max, "mean": np.mean}
    if over_splits not in pick or over_prompts not in pick:
        raise ValueError("reductions are 'max' or 'mean'")
    mats = [pick[over_splits](e.matrix, axis=0) for e in effects]
    outs = [pick[over_splits](e.output, axis=0) for e in effects]
    return pick[over_prompts](mats, axis=0), pick[over_prompts](outs, axis=0)


def answer_splits(answer_start: int, T: int, n: int, seed: int, step: int = 4) -> list[int]:
    """Split positions inside the solution: answer start plus `n` seeded offsets from range(0, len − 4, step)."""
    offsets = list(range(0, max(1, T - answer_start - 4), step))
    random.Random(seed).shuffle(offsets)
    return sorted(answer_start + o for o in offsets[:n])


def depth_scores_by_level(model: ModelHandle, problems: Sequence[Problem], n_splits: int = 2, seed: int = 12345,
                          root: Path | None = None, progress: bool = True) -> dict:
    """Future layer-skip effects with splits inside the solution, and the depth score per difficulty level.

    Per level: the mean over problems of each skipped layer's effect on later layers (max over splits), its
    centre of mass over layers (the depth score), and the same for the output change; scores are also given
    divided by L − 1 so that models of different depth compare.
    """
    run = analysis_run(DEPTH_SCORE, model, root, splits=n_splits, seed=seed)
    records = _skip_records(model, problems, run, "layer", n_splits, seed, "depth score", progress)
    out = {}
    for level, effects in by_level(list(zip(problems, records, strict=True))).items():
        matrix, output = combine(effects, "max", "mean")
        L = matrix.shape[0]
        layer_profile = later_layer_profile(matrix)
        out[level] = {"n": len(effects), "layer_profile": layer_profile, "output_profile": output,
                      "layer_score": depth_score(layer_profile), "output_score": depth_score(output),
                      "layer_score_relative": depth_score(layer_profile) / (L - 1),
                      "output_score_relative": depth_score(output) / (L - 1)}
    return out


# --------------------------------------------------------------------------------------------------
# The command line: python -m helpers effective-depth
# --------------------------------------------------------------------------------------------------


def effective_depth_report(model_name: str, dataset: str = "arithmetic", n: int = 12, reduction: str = "tokens",
                           kl_fraction: float = 0.5, overlap_threshold: float = 0.3, seed: int = 0,
                           progress: bool = False, dtype: str = "auto") -> dict:
    """Everything `python -m helpers effective-depth` prints: effective depths, ratios and the layer count."""
    from helpers.data.problems import DataError
    from helpers.data.sources import load_problems
    from helpers.models.loading import load_model

    if not isinstance(n, int) or n < 1:
        raise DataError(f"--n must be a positive integer, got {n!r}")
    per_level = math.ceil(n / 6) if dataset == "arithmetic" else None
    problems = interleaved(load_problems(dataset, n=per_level if dataset == "arithmetic" else n, seed=seed), n)
    if not problems:
        raise DataError(f"{dataset} gave no problems")
    model = load_model(model_name, dtype=dtype)
    records = profiles(model, problems, progress=progress)
    report = effective_depths(curves(records, reduction), kl_fraction, overlap_threshold)
    return {"model": model.info.name, "dataset": dataset, "n_problems": len(problems), "reduction": reduction, **report}
