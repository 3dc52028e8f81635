"""Chapter 05: what power sampling costs, what truncation saves, and which method is best at equal compute.

Everything here is read from chapter 04's stored decodes (`helpers.evaluation.decodes.sample` finds them by their
settings); the only new decoding is the extra temperature-1 samples that give best-of-k and majority vote
the same token budget as one power sample (MH) or K particles (SMC).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from helpers.data.problems import Problem, problems_of
from helpers.data.published import REPORT_SETTINGS
from helpers.evaluation.comparison import (
    depth_plan,
    depth_seeds,
    power_subset,
    search_order,
    subset_size,
)
from helpers.evaluation.cost import (
    Shape,
    block_ends,
    break_even_depth,
    expected_decoded_tokens,
    flops_share,
    model_cost,
    model_size,
    qwen25_math_configs,
    report_extra_tokens,
    report_multiplier,
    schedule_multiplier,
    token_multiplier,
)
from helpers.evaluation.critical import SweepSettings, choose_depths
from helpers.evaluation.decodes import mean_accuracy, per_problem, sample, sample_at_depths
from helpers.evaluation.stats import PairedDifference, paired_prefix, wilson
from helpers.models.loading import load_model
from helpers.samplers.power import PowerConfig
from helpers.samplers.settings import Searches, chapter_settings
from helpers.samplers.smc import SMCConfig

LABELS = {"greedy": "greedy", "low_temperature": "low temp.", "temperature": "T=1", "power": "power", "smc": "SMC"}

REPORT = REPORT_SETTINGS  # the report's §4.2.4 settings (helpers.data.published)


# --------------------------------------------------------------------------------------------------
# The token count three ways
# --------------------------------------------------------------------------------------------------


@dataclass
class ReportArithmetic:
    """The report's formula against the exact count of its own schedule, at its own settings."""

    formula: float  # extra tokens per answer token, N·T/(4B)
    exact: float  # the same quantity from the block schedule
    blocks: list[int]  # where the blocks end

    def glue_values(self) -> dict:
        return {"report_formula": self.formula, "report_exact": self.exact, "report_exact_total": self.exact + 1,
                "report_blocks": ", ".join(str(b) for b in self.blocks)}


def report_arithmetic() -> ReportArithmetic:
    """8.84× by the report's formula; the four blocks of the same schedule summed exactly."""
    T, B, N = REPORT["length"], REPORT["block_size"], REPORT["mcmc_steps"]
    return ReportArithmetic(report_multiplier(T, B, N), schedule_multiplier(T, B, N), block_ends(T, B))


def token_curves(lengths: Sequence[int], block_size: int, mcmc_steps: int, max_new_tokens: int | None = None) -> dict:
    """Decoded tokens per answer against its length T: plain decoding, the report's formula, the exact schedule
    in both modes (the exact mode moving up to `max_new_tokens`)."""
    T = np.asarray(lengths, dtype=float)
    return {
        "length": T,
        "plain": T,
        "formula": T + np.array([report_extra_tokens(float(t), block_size, mcmc_steps) for t in T]),
        "reference": np.array([expected_decoded_tokens(int(t), block_size, mcmc_steps) for t in T]),
        "exact": np.array([expected_decoded_tokens(int(t), block_size, mcmc_steps, mode="exact",
                                                   max_new_tokens=max_new_tokens) for t in T]),
    }


def token_panels(power: PowerConfig, max_new_tokens: int) -> dict[str, dict]:
    """The token-count figure's two panels: the report's settings, and this build's (its MH mode named)."""
    return {
        f"the report: N = {REPORT['mcmc_steps']}, B = {REPORT['block_size']}": token_curves(
            range(16, 1025, 16), REPORT["block_size"], REPORT["mcmc_steps"]),
        f"this build: N = {power.mcmc_steps}, B = {power.block_size}, {power.mode} mode": token_curves(
            range(1, max(max_new_tokens, 1) + 1), power.block_size, power.mcmc_steps, max_new_tokens),
    }


# --------------------------------------------------------------------------------------------------
# Measured cost and accuracy of every method chapter 04 ran
# --------------------------------------------------------------------------------------------------


