"""Chapter 04: power sampling on a model small enough to check, then on full and truncated models."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from functools import cached_property

import numpy as np

from helpers.core.numbers import counted
from helpers.data.model_sets import problem_sets
from helpers.data.problems import Problem, per_level, problems_of
from helpers.data.published import REPORT_HEADLINE
from helpers.data.sources import load_problems
from helpers.evaluation.comparison import (
    depth_plan,
    depth_seeds,
    per_model,
    power_subset,
    search_order,
    subset_size,
)
from helpers.evaluation.cost import model_cost, model_size, token_multiplier
from helpers.evaluation.critical import DepthChoice, SweepSettings, choose_depths, stored_cut_points
from helpers.evaluation.decodes import (
    OUTCOMES,
    UNFINISHED,
    best_of_n,
    cost_per_problem,
    ended,
    majority_vote,
    mean_accuracy,
    outcome_shares,
    pass_at_k,
    per_problem,
    sample_at_depths,
    sample_methods,
    tokens_per_problem,
)
from helpers.evaluation.decomposition import SEARCHES, Decomposition, decompose
from helpers.evaluation.lengths import looping
from helpers.evaluation.levels import LevelScan, level_scan
from helpers.evaluation.sharpness import Sharpness, sharpness
from helpers.evaluation.stats import (
    PairedDifference,
    holm,
    paired_difference,
    paired_prefix,
    percent_with_interval,
)
from helpers.evaluation.toy_study import TOY_MAX_TOKENS, stored_toy_curves
from helpers.models.handle import ModelHandle
from helpers.models.loading import load_model
from helpers.models.registry import post_training
from helpers.results.store import reading_release_only
from helpers.samplers.power import PowerConfig
from helpers.samplers.settings import SEARCH_PARAMETERS, DecodeSettings, Searches, chapter_settings
from helpers.samplers.target import MH_MODES, Target
from helpers.samplers.toy import ToyLM, exact_distributions, tv_distance

EXPLORER_ALPHAS = (1.0, 2.0, 4.0, 8.0)


@dataclass
class ToyConvergence:
    """Total-variation distance to p^α on the enumerable toy model: against MH steps for both modes, and
    against the number of SMC particles."""

    target: Target  # p^α over completions of TOY_MAX_TOKENS tokens
    steps: list[int]
    n_chains: int
    tv: dict[str, list[float]]  # mode -> distance per entry of `steps`
    low_temperature_gap: float  # exact TV(low temperature, p^α)
    noise_floor: float  # TV of n_chains exact draws from p^α itself
    tables: dict[float, dict[str, dict]]  # α -> exact p, p^α and low-temperature distributions (explorer)
    particles: list[int] = field(default_factory=list)  # SMC particle counts K
    smc_tv: list[float] = field(default_factory=list)  # SMC's distance per entry of `particles`

    def glue_values(self) -> dict:
        values = {"toy_exact_tv": self.tv["exact"][-1], "toy_reference_tv": self.tv["reference"][-1],
                  "toy_low_gap": self.low_temperature_gap, "toy_noise": self.noise_floor,
                  "toy_steps_max": self.steps[-1]}
        if self.particles:
            values.update(toy_smc_tv=self.smc_tv[-1], toy_smc_k=self.particles[-1], toy_smc_tv_one=self.smc_tv[0],
                          toy_smc_k_one=self.particles[0])
        return values


def toy_convergence(alpha: float, steps: Sequence[int], n_chains: int, seed: int = 0,
                    particles: Sequence[int] = ()) -> ToyConvergence:
    """Run `n_chains` chains per (mode, N) on the toy model and measure how close they come to p^α; the same
    for `n_chains` SMC samples per particle count K (ESS checked after every token). The curves are stored (and
    released) like the chapters' decodes; the exact distributions are recomputed, which is instant."""
    toy = ToyLM(vocab=3, seed=seed)
    dist = exact_distributions(toy, [1], TOY_MAX_TOKENS, alpha)
    target = Target(alpha, TOY_MAX_TOKENS)
    stored = stored_toy_curves(alpha, steps, n_chains, seed, particles)
    tables = {a: exact_distributions(toy, [1], TOY_MAX_TOKENS, a) for a in EXPLORER_ALPHAS}
    return ToyConvergence(target, list(steps), n_chains, stored["tv"], tv_distance(dist["low_temperature"],
                                                                                    dist["power"]),
                          stored["noise"], tables, list(particles), stored["smc_tv"])


