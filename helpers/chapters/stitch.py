"""Chapter 03: greedy accuracy of naive and stitched truncations at every depth, and where accuracy collapses."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from helpers.data.problems import Problem, problems_of
from helpers.evaluation.cost import ModelCost, model_cost
from helpers.evaluation.critical import SweepSettings, store_critical
from helpers.evaluation.decodes import DecodeSettings, accuracy, sample_at_depths
from helpers.evaluation.solutions import solutions_and_lens
from helpers.evaluation.stats import PairedDifference, paired_difference
from helpers.interp.lens import lens_cut_points
from helpers.interp.studies import agreement_over
from helpers.models.loading import load_model
from helpers.models.truncation import at_depth


@dataclass
class Sweep:
    """One model's sweep: accuracy, distance from the full model and outputs, per method and depth."""

    model: str
    n_layers: int
    cuts: list[int]
    depths: list[int]
    accuracy: dict[str, dict[int, float]]
    agreement: dict[str, dict[int, dict[str, float]]]  # 'kl', 'nll', 'nll_full'
    outputs: dict[str, dict[int, list[dict]]]
    full: list[dict]
    costs: dict[int, ModelCost]
    problems: list[Problem] = field(default_factory=list)  # this model's problems (`problem_sets`), in order


def sweep_depths(cuts: Sequence[int], n_layers: int, depths: Sequence[int] | None, step: int,
                 span: int | None = None) -> list[int]:
    """The depths to test: `depths` as given; else the last `span` depths below L; else from the earliest cut
    point (at least 2) to L by `step`. The full depth L is always included."""
    if depths:
        outside = sorted(d for d in set(depths) if not 2 <= d <= n_layers)
        if outside:
            raise ValueError(f"depths {outside} are outside 2..{n_layers}, the depths this {n_layers}-block model can "
                             "run; with several models use span= instead of absolute depths.")
        return sorted(set(depths) | {n_layers})
    if span is not None:
        if span < 1:
            raise ValueError(f"span must be at least 1 (depths below the full one to sweep), got {span}.")
        return list(range(max(n_layers - span, 2), n_layers + 1))
    start = max(min(cuts) if cuts else 2, 2)
    return sorted({*range(start, n_layers, step), n_layers})


def sweep(models: Sequence[str], problems: Sequence[Problem] | Mapping[str, Sequence[Problem]], *, methods: Sequence[str], depths: Sequence[int] | None,
          depth_step: int, kl_fraction: float, overlap_threshold: float, n_agreement: int, max_new_tokens: int,
          shots: int, batch_size: int, span: int | None = None, critical: SweepSettings | None = None
          ) -> dict[str, Sweep]:
    """For each model: its greedy solutions and cut points (chapter 02's pipeline), then every depth and method.

    `depths` (absolute, shared by every model) wins over `span` (the last `span` depths below each model's L),
    which wins over the cut-point range with `depth_step`. With `critical` (these same settings, as chapter 03's
    parameters give them), each model's stitched critical depth is stored, for chapters 04-05 to name depths by.
    `problems` is one list for every model, or each model's own (`helpers.data.problems.problem_sets`)."""
    sweeps = {}
    every = problems
    for name in models:
        problems = problems_of(every, name)
        model, tokenizer, info = load_model(name)
        solved = solutions_and_lens(model, tokenizer, problems, max_new_tokens=max_new_tokens, shots=shots,
                                    batch_size=batch_size)
        _, _, cuts = lens_cut_points(solved.curves, kl_fraction, overlap_threshold)
        chosen = sweep_depths(cuts, info.n_layers, depths, depth_step, span)
        acc: dict[str, dict[int, float]] = {m: {} for m in methods}
        agree: dict[str, dict[int, dict]] = {m: {} for m in methods}
        outputs: dict[str, dict[int, list[dict]]] = {m: {} for m in methods}
        greedy = DecodeSettings("greedy", max_new_tokens, shots)
        swept = sample_at_depths(model, tokenizer, problems, {"greedy": greedy},
                                 [(m, d) for m in methods for d in chosen], n_seeds=1,
                                 batch_size=batch_size)  # every depth and method in one engine run
        for (method, depth), by_name in swept.items():
            records = [samples[0] for samples in by_name["greedy"]]
            acc[method][depth], outputs[method][depth] = accuracy(records), records
        if critical is not None and "stitch" in acc:
            store_critical(model, critical.for_model(name), acc["stitch"], len(problems))
        shallow = {(m, d): at_depth(model, d, m) for m, d in swept}
        for (method, depth), values in agreement_over(model, shallow, solved.items[:n_agreement]).items():
            agree[method][depth] = values  # the full model's distributions computed once per sequence for all
        sweeps[name] = Sweep(name, info.n_layers, cuts, chosen, acc, agree, outputs, solved.records,
                             {d: model_cost(model.config, d) for d in chosen}, problems)
        del model, shallow  # the truncations share the model's weights: keep neither while the next model runs
    return sweeps