@dataclass
class Point:
    """One method at one depth: its accuracy and what one answer cost."""

    model: str
    depth: int
    n_layers: int
    method: str
    accuracy: float
    scores: list[float]  # per problem, in problem order
    samples: int  # samples decoded per answer (k for best-of-k and majority-of-k)
    tokens: float  # decoded tokens per answer, rejected proposals included
    prefill: float  # prompt and context tokens run through the model per answer
    seconds: float  # wall time per answer
    flops: float  # decoded tokens × FLOPs per token at this depth
    matched: bool = False  # a best-of-k or majority-of-k given power sampling's budget

    @property
    def label(self) -> str:
        return f"{self.method} @ {self.depth}"

    def accuracy_on(self, k: int) -> float:
        """The accuracy on the first `k` problems (those another method ran on)."""
        return float(np.mean(self.scores[:k]))

    @property
    def n_problems(self) -> int:
        return len(self.scores)


@dataclass
class Measured:
    """Everything chapter 05 reads from the stored decodes of one model."""

    model: str
    n_layers: int
    power: PowerConfig
    max_new_tokens: int
    points: list[Point]
    power_records: dict[int, list[dict]]  # depth -> every power-sampled record (MH)
    greedy_tokens: dict[int, float]  # depth -> greedy tokens per answer
    matched_k: dict[int, int]  # depth -> k samples that cost one power sample
    context: float  # mean prompt + half an answer: the context a generated token attends to
    full_flops: float  # FLOPs per generated token of the full model at that context
    config: object = field(repr=False)
    break_even: int | None = None  # deepest model whose power sampling costs no more than full greedy
    break_even_accuracy: float | None = None  # stitched greedy accuracy there (None: not run)
    smc: SMCConfig | None = None
    smc_records: dict[int, list[dict]] = field(default_factory=dict)  # depth -> every SMC record
    multipliers: dict[int, float] = field(default_factory=dict)  # depth -> `token_multiplier` there
    full_multipliers: dict[int, float] = field(default_factory=dict)  # depth -> MH there against full-depth greedy
    smc_multipliers: dict[int, float] = field(default_factory=dict)  # depth -> SMC's, on SMC's own problems
    mh_on_smc_problems: dict[int, float] = field(default_factory=dict)  # depth -> MH's, on SMC's problems only
    smc_problems: int = 0  # how many problems SMC ran on (the searches' subset)
    smc_full_multipliers: dict[int, float] = field(default_factory=dict)  # depth -> SMC there against full-depth
    # greedy on SMC's problems: what truncating to that depth must pay for


def mean_of(records: Sequence[dict], key: str) -> float:
    """The mean of `key` over the records that hold it (0 where none does)."""
    values = [r[key] for r in records if r.get(key) is not None]
    return float(np.mean(values)) if values else 0.0


def _point(m: tuple[str, int, int, float], method: str, records: Sequence[Sequence[dict]], samples: int = 1,
           rule: str = "mean", matched: bool = False) -> Point:
    """Price one method's records[problem][sample] at (model, depth, L, FLOPs per token) `m`."""
    name, depth, L, per_token = m
    flat = [r for per in records for r in per]
    scores = per_problem(records, rule)
    tokens = samples * mean_of(flat, "decoded_tokens")
    return Point(name, depth, L, method, float(np.mean(scores)) if scores else 0.0, scores, samples, tokens,
                 samples * mean_of(flat, "prefill_tokens"), samples * mean_of(flat, "seconds"), tokens * per_token, matched)