def toy_alpha_one(steps: int, n_chains: int, seed: int = 0) -> dict:
    """Exercise "α = 1": MH towards p^1 = p on the toy model in both modes. The proposal is then p itself, so
    the reference ratio is exactly 1 (every move accepted), while the exact ratio keeps the cut point's length
    correction log t_x − log t_y and rejects some moves whose proposals end longer than the state. The noise floor is
    that of `n_chains` exact draws from p (the chapter's toy floor is for draws from p^α, another law); a distance
    under twice it is read as noise, as the sampler's tests read it. The chains are the toy study's at α = 1, stored
    and released like its curves."""
    stored = stored_toy_curves(1.0, [steps], n_chains, seed, [], acceptance=True)
    values = {"ex_one_steps": steps, "ex_one_chains": n_chains, "ex_one_noise": stored["noise"]}
    for mode in MH_MODES:
        accepted = stored["acceptance"][mode][0]
        values[f"ex_one_acceptance_{mode}"] = float("nan") if accepted is None else accepted
        values[f"ex_one_tv_{mode}"] = stored["tv"][mode][0]
        values[f"ex_one_standing_{mode}"] = ("within noise (less than twice that floor)"
                                             if values[f"ex_one_tv_{mode}"] < 2 * values["ex_one_noise"]
                                             else "more than twice that floor: not noise")
    return values


@dataclass(frozen=True)
class LongerCap:
    """Greedy decoding at full depth and at the headline's cut once more, on the same problems and shots, under a
    longer token cap: how much of the cut's cost at the chapter's cap is answers the cap cut off."""

    model: str
    n_layers: int
    depth: int
    cap: int  # the longer cap
    short: int  # the chapter's own cap, the rows'
    full: tuple[float, ...]  # per-problem greedy scores at full depth, in the rows' problem order
    cut: tuple[float, ...]  # and at the cut
    full_unfinished: float  # share of greedy answers unfinished at the longer cap
    cut_unfinished: float

    @cached_property
    def cost(self) -> PairedDifference:
        """The cut's cost to greedy decoding under the longer cap, paired by problem (one bootstrap, read by every
        sentence that states it)."""
        return paired_difference(list(self.cut), list(self.full))


@dataclass
class DepthRow:
    """Every method's accuracy and cost for one model at one depth."""

    model: str
    depth: int
    n_layers: int
    n_problems: int
    accuracy: dict[str, float]  # greedy, low, temperature, best_of_n, majority, power, smc
    acceptance: float
    tokens_greedy: float
    tokens_power: float
    tokens_smc: float
    flops_share: float  # FLOPs per token of this depth / the full model's
    size: float  # the full model's `model_size`: orders the sizes
    pass_at_k: dict[str, list[float]] = field(default_factory=dict)  # temperature, power -> pass@1..n
    scores: dict[str, list[float]] = field(default_factory=dict)  # method -> per-problem score, problem order
    n_seeds: int = 1
    outcomes: dict[str, dict[str, float]] = field(default_factory=dict)  # greedy, power, smc -> share per outcome
    ends: dict[str, list[list[str]]] = field(default_factory=dict)  # greedy, power, smc -> per problem, each sample's
    loops: dict[str, list[list[bool]]] = field(default_factory=dict)  # greedy, power, smc -> per problem, whether
    # each sample is unfinished and loops (`looping`): a cap's cost that a longer cap would hardly undo
    resamples: float = 0.0  # SMC: resampling events per sample
    choice: DepthChoice | None = None  # how this model's depths were chosen (fixed, or from chapter 03)
    multiplier: float = float("nan")  # `token_multiplier`: MH's decoded tokens per answer over greedy's, here
    sharp: Sharpness | None = None  # how sharp the model already is here, from its greedy and T = 1 decodes
    problem_ids: tuple[str, ...] = ()  # the problems, in score order: rows pair across models only where they agree
    family: str = ""  # the architecture (config.model_type): sizes compare within one family
    problem_levels: tuple[int | None, ...] = ()  # each problem's level, in order (the prose names them)
    costs: dict[str, dict[str, list[float]]] = field(default_factory=dict)  # power, smc -> tokens, seconds -> per
    # problem, the mean per sample (`cost_per_problem`): costs set side by side on the same problems
    longer: LongerCap | None = None  # at the headline's cut, greedy again under `compare_methods`' longer cap

    def count(self, key: str) -> int:
        """Problems the method `key` ran on (all of them, or the first `search_problems`)."""
        return len(self.scores[key]) if key in self.scores else self.n_problems

    def interval(self, key: str, first: int | None = None) -> str:
        """The method's accuracy with its 95% Wilson interval over the problems it ran on, or over the first `first`
        of them (to set it beside a method that ran on those only)."""
        if first is None or first >= self.count(key):
            return percent_with_interval(self.accuracy[key], self.count(key))
        return percent_with_interval(float(np.mean(self.scores[key][:first])), first)

    def paired(self, key: str, other: DepthRow | None = None, other_key: str | None = None) -> PairedDifference:
        """The method `key` here minus `other_key` on `other` (this row and `key` where omitted), paired over the
        problems both ran (`paired_prefix`)."""
        return paired_prefix(self.scores[key], (other or self).scores[other_key or key])

    def cost(self, key: str, what: str = "tokens", first: int | None = None) -> float:
        """The method's mean decoded tokens (or, `what` 'seconds', wall seconds) per sample, over its problems or the
        first `first` of them."""
        values = self.costs[key][what][:first]
        return float(np.mean(values)) if values else float("nan")

    def outcome_shares(self, key: str, first: int | None = None) -> dict[str, float]:
        """How the method's samples ended (`OUTCOMES`), over all its problems or the first `first`."""
        flat = [o for per in self.ends[key][:first] for o in per]
        return {name: flat.count(name) / len(flat) if flat else 0.0 for name in OUTCOMES}

    def looping_count(self, key: str, first: int | None = None) -> int | None:
        """How many of the method's samples (over all its problems or the first `first`) are unfinished and loop; None
        where the row does not say (rows built before it kept the loops)."""
        if key not in self.loops:
            return None
        return sum(sum(per) for per in self.loops[key][:first])


