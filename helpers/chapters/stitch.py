"""Chapter 03: greedy accuracy of naive and stitched truncations at every depth, and where accuracy collapses."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import partial

from helpers.data.problems import Problem, problems_of
from helpers.evaluation.cost import ModelCost, model_cost
from helpers.evaluation.critical import SweepSettings, store_critical
from helpers.evaluation.decodes import DecodeSettings, accuracy, sample_at_depths
from helpers.evaluation.lengths import BoxStop, box_stop
from helpers.evaluation.solutions import solutions_and_lens
from helpers.evaluation.stats import PairedDifference, paired_difference
from helpers.interp.lens import lens_cut_points
from helpers.interp.studies import agreement_over
from helpers.models.handle import ModelHandle
from helpers.models.loading import load_model
from helpers.models.truncation import critical_depth


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


def sweep(models: Sequence[str], problems: Sequence[Problem] | Mapping[str, Sequence[Problem]],
          settings: SweepSettings, *, methods: Sequence[str], n_agreement: int, batch_size: int,
          naive_depths: Sequence[int | str] | None = None, lens_per_level: int | None = None,
          dtype: str = "auto") -> dict[str, Sweep]:
    """For each model: its greedy solutions and cut points (chapter 02's pipeline), then every depth and method, and
    its stitched critical depth stored under `settings` (chapter 03's parameters), for chapters 04-05 to name depths by.

    Of `settings`: `depths` (absolute, shared by every model) wins over `floor_fraction` (stitched depths one block at
    a time below each model's L, until greedy accuracy falls below that share of the full model's), which wins over
    `span` (the last `span` depths below each model's L), which wins over the cut-point range with `depth_step`; the
    cut points come from `kl_fraction` and `overlap_threshold`, the decodes from `max_new_tokens` and `shots`. Naive
    truncation runs at every stitched depth, or only at `naive_depths` (numbers of blocks, or relative to the
    stitched sweep's critical depth: 'critical', 'critical-1'). The lens that gives the cut points reads every problem,
    or the first `lens_per_level` of each level. `problems` is one list for every model, or each model's own
    (`helpers.data.model_sets.problem_sets`)."""
    depths, floor_fraction, max_new_tokens, shots = (settings.depths, settings.floor_fraction, settings.max_new_tokens,
                                                     settings.shots)
    sweeps = {}
    every = problems
    for name in models:
        problems = problems_of(every, name)
        model = load_model(name, dtype=dtype)
        info = model.info
        solved = solutions_and_lens(model, problems, max_new_tokens=max_new_tokens, shots=shots,
                                    batch_size=batch_size, lens_per_level=lens_per_level)
        _, _, cuts = lens_cut_points(solved.curves, settings.kl_fraction, settings.overlap_threshold)
        decode = partial(_greedy_at, model, problems, DecodeSettings("greedy", max_new_tokens, shots), batch_size)

        stitched = [m for m in methods if m == "stitch"]
        if floor_fraction is not None and not depths and stitched:
            outputs = down_to_floor(decode, info.n_layers, floor_fraction)
        else:
            chosen = sweep_depths(cuts, info.n_layers, depths, settings.depth_step, settings.span)
            outputs = decode([(m, d) for m in (methods if naive_depths is None else stitched) for d in chosen])
        chosen = sorted({d for _, d in outputs})
        if "naive" in methods:  # at every stitched depth, or at the named ones; what the run above decoded is kept
            if naive_depths is None:
                wanted = chosen
            else:
                stitch_acc = {d: accuracy(r) for (m, d), r in outputs.items() if m == "stitch"}
                crit = (critical_depth(stitch_acc, stitch_acc[info.n_layers], settings.collapse_fraction)
                        if info.n_layers in stitch_acc else None)
                wanted = resolve_depths(naive_depths, crit, info.n_layers)
            if todo := [("naive", d) for d in wanted if ("naive", d) not in outputs]:
                outputs |= decode(todo)
        chosen = sorted({d for _, d in outputs})
        acc: dict[str, dict[int, float]] = {m: {} for m in methods}
        out: dict[str, dict[int, list[dict]]] = {m: {} for m in methods}
        for (method, depth), records in sorted(outputs.items()):
            acc[method][depth], out[method][depth] = accuracy(records), records
        if "stitch" in acc:
            store_critical(model, settings.for_model(name), acc["stitch"], len(problems))
        agree: dict[str, dict[int, dict]] = {m: {} for m in methods}
        shallow = {(m, d): model.at_depth(d, m) for m, d in outputs}
        for (method, depth), values in agreement_over(model, shallow, solved.items[:n_agreement]).items():
            agree[method][depth] = values  # the full model's distributions computed once per sequence for all
        sweeps[name] = Sweep(name, info.n_layers, cuts, chosen, acc, agree, out, solved.records,
                             {d: model_cost(model.config, d) for d in chosen}, problems)
        del model, shallow, decode  # the truncations and the decode share the model: keep none while the next loads
    return sweeps


def _greedy_at(model: ModelHandle, problems: Sequence[Problem], greedy: DecodeSettings, batch_size: int,
               variants: list[tuple[str, int]]) -> dict[tuple[str, int], list[dict]]:
    """Each truncation's greedy record per problem, every variant in one engine run (`sample_at_depths`)."""
    return {v: [samples[0] for samples in by_name["greedy"]] for v, by_name in sample_at_depths(
        model, problems, {"greedy": greedy}, variants, n_seeds=1, batch_size=batch_size).items()}


FLOOR_STEP = 3  # depths the floor sweep decodes in one engine run: a batch kept full, little decoded past the floor


def down_to_floor(decode, n_layers: int, floor_fraction: float) -> dict[tuple[str, int], list[dict]]:
    """Stitched greedy records from the full depth downward, `FLOOR_STEP` depths at a time (the full depth in the
    first run), until a depth's accuracy falls below `floor_fraction` of the full model's, or depth 2: `decode(variants)`
    gives each variant's records. Depths decoded beside the first one below the floor stay, measured."""
    if not 0 < floor_fraction < 1:
        raise ValueError(f"floor_fraction must lie strictly between 0 and 1, got {floor_fraction!r}")
    outputs: dict[tuple[str, int], list[dict]] = {}
    depth = n_layers
    while depth >= 2:
        batch = [("stitch", d) for d in range(depth, max(depth - FLOOR_STEP, 1), -1)]
        outputs |= decode(batch)
        floor = floor_fraction * accuracy(outputs[("stitch", n_layers)])
        if floor == 0 or any(accuracy(outputs[v]) < floor for v in batch if v[1] < n_layers):
            break  # the full model solves nothing (no truncation can fall below it), or one fell below the floor
        depth -= FLOOR_STEP
    return outputs


def resolve_depths(entries: Sequence[int | str], critical: int | None, n_layers: int) -> list[int]:
    """Depths as numbers of blocks from `entries` (numbers, or 'critical', 'critical-1', …, relative to `critical`),
    each within 2..n_layers, with the full depth; a ValueError for a relative entry without a critical depth."""
    from helpers.evaluation.critical import parse_depth

    resolved = {n_layers}
    for entry in entries:
        relative, value = parse_depth(entry)
        if relative and critical is None:
            raise ValueError(f"{entry!r} is relative to the critical depth, which this sweep does not define (the full "
                             "model solves none of its problems, or no stitched sweep ran)")
        depth = critical + value if relative else value
        if 2 <= depth <= n_layers:
            resolved.add(depth)
    return sorted(resolved, reverse=True)


def naive_everywhere(s: Sweep) -> bool:
    """Whether naive truncation ran at every depth of the sweep (not at a few named ones only)."""
    return "naive" in s.accuracy and set(s.accuracy["naive"]) >= set(s.depths)


def compared_depths(s: Sweep) -> list[int]:
    """The truncated depths at which every method of the sweep ran (naive truncation may run at a few only),
    deepest first."""
    ran = [set(by_depth) for by_depth in s.outputs.values()]
    return sorted((set.intersection(*ran) if ran else set()) - {s.n_layers}, reverse=True)


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
    box: dict[tuple[str, int], BoxStop] = field(default_factory=dict)  # what a stop at the first \boxed{} would do


def answer_lengths(models: Sequence[str], problems: Sequence[Problem] | Mapping[str, Sequence[Problem]],
                   critical: SweepSettings, *, cap: int | None, batch_size: int | Mapping[str, int],
                   n_seeds: int = 1, dtype: str = "auto") -> dict[str, AnswerLengths]:
    """For each model that has one, greedy and T = 1 (`n_seeds` samples) at its full depth and at its stitched critical
    depth as chapter 03 stored it under `critical`, every answer decoded up to `cap` new tokens with the sweep's shots
    and seed, stored as the chapters' decodes are (the same keys as a chapter that asks for these settings). `batch_size` is one number or one per
    model (the larger models hold a longer KV cache per row). No study (an empty mapping) where `cap` is None."""
    from helpers.evaluation.critical import stored_critical

    out: dict[str, AnswerLengths] = {}
    if cap is None:
        return out
    for name in models:
        mine = problems_of(problems, name)
        model = load_model(name, dtype=dtype)
        tokenizer, info = model.tokenizer, model.info
        depth = stored_critical(model, critical.for_model(name))
        if depth is None:  # it solves none of the sweep's problems at full depth: its page says so
            del model
            continue
        settings = {"greedy": DecodeSettings("greedy", cap, critical.shots, critical.seed),
                    "temperature": DecodeSettings("temperature", cap, critical.shots, critical.seed)}
        rows = batch_size[name] if isinstance(batch_size, Mapping) else batch_size
        decoded = sample_at_depths(model, mine, settings, [("stitch", info.n_layers), ("stitch", depth)],
                                   n_seeds=n_seeds, batch_size=rows)
        records = {(method, d): runs[method] for (_, d), runs in decoded.items() for method in settings}

        def text(tokens: list[int], tokenizer=tokenizer) -> str:
            return tokenizer.decode(tokens, skip_special_tokens=True)

        box = {k: box_stop([r for per in recs for r in per],
                           [p.answer for p, per in zip(mine, recs, strict=True) for _ in per], text)
               for k, recs in records.items()}
        out[name] = AnswerLengths(name, info.n_layers, depth, cap, records, mine, box)
        del model
    return out