def measure(name: str, problems: Sequence[Problem] | Mapping[str, Sequence[Problem]], depths: Sequence[int | str] | None, searches: Searches, *,
            n_seeds: int, max_new_tokens: int, shots: int, seed: int, batch_size: int, matched: bool = True,
            engine: str = "slot", search_problems: int | None = None, power_subsets: dict[str, int] | None = None,
            critical_sweep: SweepSettings | dict | None = None,
            seeds_at: Mapping[int | str, int] | None = None, dtype: str = "auto") -> Measured:
    """Read chapter 04's decodes of `name` at every depth (decoding only what is missing) and price them.

    With `matched`, temperature-1 sampling is extended to k samples per problem, k = ceil(power tokens per
    sample / temperature tokens per sample), so that best-of-k and majority-of-k spend what power sampling does,
    and to K samples, SMC's particle count, so that they draw as many candidates as SMC does.
    Also decodes greedily at the break-even depth (read from the store where chapter 03 swept it), to say
    whether the model still works there. The decodes are chapter 04's: the same settings
    (`helpers.samplers.settings.chapter_settings`) through the same call, on the same `engine`, on the same problems
    (`search_problems`, `power_subsets` and `seeds_at`: chapter 04's `search_order`, `search_limits` and
    `depth_seeds`); the matched
    baselines, being off the headline, run on the searches' subset. `problems` is one list for every model, or each
    model's own (`helpers.data.model_sets.problem_sets`), as chapter 04's.
    """
    mh_subset = power_subset(power_subsets, name)
    problems = search_order(problems_of(problems, name), subset_size(search_problems, power_subsets))
    model = load_model(name, dtype=dtype)
    L = model.n_layers
    settings = chapter_settings(searches, max_new_tokens=max_new_tokens, shots=shots, seed=seed)
    power, smc = searches.power, searches.smc
    common = dict(batch_size=batch_size, engine=engine)
    decoded: dict[int, dict[str, list[list[dict]]]] = {}
    matched_k: dict[int, int] = {}
    sweep = SweepSettings.from_parameters(critical_sweep) if isinstance(critical_sweep, dict) else critical_sweep
    choice = choose_depths(model, name, L, depths, sweep)
    plan = depth_plan(L, list(choice.depths), search_problems, mh_subset)
    seeds = depth_seeds(choice, seeds_at, n_seeds)
    by_variant = sample_at_depths(model, problems, settings, list(plan), limits=plan, n_seeds=n_seeds,
                                  seeds=seeds, **common)
    drawn: dict[int, int] = {}  # samples per problem at each depth
    for variant, by_method in by_variant.items():
        depth = variant[1]
        drawn[depth] = seeds.get(variant, n_seeds)
        runs = {label: by_method[method] for method, label in LABELS.items()}
        per_power = mean_of([r for per in runs["power"] for r in per], "decoded_tokens")
        per_plain = mean_of([r for per in runs["T=1"] for r in per], "decoded_tokens")
        matched_k[depth] = k = max(1, math.ceil(per_power / max(per_plain, 1.0)))
        if matched:
            most = max(k, smc.particles)
            mh_problems = problems[:search_problems or len(problems)]  # off the headline: the searches' subset
            warm = sample(model.at_depth(depth), mh_problems, settings["temperature"], n_seeds=most, **common) \
                if most > drawn[depth] else runs["T=1"][:len(mh_problems)]
            runs["T=1 (k)"] = [per[:k] for per in warm]
            runs["T=1 (K)"] = [per[:smc.particles] for per in warm]
        decoded[depth] = runs
    every = [r for runs in decoded.values() for v in runs.values() for per in v for r in per]
    context = mean_of(every, "prompt_tokens") + mean_of(every, "n_tokens") / 2
    points = []
    for depth, runs in decoded.items():
        at = (name, depth, L, model_cost(model.config, depth, context).flops_per_token)
        points += [_point(at, method, runs[method]) for method in ("greedy", "low temp.", "T=1", "power", "SMC")]
        k = matched_k[depth] if "T=1 (k)" in runs else None
        big = smc.particles if "T=1 (K)" in runs else None
        n = drawn[depth]
        if n > 1 and n not in (k, big):
            points += [_point(at, f"best-of-{n}", runs["T=1"], n, "best_of_n"),
                       _point(at, f"majority-of-{n}", runs["T=1"], n, "majority")]
        for size, key in ((k, "T=1 (k)"), (big, "T=1 (K)")):
            if size is not None and size > 1 and not any(p.depth == depth and p.samples == size and p.matched
                                                         for p in points):
                points += [_point(at, f"best-of-{size}", runs[key], size, "best_of_n", matched=True),
                           _point(at, f"majority-of-{size}", runs[key], size, "majority", matched=True)]
    greedy_tokens = {d: mean_of([r for per in runs["greedy"] for r in per], "decoded_tokens") for d, runs in decoded.items()}
    multipliers = {d: token_multiplier(runs["power"], runs["greedy"]) for d, runs in decoded.items()}
    full_multipliers = {d: token_multiplier(runs["power"], decoded[L]["greedy"]) for d, runs in decoded.items()}
    smc_multipliers = {d: token_multiplier(runs["SMC"], runs["greedy"]) for d, runs in decoded.items() if runs["SMC"]}
    smc_full = {d: token_multiplier(runs["SMC"], decoded[L]["greedy"]) for d, runs in decoded.items() if runs["SMC"]}
    mh_on_smc = {d: token_multiplier(runs["power"][:len(runs["SMC"])], runs["greedy"]) for d, runs in decoded.items()
                 if runs["SMC"]}  # like with like: MH on the problems SMC ran
    even = break_even_depth(model.config, multipliers[L], context)
    even_accuracy = None
    if even is not None and 2 <= even < L:
        even_accuracy = mean_accuracy(sample(model.at_depth(even), problems, settings["greedy"], **common))
    measured = Measured(name, L, power, max_new_tokens, points,
                        {d: [r for per in runs["power"] for r in per] for d, runs in decoded.items()},
                        greedy_tokens, matched_k, context, model_cost(model.config, L, context).flops_per_token,
                        model.config, even, even_accuracy, smc,
                        {d: [r for per in runs["SMC"] for r in per] for d, runs in decoded.items()}, multipliers,
                        full_multipliers, smc_multipliers, mh_on_smc,
                        max((len(runs["SMC"]) for runs in decoded.values()), default=0), smc_full)
    del model
    return measured