def compare_methods(models: Sequence[str], problems: Sequence[Problem] | Mapping[str, Sequence[Problem]], depths: Sequence[int | str] | None,
                    searches: Searches, *, n_seeds: int, max_new_tokens: int, shots: int, seed: int,
                    batch_size: int, engine: str = "slot", search_problems: int | None = None,
                    power_subsets: dict[str, int] | None = None,
                    critical_sweep: SweepSettings | dict | None = None,
                    seeds_at: Mapping[int | str, int] | None = None, longer_cap: int | None = None,
                    dtype: str = "auto") -> list[DepthRow]:
    """Greedy, low temperature (T = 1/α), T = 1 (best-of-k, majority), power sampling by MH and by SMC at every
    depth.

    `depths` are stitched depths tried besides the full model (None: the depth just below it): numbers of blocks,
    or relative to each model's critical depth as chapter 03 stored it under `critical_sweep` ('critical',
    'critical-1'; `helpers.evaluation.critical`). Every decode
    is stored by `helpers.evaluation.decodes.sample`, so the greedy records of chapter 03 are read, not recomputed.
    `engine` ('slot' or 'vllm') runs the decodes (`helpers.samplers.settings`). With `search_problems`, SMC
    runs on that many problems only, and MH at the full depth of a model named in `power_subsets` on as many as it
    names (`search_limits`); `seeds_at` gives a depth fewer samples per problem than `n_seeds` (`depth_seeds`, e.g.
    {'critical-1': 1}). `problems` is one list for every model, or each model's own
    (`helpers.data.model_sets.problem_sets`): rows of models on the same problems pair problem by problem. With
    `longer_cap`, greedy decoding runs again under that longer cap at each model's full depth and headline cut
    (`headline_row`), in the same pass over the model, and the cut's row carries it (`longer`, `longer_caps`): how
    much of the cut's cost is answers the chapter's cap cut off.
    """
    if longer_cap is not None and longer_cap <= max_new_tokens:
        raise ValueError(f"longer_cap ({longer_cap}) must exceed max_new_tokens ({max_new_tokens}): it reads the cut's "
                         "cost again under a longer cap; use None to skip it")
    size = subset_size(search_problems, power_subsets)
    rows = []
    settings = chapter_settings(searches, max_new_tokens=max_new_tokens, shots=shots, seed=seed)
    sweep = SweepSettings.from_parameters(critical_sweep) if isinstance(critical_sweep, dict) else critical_sweep
    for name in models:
        order = search_order(problems_of(problems, name), size)
        model = load_model(name, dtype=dtype)
        n_layers = model.n_layers
        full_flops = model_cost(model.config).flops_per_token
        choice = choose_depths(model, name, n_layers, depths, sweep)
        if choice.sweep is not None:  # the lens's cut points, for the depth figure to mark
            choice = replace(choice, cuts=stored_cut_points(model, name, choice.sweep, batch_size))
        plan = depth_plan(n_layers, list(choice.depths), search_problems, power_subset(power_subsets, name))
        seeds = depth_seeds(choice, seeds_at, n_seeds)
        decoded = sample_at_depths(model, order, settings, list(plan), limits=plan, n_seeds=n_seeds,
                                   seeds=seeds, batch_size=batch_size, engine=engine)
        for variant, runs in decoded.items():
            depth, k = variant[1], seeds.get(variant, n_seeds)
            greedy, low, warm = runs["greedy"], runs["low_temperature"], runs["temperature"]
            chains, particles = runs["power"], runs["smc"]
            rates = [r["acceptance"] for per in chains for r in per if r["acceptance"] is not None]
            rows.append(DepthRow(
                model=name, depth=depth, n_layers=n_layers, n_problems=len(order),
                accuracy={"greedy": mean_accuracy(greedy), "low": mean_accuracy(low),
                          "temperature": mean_accuracy(warm), "best_of_n": best_of_n(warm),
                          "majority": majority_vote(warm), "power": mean_accuracy(chains),
                          "smc": mean_accuracy(particles)},
                acceptance=float(np.mean(rates)) if rates else float("nan"),
                tokens_greedy=tokens_per_problem(greedy), tokens_power=tokens_per_problem(chains),
                tokens_smc=tokens_per_problem(particles),
                flops_share=model_cost(model.config, depth).flops_per_token / full_flops,
                size=model_size(model.config),
                pass_at_k={"temperature": [pass_at_k(warm, j) for j in range(1, k + 1)],
                           "power": [pass_at_k(chains, j) for j in range(1, k + 1)]},
                scores={"greedy": per_problem(greedy), "low": per_problem(low), "temperature": per_problem(warm),
                        "best_of_n": per_problem(warm, "best_of_n"), "majority": per_problem(warm, "majority"),
                        "power": per_problem(chains), "smc": per_problem(particles)},
                n_seeds=k,
                outcomes={"greedy": outcome_shares(greedy, max_new_tokens), "power": outcome_shares(chains, max_new_tokens),
                          "smc": outcome_shares(particles, max_new_tokens)},
                ends={"greedy": ended(greedy, max_new_tokens), "power": ended(chains, max_new_tokens),
                      "smc": ended(particles, max_new_tokens)},
                loops={"greedy": looping(greedy), "power": looping(chains), "smc": looping(particles)},
                resamples=float(np.mean([r["resamples"] for per in particles for r in per])), choice=choice,
                multiplier=token_multiplier(chains, greedy), sharp=sharpness(greedy, warm),
                problem_ids=tuple(p.id for p in order), problem_levels=tuple(p.level for p in order),
                costs={key: {"tokens": cost_per_problem(runs[name]), "seconds": cost_per_problem(runs[name], "seconds")}
                       for key, name in (("power", "power"), ("smc", "smc"))},
                family=str(getattr(model.config, "model_type", ""))))
        cut, full = headline_row(rows, name)
        if longer_cap is not None and cut is not full:
            cut.longer = _longer_cap(model, order, cut, full, longer_cap, max_new_tokens=max_new_tokens,
                                     shots=shots, seed=seed, batch_size=batch_size, engine=engine)
        del model
    return rows


