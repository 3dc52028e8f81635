"""Chapter 01: how a model uses its depth (Csordás et al.; Hu et al.), one call per section.

`study` runs every stored analysis for every model; the `*_values` functions turn one model's results into the
numbers and sentences the prose glues, and `helpers.plots.depth` draws each section's figure from the same results.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import cache

import numpy as np

from helpers.data.problems import Problem, interleaved, per_level
from helpers.data.sequences import PROBES, analysis_sequence, probe_sequence
from helpers.data.sources import load_problems
from helpers.interp.depth import (
    analysis_key,
    analysis_run,
    combine,
    curves,
    depth_scores_by_level,
    effective_depths,
    profiles,
    skip_effects_over,
)
from helpers.interp.erasure import mean_residual
from helpers.interp.probes import probe_record, probe_rows, probe_unit
from helpers.interp.skip_effects import later_layer_profile
from helpers.models.handle import ModelHandle, ModelInfo
from helpers.models.loading import load_model
from helpers.results.identity import digest, sequence_key
from helpers.results.kinds import ERASURE_IG, LAYER_MAPS
from helpers.results.store import Run

ERASURE_SHAPE = [[float]]  # a stored erasure / integrated-gradients record: one row of scores per position

RULES = ("cosine", "kl", "overlap")
ERASURE_THRESHOLD = 0.25  # an L2 change of the answer's distribution that is clearly visible (the maximum is √2)


@dataclass
class Selection:
    """The gold texts each analysis reads: a pool, and per-level subsets of it."""

    pool: list[Problem]
    problems: list[Problem]  # norms, cosines, lens
    skip: list[Problem]  # layer-skip heat-maps
    depth: list[Problem]  # depth score by level
    maps: list[Problem] = field(default_factory=list)  # the linear maps' texts: the pool, grown to their token budget

    def summary(self, dataset: str, models: Sequence[str]) -> str:
        return (f"{dataset}: {len(self.problems)} gold texts for norms and lens, {len(self.skip)} for layer skips, "
                f"{len(self.depth)} for depth scores; models: {', '.join(models)}")


MIN_TEXT_TOKENS = 40  # fewest tokens a gold text of the arithmetic set holds: how many texts a token budget needs


def select(dataset: str, levels, n_problems: int, n_skip_problems: int, n_depth_problems: int, seed: int,
           map_tokens: int = 0) -> Selection:
    """Problems for every analysis, drawn from one pool so that they overlap where they can; the linear maps read the
    pool grown (on the generated arithmetic set) to enough texts for `map_tokens` tokens, levels taken in turn, so
    that a map is not fitted on fewer tokens than its budget only because the other analyses need few texts."""
    needed = max(n_problems, n_depth_problems)
    pool = load_problems(dataset, n=needed if dataset == "arithmetic" else None, levels=levels, seed=seed)
    problems = per_level(pool, n_problems)
    maps = pool
    if dataset == "arithmetic" and map_tokens > 0:
        per = max(needed, -(-map_tokens // (MIN_TEXT_TOKENS * len({p.level for p in pool}))))
        maps = interleaved(load_problems(dataset, n=per, levels=levels, seed=seed), None)
    return Selection(pool, problems, interleaved(problems, n_skip_problems), per_level(pool, n_depth_problems),
                     maps)


@dataclass
class ModelStudy:
    """Every analysis of one model."""

    info: ModelInfo
    records: list[dict]
    curves: dict[str, np.ndarray]
    maxima: dict[str, np.ndarray]
    ed: dict
    ed_by_level: dict
    future: dict[str, list]  # part -> skip effects on future tokens
    current: list  # skip effects at every position
    depth: dict  # level -> depth-score profile and scores
    probes: list[dict] = field(default_factory=list)  # erasure and integrated gradients per probe

    @property
    def n_layers(self) -> int:
        return self.info.n_layers


def study(models: Sequence[str], sel: Selection, *, seed: int, reduction: str, kl_fraction: float,
          overlap_threshold: float, skip_parts: Sequence[str], n_splits: int, depth_splits: int, ig_steps: int,
          ig_components: Sequence[str], probe_stride: int, dtype: str = "auto") -> dict[str, ModelStudy]:
    """Run (or read from the store) every analysis of the chapter for every model."""
    results = {}
    for name in models:
        model = load_model(name, dtype=dtype)
        info = model.info
        records = profiles(model, sel.problems)
        levels = sorted({p.level for p in sel.problems}, key=lambda v: (v is None, v))
        by_level = {lvl: effective_depths(curves([r for p, r in zip(sel.problems, records, strict=True)
                                                  if p.level == lvl], reduction), kl_fraction, overlap_threshold)
                    for lvl in levels}
        future = {part: skip_effects_over(model, sel.skip, part, n_splits, seed=seed) for part in skip_parts}
        current = skip_effects_over(model, sel.skip, "layer", None, seed=seed)
        depth = depth_scores_by_level(model, sel.depth, depth_splits, seed=seed)
        result = ModelStudy(info, records, curves(records, reduction), curves(records, "max"),
                            effective_depths(curves(records, reduction), kl_fraction, overlap_threshold), by_level,
                            future, current, depth)
        result.probes = _probes(model, sel.problems, ig_steps, ig_components, probe_stride)
        results[name] = result
        del model
    return results


def _probes(handle: ModelHandle, problems: Sequence[Problem], ig_steps: int, ig_components: Sequence[str],
            probe_stride: int) -> list[dict]:
    """Residual erasure and integrated gradients on the papers' two probes, at every `probe_stride`-th boundary."""
    tokenizer = handle.tokenizer
    baseline = cache(lambda: mean_residual(handle.module, [analysis_sequence(tokenizer, p)[0] for p in problems[:10]]))
    run = analysis_run(ERASURE_IG, handle, baseline=[analysis_key(tokenizer, p) for p in problems[:10]],
                       ig_steps=ig_steps)
    rows = probe_rows(handle.n_layers, probe_stride)
    out = []
    for prompt, answer in PROBES:
        ids, start = probe_sequence(tokenizer, prompt, answer)
        erasure = np.array(run.compute(sequence_key(probe_unit("erasure", probe_stride), ids, start),
                                       lambda ids=ids, start=start: probe_record(handle.module, ids, start, "erasure",
                                                                                 None, rows, baseline())))
        erasure[erasure < 0] = np.nan  # boundaries not computed
        entry = {"tokens": [tokenizer.decode([t]) for t in ids], "start": start, "rows": rows, "erasure": erasure,
                 "title": f"{prompt}{answer}"}
        for comp in ig_components:
            ig = np.array(run.compute(sequence_key(probe_unit("ig", probe_stride, comp), ids, start),
                                      lambda ids=ids, start=start, comp=comp: probe_record(
                                          handle.module, ids, start, "ig", comp, rows, ig_steps=ig_steps)))
            ig[[l for l in range(handle.n_layers) if l not in rows]] = np.nan
            entry[f"ig_{comp}"] = ig
        out.append(entry)
    return out