def measure_models(names: Sequence[str], problems: Sequence[Problem] | Mapping[str, Sequence[Problem]], depths: Sequence[int | str] | None,
                   searches: Searches, **settings) -> list[Measured]:
    """`measure` for each of this build's models, in the profile's order: the chapter's sections price the first,
    the sizes section every one."""
    return [measure(name, problems, depths, searches, **settings) for name in names]


def cut_depth(m: Measured) -> int:
    """The truncation this chapter prices: chapter 04's headline cut on `m`'s model, the truncated depth nearest the
    full one (the critical depth where the profile names depths by it, not a depth below it that chapter 04 also
    searched; the full depth where no truncation ran), as `power_sampling.headline_row` picks it."""
    below = [d for d in m.greedy_tokens if d < m.n_layers]
    return max(below, default=m.n_layers)


def multiplier_values(m: Measured) -> dict:
    """Power sampling's measured token multiplier at the full depth, set against the two predictions."""
    L, cfg = m.n_layers, m.power
    records = m.power_records[L]
    decoded = mean_of(records, "decoded_tokens")
    length = mean_of(records, "n_tokens")
    predicted = float(np.mean([expected_decoded_tokens(r["n_tokens"], cfg.block_size, cfg.mcmc_steps, mode=cfg.mode,
                                                       max_new_tokens=m.max_new_tokens) for r in records]))
    formula = float(np.mean([r["n_tokens"] + report_extra_tokens(r["n_tokens"], cfg.block_size, cfg.mcmc_steps)
                             for r in records]))
    return {"measured_tokens": decoded, "power_length": length, "predicted_tokens": predicted,
            "formula_tokens": formula, "greedy_tokens": decoded / m.multipliers[L],
            "multiplier_vs_greedy": m.multipliers[L], "multiplier_vs_own": decoded / max(length, 1e-9),
            "multiplier_problems": len({r["id"] for r in records})}


def matched_reach(tests: Sequence[PairedDifference]) -> tuple[tuple[int, int], float] | None:
    """What compute-matched tests (`matched_comparisons`' differences) can see: the fewest and most problems one ran
    on, and the median half-width of their paired 95% intervals, as a share (None where none ran)."""
    if not tests:
        return None
    return (min(d.n for d in tests), max(d.n for d in tests)), float(np.median([(d.high - d.low) / 2 for d in tests]))