def comparisons(rows: Sequence[DepthRow]) -> list[tuple[str, str, PairedDifference]]:
    """(model, label, paired difference) of power sampling against low-temperature sampling at every depth of every
    model, the smaller first: whether sampling p^α differs from sharpening each token, the one comparison the decomposition and the SMC
    table do not already make."""
    return [(r.model, f"power − low temperature, both at {r.depth}", paired_prefix(r.scores["power"], r.scores["low"]))
            for mine in per_model(rows, by_size=True) for r in mine]


@dataclass
class StepsSweep:
    """MH power sampling at one depth for several numbers of steps per block N (0: the proposal alone), and the
    other MH mode at the chapter's own N on the same problems."""

    model: str
    depth: int
    n_layers: int
    steps: list[int]
    accuracy: list[float]  # per entry of `steps`
    tokens: list[float]  # decoded tokens per answer, rejected proposals included
    scores: dict[int, list[float]]  # N -> per-problem score (share of correct seeds), problem order
    n_problems: int
    n_seeds: int
    mode: str
    chapter_steps: int  # the chapter's own N
    other_mode: str | None = None
    other_accuracy: float = float("nan")
    other_tokens: float = float("nan")
    other_scores: list[float] = field(default_factory=list)

    def difference(self) -> tuple[int, int, PairedDifference]:
        """(largest N, the N it is set against, their paired difference): the largest against N = 1 when both were
        run, else against the smallest."""
        top = max(self.steps)
        base = 1 if 1 in self.steps and top != 1 else min(self.steps)
        return top, base, paired_prefix(self.scores[top], self.scores[base])

    def other_versus_chapter(self) -> PairedDifference:
        """The other MH mode minus the chapter's, both at the chapter's N, paired over the problems both ran."""
        return paired_prefix(self.other_scores, self.scores[self.chapter_steps])