# --------------------------------------------------------------------------------------------------
# What each section glues
# --------------------------------------------------------------------------------------------------


def per_problem_lens(r: ModelStudy) -> dict[str, np.ndarray]:
    """KL and overlap curves per gold text (mean over its positions): [problems, layers]."""
    return {key: np.array([np.asarray(rec[key]["sum"]) / rec[key]["n"] for rec in r.records])
            for key in ("kl", "overlap")}


def lens_marks(results: dict[str, ModelStudy]) -> dict[str, dict[str, int]]:
    """The layers the lens figure marks for each model: the KL and overlap effective depths."""
    return {name: {f"KL ED={r.ed['effective_depth']['kl']}": r.ed["effective_depth"]["kl"],
                   f"overlap ED={r.ed['effective_depth']['overlap']}": r.ed["effective_depth"]["overlap"]}
            for name, r in results.items()}


def skip_summary(r: ModelStudy) -> dict:
    """Skip matrices and output changes (future tokens per part, current tokens) and the numbers the prose glues."""
    L, half = r.n_layers, r.n_layers // 2
    future = {part: combine(effects, "max", "max") for part, effects in r.future.items()}
    profiles_ = {part: later_layer_profile(matrix) for part, (matrix, _) in future.items()}
    prof = profiles_["layer"] if "layer" in profiles_ else next(iter(profiles_.values()))
    current_matrix, current_output = combine(r.current, "max", "max")
    first_part = next(iter(future))
    future_output = future[first_part][1]
    first, second = float(prof[:half].mean()), float(prof[half:L - 1].mean())
    values = {"future_first": first, "future_second": second,
              "future_ratio": second / first if first > 0 else float("nan"),  # how much a late skip moves, per early
              "current_out_second": float(current_output[half:].mean()),
              "future_out_second": float(future_output[half:].mean()),
              "current_out_first": float(current_output[:half].mean()),
              "future_out_first": float(future_output[:half].mean()), "skip_part": first_part}
    return {"future": future, "current": (current_matrix, current_output), "future_output": future_output,
            "values": values}


CLEAR_DROP = 1.2  # the first half's median block writes at least this many times the second half's: a drop


def contributions(r: ModelStudy) -> dict:
    """Mean block contribution in each half, the same for each half's median block (a mean one layer's massive
    activation can carry, a median it cannot), the first and last block and the largest MLP spike
    (`effective_depth_text.contribution_values` adds the words)."""
    c, L = r.curves, r.n_layers
    half = L // 2
    first, second = float(c["rc_layer"][1:half].mean()), float(c["rc_layer"][half:L - 1].mean())
    median_first, median_second = float(np.median(c["rc_layer"][1:half])), float(np.median(c["rc_layer"][half:L - 1]))
    ratio = median_first / median_second
    spike_layer = int(np.argmax(r.maxima["rc_mlp"]))
    return {"rc_first": first, "rc_second": second, "rc_ratio": first / second, "rc_median_ratio": ratio,
            "rc_last": float(c["rc_layer"][-1]),
            "rc_zero": float(c["rc_layer"][0]), "half": half, "half_last": half - 1, "second_last": L - 2,
            "spike_layer": spike_layer, "spike": float(r.maxima["rc_mlp"][spike_layer]), "n_layers": L,
            "model": r.info.name}