@dataclass(frozen=True)
class UnseenBlocks:
    """Chains the exact count gives one block that ran more. A `reference` chain stops only at the end of a block whose
    answer still ends in EOS after that block's moves: a move that swaps a finished ending for an unfinished one sends
    it into another block (B more tokens, N more moves), which a count from the final length cannot see. The records
    keep a chain's acceptance rate, the mean of its blocks' rates (accepted moves over N); a mean that is no multiple
    of 1/N proves two blocks or more, so `ran_more` is a lower bound."""

    chains: int
    fits_one: int  # chains whose final answer fits in one block, so the count gives them one
    ran_more: int  # of those, chains whose acceptance proves a second block
    share: float  # their tokens above the count over all the chains' net tokens above it (nan where the chains
    # decoded no more than the count in all)


def unseen_blocks(records: Sequence[dict], cfg: PowerConfig, max_new_tokens: int) -> UnseenBlocks:
    """How many power-sampled chains (`records`, one depth) provably ran blocks the exact count does not see, and
    their part of the gap between measured and counted tokens (`UnseenBlocks`)."""
    steps = cfg.mcmc_steps
    fits = [r for r in records if r["n_tokens"] <= cfg.block_size]
    more = [r for r in fits if steps and r.get("acceptance") is not None
            and abs(r["acceptance"] * steps - round(r["acceptance"] * steps)) > 1e-6]

    def excess(rs: Sequence[dict]) -> float:
        return sum(r["decoded_tokens"] - expected_decoded_tokens(r["n_tokens"], cfg.block_size, steps, mode=cfg.mode,
                                                                 max_new_tokens=max_new_tokens) for r in rs)

    total = excess(records)
    return UnseenBlocks(len(records), len(fits), len(more), excess(more) / total if total > 0 else math.nan)


# --------------------------------------------------------------------------------------------------
# What truncation saves
# --------------------------------------------------------------------------------------------------


def exercise_steps(build_steps: int) -> int:
    """The N of exercise "another N": the report's, unless this build ran it already (then 4, fewer than the
    report's, so the exercise never sets a value against itself)."""
    theirs = int(REPORT_SETTINGS["mcmc_steps"])
    return theirs if build_steps != theirs else 4


def predicted_tokens(m: Measured, steps: int) -> float:
    """The exact schedule's decoded tokens per answer at full depth with `steps` MH steps per block, for the
    lengths this build's power-sampled answers had (what a re-run with that N would decode, proposals ending where
    the answers do)."""
    cfg = m.power
    return float(np.mean([expected_decoded_tokens(r["n_tokens"], cfg.block_size, steps, mode=cfg.mode,
                                                  max_new_tokens=m.max_new_tokens) for r in m.power_records[m.n_layers]]))


def savings_curves(configs: dict, context: float) -> dict[str, dict[str, np.ndarray]]:
    """Per model: blocks removed and the share of the full model's FLOPs per token that removing them saves."""
    out = {}
    for name, config in configs.items():
        L = Shape.of(config).layers
        depths = np.arange(L, 0, -1)
        out[name] = {"removed": L - depths, "saved": np.array([1 - flops_share(config, int(d), context) for d in depths]),
                     "layers": L}
    return out


def build_configs(names: Sequence[str], measured: Sequence[Measured] = (), dtype: str = "auto") -> dict:
    """The configs of the models `measured` priced and of `names` (those `measured` already holds reused, the others
    loaded), then of the report's two models (from their published sizes)."""
    known = {m.model: m.config for m in measured}
    configs = {}
    for name in dict.fromkeys([*known, *names]):
        if name in known:
            configs[name] = known[name]
            continue
        model = load_model(name, dtype=dtype)
        configs[name] = model.config
        del model
    return {**configs, **qwen25_math_configs()}