def steps_sweep(model_name: str, problems: Sequence[Problem], depth: int | None, searches: Searches,
                steps: Sequence[int], *, n_seeds: int, max_new_tokens: int, shots: int, seed: int, batch_size: int,
                engine: str = "slot", search_problems: int | None = None, other_mode: bool = True,
                dtype: str = "auto") -> StepsSweep:
    """Does N matter? MH power sampling of `model_name` stitched to `depth` blocks (None: one below full) with each
    number of steps per block in `steps`, all else as `searches`' MH settings, on the first `search_problems` problems of the
    chapters' order (all: None); with `other_mode`, the other MH mode at the chapter's N too. Runs the chapter
    already made (its own N) are read from the store."""
    if not steps or any(not isinstance(n, int) or isinstance(n, bool) or n < 0 for n in steps):
        raise ValueError(f"steps must be a non-empty list of integers of at least 0 (MH steps per block), got "
                         f"{steps!r}")
    subset = search_order(problems, search_problems)[:search_problems]
    model = load_model(model_name, dtype=dtype)
    n_layers = model.n_layers
    depth = n_layers - 1 if depth is None else depth
    m = model.at_depth(depth)

    power = searches.power
    ordered = sorted(set(steps) | {power.mcmc_steps})
    configs = {n: replace(power, mcmc_steps=n) for n in ordered}
    other = other_mode_config(power) if other_mode and power.mcmc_steps > 0 else None
    if other:
        configs[other.mode] = other
    runs = sample_methods(m, subset, {
        name: DecodeSettings("power", max_new_tokens, shots, seed, target=searches.target, power=cfg)
        for name, cfg in configs.items()},
        n_seeds=n_seeds, batch_size=batch_size, engine=engine)  # one engine run for every N
    keep = [n for n in ordered if n in steps]
    sweep = StepsSweep(model_name, depth, n_layers, keep, [mean_accuracy(runs[n]) for n in keep],
                       [tokens_per_problem(runs[n]) for n in keep], {n: per_problem(runs[n]) for n in ordered},
                       len(subset), n_seeds, power.mode, power.mcmc_steps)
    if other:
        chains = runs[other.mode]
        sweep.other_mode, sweep.other_accuracy = other.mode, mean_accuracy(chains)
        sweep.other_tokens, sweep.other_scores = tokens_per_problem(chains), per_problem(chains)
    return sweep


def other_mode_config(power: PowerConfig) -> PowerConfig:
    """The same MH chain in the other mode: each mode's proposal at its defaults (top-k 0: the published 50 in
    reference mode, the full distribution in exact mode) and the block count the length sets (blocks 0), since exact
    mode takes no other and a reference chain's `blocks` is the published loop's, not exact mode's."""
    return replace(power, mode="reference" if power.mode == "exact" else "exact", top_k=0, blocks=0).validate()


def deepest_truncation(rows: Sequence[DepthRow]) -> int | None:
    """The deepest stitched depth the chapter tested for its first model (the critical depth in the profiles that
    name their depths by it), or None when only the full model ran."""
    mine = [r.depth for r in rows if r.model == rows[0].model and r.depth < r.n_layers]
    return max(mine) if mine else None


def headline_row(rows: Sequence[DepthRow], model: str) -> tuple[DepthRow, DepthRow]:
    """(the row power sampling is judged at, the full-depth row) of one model: its deepest truncation (the critical
    depth where the profile names depths by it), or the full model where no truncation ran."""
    mine = [r for r in rows if r.model == model]
    full = next(r for r in mine if r.depth == r.n_layers)
    cut = max((r for r in mine if r.depth < r.n_layers), key=lambda r: r.depth, default=full)
    return cut, full


def by_size(rows: Sequence[DepthRow]) -> list[str]:
    """The rows' models, the smaller first (by `model_size`, the book's one rule for sizes)."""
    return sorted(dict.fromkeys(r.model for r in rows), key=lambda m: next(r.size for r in rows if r.model == m))


def size_pair(rows: Sequence[DepthRow]) -> list[str]:
    """The two smallest models (`by_size`) that are sizes of one family: the same architecture and post-training, on
    the very same problems, so that their answers pair problem by problem; fewer where no two models are."""
    groups: dict[tuple, list[str]] = {}
    for m in by_size(rows):
        r = next(r for r in rows if r.model == m)
        groups.setdefault((r.family, post_training(m), r.problem_ids), []).append(m)
    return next((g[:2] for g in groups.values() if len(g) >= 2), [])