def negative_cosines(r: ModelStudy) -> int:
    """How many layers erase more than they add (a negative mean cosine with the residual)."""
    return int(sum(v < 0 for v in r.curves["cos_mean"]))


def kl_peak(r: ModelStudy) -> tuple[int, float]:
    """The layer where the lens's KL to the output peaks, and the peak (the half-maximum rule's anchor)."""
    return int(np.argmax(r.curves["kl"])), float(np.max(r.curves["kl"]))


def erasure_reach(r: ModelStudy) -> list[int]:
    """Per probe, the last boundary at which erasing a context token still moves the answer (-1: none does)."""
    last_use = []
    for probe in r.probes:
        context = probe["erasure"][:, 1:probe["start"] - 1].max(axis=1)  # not position 0 (the sink), not the last
        strong = np.nonzero(context > ERASURE_THRESHOLD)[0]
        last_use.append(int(strong.max()) if len(strong) else -1)
    return last_use


def ig_early_share(r: ModelStudy) -> float:
    """The share, in percent, of the arithmetic probe's attribution (first component) that lies in the first half."""
    probe = r.probes[0]
    first_component = next(k for k in probe if k.startswith("ig_"))
    total = np.nan_to_num(np.abs(probe[first_component])).sum(axis=1)
    return 100 * float(total[:r.n_layers // 2].sum() / max(total.sum(), 1e-12))


def depth_trend(r: ModelStudy) -> tuple[float, float, float, list[int]] | None:
    """The depth score's least-squares slope per difficulty level, its lowest and highest value and the levels it
    spans (None: fewer than two levels ran)."""
    numeric = [lvl for lvl in r.depth if lvl is not None]
    if len(numeric) < 2:
        return None
    scores = [r.depth[lvl]["layer_score_relative"] for lvl in r.depth]
    slope = float(np.polyfit([float(lvl) for lvl in numeric],
                             [r.depth[lvl]["layer_score_relative"] for lvl in numeric], 1)[0])
    return slope, min(scores), max(scores), numeric


@dataclass
class LinearMaps:
    """Held-out relative errors of ridge maps from every source boundary to every target boundary."""

    pair: list[str]
    errors: np.ndarray
    train_tokens: int
    input_dims: int

    @property
    def self_map(self) -> bool:
        return self.pair[0] == self.pair[1]


def map_gap(maps: LinearMaps) -> float:
    """How far, on average, each source layer's best target lies from its own relative depth (0: exactly equal)."""
    from helpers.interp.layer_maps import best_match

    ls, lt = maps.errors.shape[0] - 1, maps.errors.shape[1] - 1
    return float(np.mean(np.abs(np.arange(ls + 1) / ls - best_match(maps.errors) / lt)))


def next_layer_error(maps: LinearMaps) -> float:
    """The mean held-out relative error of the map from each boundary to the next (a model mapped onto itself)."""
    ls = maps.errors.shape[0] - 1
    return float(np.mean([maps.errors[i, i + 1] for i in range(ls)]))


def linear_maps(map_models: Sequence[str], fallback: str, pool: Sequence[Problem], map_tokens: int,
                dtype: str = "auto") -> LinearMaps:
    """The maps between two models with one tokenizer (or a model and itself, as a sanity check), read from the store
    (and the release) where fitted before: each model is loaded once to name it and its texts, and again only to fit.
    """
    from helpers.interp.layer_maps import check_same_tokenizer, fit_layer_maps

    pair = list(map_models) if len(map_models) == 2 else [fallback, fallback]
    texts, first_tokenizer, identities = None, None, []
    for name in dict.fromkeys(pair):
        model = load_model(name, dtype=dtype)
        tokenizer = model.tokenizer
        identities.append(model.identity())
        if texts is None:
            texts, first_tokenizer = [analysis_sequence(tokenizer, p)[0] for p in pool], tokenizer
        else:
            check_same_tokenizer(first_tokenizer, tokenizer, tuple(pair))
        del model
    run = Run(LAYER_MAPS, {"source": identities[0], "target": identities[-1], "map_tokens": map_tokens})
    found = run.compute(f"maps@{digest(*(','.join(map(str, ids)) for ids in texts))}",
                        lambda: fit_layer_maps(pair, pool, map_tokens, lambda n: load_model(n, dtype=dtype)))
    return LinearMaps(pair, np.array(found["errors"]), found["train_tokens"], found["input_dims"])


def lens_by_model(results: dict[str, ModelStudy]) -> dict[str, dict[str, np.ndarray]]:
    """Per-problem lens curves of every model, for `helpers.plots.lens.lens_curves`, with the curves the effective-depth
    rules read (`kl_line`, `overlap_line`: the chapter's `reduction`, every token alike by default) as the lines, so
    that the marked depths are crossings of the line drawn."""
    return {name: {**per_problem_lens(r), "kl_line": np.asarray(r.curves["kl"]),
                   "overlap_line": np.asarray(r.curves["overlap"])} for name, r in results.items()}