def budgets(m: Measured, report_total: float) -> tuple[dict[str, float], dict[str, float]]:
    """The searches chapter 05 prices: ({label: the FLOP saving each needs to cost no more than full-depth greedy},
    {label: its token multiplier}) for this build's MH and SMC and the report's MH (`report_total` times)."""
    mh, smc = multiplier_values(m)["multiplier_vs_greedy"], m.smc_multipliers[m.n_layers]  # SMC against greedy on its
    # own problems, like MH's against greedy on MH's
    n_mh = multiplier_values(m)["multiplier_problems"]
    on = "" if m.smc_problems >= n_mh else f" (on {m.smc_problems} of the {n_mh} problems)"  # SMC on its subset: said
    mh_label, smc_label = f"MH ×{mh:.2f}", f"SMC ×{smc:.2f}{on}"
    multipliers = {mh_label: mh, smc_label: smc, f"×{report_total:.1f}": report_total}
    owner = {mh_label: f"{m.model}'s full-depth MH", smc_label: f"{m.model}'s full-depth SMC",
             f"×{report_total:.1f}": "the report's MH"}
    needs = {f"needed at {owner[label]} ×{x:.2f}{on if label == smc_label else ''}": 1 - 1 / max(x, 1.0)
             for label, x in multipliers.items()}
    return needs, multipliers


# --------------------------------------------------------------------------------------------------
# The verdict at each size
# --------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class SizeCost:
    """What power sampling cost and truncation saved on one model, at the depth the chapter prices (`cut_depth`):
    MH's decoded tokens there against the full model's greedy tokens on the same problems (the trade replaces full-depth
    greedy decoding, so both the multiplier and the saving are measured against it), the share of the full model's
    FLOPs per token that running that depth saves, and the saving that would make the search cost no more than
    full-depth greedy."""

    model: str
    n_layers: int
    depth: int
    multiplier: float  # MH's tokens at `depth` over full-depth greedy's, on the same problems
    saved: float  # a share, 0-1
    needed: float  # a share, 0-1
    unembedding: float  # the unembedding's share of the full model's FLOPs per token
    per_block: float  # the share that removing one block saves
    break_even: int | None  # the deepest depth whose saving pays for this multiplier (None: none does)

    @property
    def relation(self) -> str:
        """How the search's cost compares with the saving, in the words the front page uses."""
        return ("far more than" if self.needed > 2 * self.saved else "more than" if self.needed > self.saved
                else "no more than")


def size_cost(m: Measured) -> SizeCost:
    """`SizeCost` of one measured model."""
    cut, full = cut_depth(m), model_cost(m.config, m.n_layers, m.context)
    mult = m.full_multipliers[cut]
    return SizeCost(m.model, m.n_layers, cut, mult, 1 - flops_share(m.config, cut, m.context),
                    max(0.0, 1 - 1 / mult), full.flops_unembedding / full.flops_per_token,
                    1 - flops_share(m.config, m.n_layers - 1, m.context), break_even_depth(m.config, mult, m.context))


def sizes_in_order(measured: Sequence[Measured]) -> list[SizeCost]:
    """`size_cost` of each model, the smaller first (by `model_size`: two sizes may share a depth)."""
    order = sorted(measured, key=lambda m: model_size(m.config))
    return [size_cost(m) for m in order]


# --------------------------------------------------------------------------------------------------
# Accuracy at equal compute
# --------------------------------------------------------------------------------------------------


def headline_set(points: Sequence[Point]) -> tuple[list[Point], list[Point]]:
    """(the points measured on every problem, those measured on a subset): SMC and the compute-matched baselines run
    on the searches' first problems only, so they are compared with each other and with the rest restricted to
    those problems, never set on a front drawn through points on every problem."""
    n = max(p.n_problems for p in points)
    return [p for p in points if p.n_problems == n], [p for p in points if p.n_problems < n]


def pareto_front(points: Sequence[Point]) -> list[Point]:
    """The points no other point beats on both cost and accuracy, among those on every problem (`headline_set`):
    cheapest first, each more accurate than all cheaper ones (ties in cost keep the more accurate)."""
    front: list[Point] = []
    for p in sorted(headline_set(points)[0], key=lambda p: (p.flops, -p.accuracy)):
        if not front or p.accuracy > front[-1].accuracy:
            front.append(p)
    return front