def best_truncation(rows: Sequence[DepthRow], key: str) -> DepthRow | None:
    """The first model's truncated depth where the method `key` scored best (the deeper on a tie); None where no
    truncated depth ran."""
    mine = [r for r in rows if r.model == rows[0].model and r.depth < r.n_layers]
    return max(mine, key=lambda r: (r.accuracy[key], r.depth), default=None)


def mean_resamples(rows: Sequence[DepthRow]) -> float:
    """SMC's resampling events per sample, averaged over every depth of every model (NaN where SMC ran nowhere)."""
    ran = [r.resamples for r in rows if r.count("smc")]
    return float(np.mean(ran)) if ran else float("nan")


@dataclass(frozen=True)
class SizeContrast:
    """The report's contrast between sizes (`size_pair`, the smaller first): for each, the (cut, full) rows and
    power sampling at the cut minus its own full-depth greedy; and the larger's difference minus the smaller's,
    paired over the problems both ran."""

    rows: list[tuple[DepthRow, DepthRow]]
    differences: list[PairedDifference]
    gap: PairedDifference


def size_contrast(rows: Sequence[DepthRow]) -> SizeContrast | None:
    """`SizeContrast` of the two sizes of one family (None where the rows hold no such pair)."""
    models = size_pair(rows)
    if len(models) < 2:
        return None
    pairs = [headline_row(rows, m) for m in models[:2]]
    diffs = []
    for cut, full in pairs:
        n = min(len(cut.scores["power"]), len(full.scores["greedy"]))
        diffs.append(np.asarray(cut.scores["power"][:n]) - np.asarray(full.scores["greedy"][:n]))
    n = min(len(x) for x in diffs)
    return SizeContrast(pairs, [cut.paired("power", full, "greedy") for cut, full in pairs],
                        paired_difference(list(diffs[1][:n]), list(diffs[0][:n])))


def headline_rows(rows: Sequence[DepthRow]) -> list[tuple[DepthRow, DepthRow]]:
    """`headline_row` of every model, the smaller first (the size figure's panels)."""
    return [headline_row(rows, m) for m in by_size(rows)]


@dataclass(frozen=True)
class Explained:
    """One model's answer taken apart: its cut and full-depth rows and, per search of `SEARCHES`, the five paired
    terms of `helpers.evaluation.decomposition`."""

    cut: DepthRow
    full: DepthRow
    parts: dict[str, Decomposition]


def explain(rows: Sequence[DepthRow]) -> list[Explained]:
    """Every model with a truncation, the smaller first (`headline_rows`): what the cut costs greedy, what MH and low
    temperature recover at the cut and gain at full depth, and their difference, each paired over the same
    problems."""
    out = []
    for cut, full in headline_rows(rows):
        if cut is not full:
            out.append(Explained(cut, full, {key: decompose(full.scores["greedy"], cut.scores["greedy"],
                                                            full.scores[key], cut.scores[key], search=key,
                                                            n_problems=full.n_problems)
                                             for key, _ in SEARCHES}))
    return out


def at_setting(parameters: Mapping | None, models: Sequence[str] | None = None) -> list[DepthRow]:
    """`compare_methods` at another setting of this chapter, the rows of its robustness comparison ([] without one).

    `parameters` is this chapter's parameters cell as another profile sets it (`helpers.runner.planning.other_setting`
    resolves a profile's name to them): the same models on the same problems under another token cap or block size.
    With `released` true (that profile is read from the results release) its records are read and none is computed:
    a missing one stops the chapter with an error that names it. `models`: the chapter's own, in its order (those
    of the other setting among them; None: all of the other setting's), so that nothing the chapter leaves out runs."""
    if not parameters:
        return []
    p = {**parameters, "models": [m for m in models if m in parameters["models"]] if models else parameters["models"]}
    searches = Searches.from_parameters({name: p[name] for name in SEARCH_PARAMETERS})
    problems = problem_sets(p["models"], p["dataset"], n=p["n_problems"], levels=p["levels"],
                            model_levels=p["model_levels"], seed=p["seed"])
    with reading_release_only(bool(p.get("released"))):
        return compare_methods(p["models"], problems, p["depths"], searches, n_seeds=p["n_seeds"],
                               max_new_tokens=p["max_new_tokens"], shots=p["shots"], seed=p["seed"],
                               batch_size=p["batch_size"], engine=p["engine"], search_problems=p["search_problems"],
                               power_subsets=p["power_subsets"], critical_sweep=p["critical_sweep"],
                               seeds_at=p["seeds_at"], longer_cap=p["longer_cap"], dtype=p["dtype"])