def method_differences(s: Sweep) -> dict[int, PairedDifference]:
    """Stitch minus naive at every truncated depth, paired over the same problems."""
    if not {"stitch", "naive"} <= set(s.outputs):
        return {}
    return {d: paired_difference([float(r["correct"]) for r in s.outputs["stitch"][d]],
                                 [float(r["correct"]) for r in s.outputs["naive"][d]])
            for d in sorted(s.outputs["stitch"], reverse=True) if d < s.n_layers and d in s.outputs["naive"]}




# --------------------------------------------------------------------------------------------------
# How long the answers are: greedy and T = 1 at the full and the critical depth, under a long cap
# --------------------------------------------------------------------------------------------------


@dataclass
class AnswerLengths:
    """One model's greedy and T = 1 answers at its full depth and at its critical depth, decoded under a cap long
    enough to see where they end (`helpers.evaluation.lengths` reads them)."""

    model: str
    n_layers: int
    critical: int
    cap: int  # max_new_tokens of these decodes
    records: dict[tuple[str, int], list[list[dict]]]  # (method, depth) -> records[problem][sample]
    problems: list[Problem] = field(default_factory=list)


def answer_lengths(models: Sequence[str], problems: Sequence[Problem] | Mapping[str, Sequence[Problem]],
                   critical: SweepSettings, *, cap: int, shots: int, seed: int, batch_size: int | Mapping[str, int],
                   n_seeds: int = 1) -> dict[str, AnswerLengths]:
    """For each model, greedy and T = 1 (`n_seeds` samples) at its full depth and at its stitched critical depth as
    chapter 03 stored it under `critical`, every answer decoded up to `cap` new tokens, stored as the chapters'
    decodes are (the same keys as a chapter that asks for these settings). `batch_size` is one number or one per
    model (the larger models hold a longer KV cache per row)."""
    from helpers.evaluation.critical import stored_critical

    out = {}
    for name in models:
        mine = problems_of(problems, name)
        model, tokenizer, info = load_model(name)
        depth = stored_critical(model, critical.for_model(name))
        if depth is None:
            raise ValueError(f"{name} has no critical depth under chapter 03's settings: it solves none of the "
                             "sweep's problems at full depth")
        settings = {"greedy": DecodeSettings("greedy", cap, shots, seed),
                    "temperature": DecodeSettings("temperature", cap, shots, seed)}
        rows = batch_size[name] if isinstance(batch_size, Mapping) else batch_size
        decoded = sample_at_depths(model, tokenizer, mine, settings, [("stitch", info.n_layers), ("stitch", depth)],
                                   n_seeds=n_seeds, batch_size=rows)
        out[name] = AnswerLengths(name, info.n_layers, depth, cap,
                                  {(method, d): runs[method] for (_, d), runs in decoded.items()
                                   for method in settings}, mine)
        del model
    return out