def front_overlaps(front: Sequence[Point]) -> bool:
    """Whether a cheaper point of the front reaches, within its 95% interval, the accuracy of the front's best: the
    front's order is then suggestive, not settled."""
    widths = [wilson(p.accuracy * p.n_problems, p.n_problems) for p in front]
    return len(front) > 1 and any(hi > front[-1].accuracy for _, hi in widths[:-1])


def matched_comparisons(m: Measured, method: str = "power") -> list[tuple[str, PairedDifference]]:
    """`method` (power: MH; SMC) against the best-of-k and majority-of-k that spend as much at each depth, paired
    by problem: k = `matched_k` for MH's tokens, K = the particle count for SMC's."""
    out = []
    for depth in sorted(m.matched_k, reverse=True):
        mine = next(p for p in m.points if p.depth == depth and p.method == method)
        size = m.matched_k[depth] if method == "power" else m.smc.particles
        for p in m.points:
            if p.depth == depth and p.matched and p.samples == size:
                out.append((f"{method} − {p.method}, both at {depth}", paired_prefix(mine.scores, p.scores)))
    return out


def net_cost_settings(m: Measured, power: PowerConfig) -> dict[str, dict[str, float]]:
    """The net-cost figure's token multipliers (label -> {'multiplier', ...}): the report's settings (N = 10, B = 192,
    T = 679) and this build's at its measured mean answer length, each by the exact schedule (decoded tokens over the
    answer's length), which the figure's legend and the page quote (`net_multipliers`); and beside them what this
    build's chains measured over their own length, so the figure draws no break-even the measurement does not
    make."""
    values = multiplier_values(m)
    build = {"length": max(1.0, round(values["power_length"])), "block_size": power.block_size,
             "mcmc_steps": power.mcmc_steps}
    report = f"report (N = {REPORT['mcmc_steps']}, B = {REPORT['block_size']}, T = {REPORT['length']})"
    settings = {report: dict(REPORT), f"this build (N = {power.mcmc_steps}, B = {power.block_size})": build}
    for s in settings.values():
        s["multiplier"] = expected_decoded_tokens(int(s["length"]), int(s["block_size"]), int(s["mcmc_steps"])) \
            / s["length"]
    settings["this build, its chains measured"] = {"multiplier": values["multiplier_vs_own"]}
    return settings


def net_multipliers(m: Measured, power: PowerConfig) -> dict[str, float]:
    """The net-cost figure's two token multipliers, for the page: the report's settings', and this build's at its
    mean answer length (with that length)."""
    report, build, _ = net_cost_settings(m, power).values()
    return {"net_report_multiplier": report["multiplier"], "net_build_multiplier": build["multiplier"],
            "net_build_length": build["length"]}


# --------------------------------------------------------------------------------------------------
# The report's question with the cheaper sampler
# --------------------------------------------------------------------------------------------------


# --------------------------------------------------------------------------------------------------
# Wall time
# --------------------------------------------------------------------------------------------------


def paper_estimate(m: Measured, n_problems: int = 100, n_seeds: int = 8, n_depths: int = 7) -> dict:
    """What the `paper` profile's power sampling would decode (the exact schedule at the report's settings) and how
    long this machine would take at the FLOP rate the build's power sampling reached. An estimate, not a run."""
    cfg = REPORT
    per_answer = expected_decoded_tokens(cfg["length"], cfg["block_size"], cfg["mcmc_steps"])
    answers = n_problems * n_seeds * n_depths
    tokens = per_answer * answers
    power = [p for p in m.points if p.method == "power" and p.seconds > 0]
    rate = sum(p.flops for p in power) / sum(p.seconds for p in power)  # FLOP/s reached while power sampling
    configs = qwen25_math_configs()
    days = {name: tokens * model_cost(c, None, cfg["length"] / 2).flops_per_token / rate / 86400
            for name, c in configs.items()}
    return {"paper_tokens_per_answer": per_answer, "paper_answers": answers, "paper_tokens": tokens,
            "build_gflops_per_s": rate / 1e9, "paper_days_1p5b": days["Qwen2.5-Math-1.5B"],
            "paper_days_7b": days["Qwen2.5-Math-7B"]}