def cap_part(e: Explained, check: LongerCap) -> PairedDifference:
    """How much less the cut costs greedy decoding under the longer cap of `check` than at the rows' own cap, paired
    by problem: the part of the cut's cost that answers the shorter cap cut off made."""
    full, cut = e.full.scores["greedy"], e.cut.scores["greedy"]
    return paired_difference([c - f for c, f in zip(check.cut, check.full, strict=True)],
                             [c - f for c, f in zip(cut, full, strict=True)])


def longer_caps(rows: Sequence[DepthRow]) -> list[LongerCap]:
    """`LongerCap` of every model with a cut (`headline_rows`), smaller first, where `compare_methods` decoded under a
    longer cap ([] where it did not)."""
    return [cut.longer for cut, full in headline_rows(rows) if cut is not full and cut.longer is not None]


def _longer_cap(model: ModelHandle, order: Sequence[Problem], cut: DepthRow, full: DepthRow, cap: int, *,
                max_new_tokens: int, shots: int, seed: int, batch_size: int, engine: str) -> LongerCap:
    """Greedy decodes of one model under `cap`, longer than `max_new_tokens`, at its full depth and its headline cut,
    on the rows' problems in their order: stored like every decode, so the greedy records of chapter 03's sweep at
    that cap are read, not recomputed."""
    greedy = {"greedy": DecodeSettings("greedy", max_new_tokens=cap, shots=shots, seed=seed)}  # as chapter_settings
    runs = sample_at_depths(model, order, greedy, [("stitch", full.n_layers), ("stitch", cut.depth)],
                            n_seeds=1, batch_size=batch_size, engine=engine)
    at_full, at_cut = (runs[("stitch", d)]["greedy"] for d in (full.n_layers, cut.depth))
    share = [sum(outcome_shares(r, cap)[o] for o in UNFINISHED) for r in (at_full, at_cut)]
    return LongerCap(full.model, full.n_layers, cut.depth, cap, max_new_tokens, tuple(per_problem(at_full)),
                     tuple(per_problem(at_cut)), *share)


@dataclass(frozen=True)
class DepthAxis:
    """One model's accuracy against blocks kept, as the report's Figure 2 draws it: chapter 03's stitched greedy
    curve, where it ran on this chapter's problems and settings (`curve`, else empty and `why` says so), and this
    chapter's methods at each depth it searched (`rows`), with the critical depth."""

    model: str
    n_layers: int
    critical: int | None
    curve: dict[int, float]
    curve_problems: int
    rows: tuple[DepthRow, ...]
    why: str = ""  # why chapter 03's curve is not drawn ('' where it is)
    sweep_subset: SweepSubset | None = None  # where chapter 03 swept a part of these problems: which, and how easy
    subset_only: bool = False  # the curve is not drawn only because chapter 03 swept a part of these problems
    cuts: tuple[int, ...] = ()  # chapter 03's lens cut points for this model (blocks kept), which the figure marks


@dataclass(frozen=True)
class SweepSubset:
    """Chapter 03's sweep ran on a part of this chapter's problems (the first ones of each level): how many, and full-
    depth greedy accuracy there and on all of this chapter's problems, so a page can say how much easier they are."""

    n: int
    of: int
    full_greedy: float  # on the sweep's problems
    full_greedy_all: float  # on all of this chapter's

    def describe(self) -> str:
        """'the first 16 of these 100 problems, where full-depth greedy scores 62% against 41% on all 100'."""
        return (f"the first {self.n} of these {self.of} problems, where full-depth greedy scores "
                f"{100 * self.full_greedy:.0f}% against {100 * self.full_greedy_all:.0f}% on all {self.of}")


def sweep_subset(mine: Sequence[DepthRow], choice) -> SweepSubset | None:
    """Where chapter 03's stored sweep (`choice.sweep`) ran on some of this chapter's problems and not all: which share,
    and how easy it was for the full model's greedy decoding; None where it ran all of them, others, or none."""
    from helpers.data.model_sets import problem_sets

    full = next((r for r in mine if r.depth == r.n_layers and r.scores.get("greedy")), None)
    if choice is None or choice.sweep is None or full is None:
        return None
    sweep = choice.sweep
    theirs = {p.id for p in problem_sets([full.model], sweep.dataset, n=sweep.n_problems, levels=sweep.levels,
                                         seed=sweep.seed)[full.model]}
    ours = list(full.problem_ids)
    if not theirs < set(ours):
        return None
    scores = full.scores["greedy"]
    inside = [s for pid, s in zip(ours, scores, strict=True) if pid in theirs]
    return SweepSubset(len(inside), len(ours), float(np.mean(inside)), float(np.mean(scores)))


def depth_axes(rows: Sequence[DepthRow], *, max_new_tokens: int, shots: int) -> list[DepthAxis]:
    """`DepthAxis` of every model, smaller first. Chapter 03's curve is set beside this chapter's numbers only where
    it decoded the very same problems greedily with the same cap and shots (its stored settings say which), so that
    every point of a panel is measured on the same problems; otherwise the panel draws this chapter's depths only."""
    from helpers.data.model_sets import problem_sets

    out = []
    for model in by_size(rows):
        mine = tuple(sorted((r for r in rows if r.model == model), key=lambda r: -r.depth))
        choice = next((r.choice for r in mine if r.choice is not None), None)
        curve, why, subset_only = {}, "", False
        part = sweep_subset(mine, choice) if choice is not None else None  # once: it generates chapter 03's problems
        if choice is None or not choice.curve or choice.sweep is None:
            why = "chapter 03 stored no sweep of it under this build's settings"
        else:
            sweep = choice.sweep
            theirs = problem_sets([model], sweep.dataset, n=sweep.n_problems, levels=sweep.levels, seed=sweep.seed)[model]
            same = (sorted(p.id for p in theirs) == sorted(mine[0].problem_ids) and sweep.max_new_tokens == max_new_tokens
                    and sweep.shots == shots)
            if same:
                curve = dict(choice.curve)
            elif part is not None and sweep.max_new_tokens == max_new_tokens:
                why, subset_only = f"chapter 03 swept {part.describe()}", True
            else:
                why = (f"chapter 03 swept {counted(len(theirs), 'problem')} at {sweep.max_new_tokens} new tokens, "
                       f"not this chapter's {mine[0].n_problems} at {max_new_tokens}")
        out.append(DepthAxis(model, mine[0].n_layers, choice.critical if choice else None, curve,
                             choice.curve_problems if curve else 0, mine, why, part, subset_only,
                             choice.cuts if choice else ()))
    return out


def report_gains() -> dict[str, float]:
    """The report's headline gains (power sampling at the cut − greedy at full depth), in points, by model size."""
    return {name.split("-")[-1]: 100 * (r["power_truncated"] - r["greedy_full"]) for name, r in REPORT_HEADLINE.items()}


def excluded_gains(d: PairedDifference) -> dict[str, float]:
    """The report's gains (`report_gains`) that a paired interval leaves out, above its upper end."""
    return {size: g for size, g in report_gains().items() if g > 100 * d.high}


# --------------------------------------------------------------------------------------------------
# Which problems each model runs: the scan that chose a model's own levels
# --------------------------------------------------------------------------------------------------


def level_scans(models: Sequence[str], model_levels: Mapping[str, Sequence[int]] | None, dataset: str, n: int,
                searches: Searches, *, max_new_tokens: int, shots: int, seed: int, batch_size: int,
                engine: str = "slot", dtype: str = "auto") -> list[LevelScan]:
    """For each model `model_levels` names, in `models`' order: its greedy accuracy at full depth on the first `n`
    problems of every level of `dataset` (none where no model has levels of its own)."""
    named = [m for m in models if m in (model_levels or {})]
    if not named:
        return []
    greedy = {"greedy": chapter_settings(searches, max_new_tokens=max_new_tokens, shots=shots, seed=seed)["greedy"]}
    pool = per_level(load_problems(dataset, n=n if dataset == "arithmetic" else None, seed=seed), n)  # one for all
    scans = []
    for name in named:
        model = load_model(name, dtype=dtype)
        runs = sample_at_depths(model, pool, greedy, [("stitch", model.n_layers)], n_seeds=1,
                                batch_size=batch_size, engine=engine)
        scans.append(level_scan(name, pool, runs[("stitch", model.n_layers)]["greedy"], model_levels[name]))
        del model
    return scans


def corrected(ds: Sequence[PairedDifference]) -> list[PairedDifference]:
    """The headline's differences, one per model, each with its p after Holm's correction across them (`holm`): the
    answer asks one question of several models, so its words read the corrected p (one model: unchanged)."""
    if len(ds) < 2:
        return list(ds)
    return [replace(d, p_value=p) for d, p in zip(ds, holm([d.p_value for d in ds]), strict=True)]
