"""Chapter 05's prose: the sentences, tables and glued values its page prints from each model's
`cost_benefit.Measured` (the numbers are computed in `helpers.chapters.cost_benefit`, which knows nothing of these
words).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

from helpers.chapters.cost_benefit import (
    REPORT,
    Measured,
    Point,
    SizeCost,
    UnseenBlocks,
    cut_depth,
    exercise_steps,
    front_overlaps,
    headline_set,
    matched_comparisons,
    matched_reach,
    mean_of,
    multiplier_values,
    pareto_front,
    predicted_tokens,
    report_arithmetic,
    size_cost,
    sizes_in_order,
    unseen_blocks,
)
from helpers.chapters.exercises import rerun_command
from helpers.core.numbers import counted, listed, significant
from helpers.data.published import REPORT_SETTINGS
from helpers.evaluation.comparison import (
    comparisons_table,
)
from helpers.evaluation.cost import (
    Shape,
    break_even_depth,
    flops_share,
    model_cost,
    model_size,
)
from helpers.evaluation.stats import PairedDifference, percent_with_interval
from helpers.samplers.power import PowerConfig


def multiplier_glue(m: Measured, power: PowerConfig) -> dict:
    """`multiplier_values` and the build's N, as the token-count section glues them (its sentence is the notebook's,
    around them: the model and its blocks, `multiplier_model` and `multiplier_layers`, and the problems counted in
    words, `multiplier_count`), with how far the measured tokens lie from the exact count (`count_gap`, in percent of
    the count)."""
    n, theirs = power.mcmc_steps, int(REPORT_SETTINGS["mcmc_steps"])
    clause = (f"with N = {n} MH steps per block, as the report did" if n == theirs else
              f"with N = {n} MH step{'s' if n != 1 else ''} per block, where the report used {theirs}")
    v = multiplier_values(m)
    gap = 100 * (v["measured_tokens"] / v["predicted_tokens"] - 1) if v["predicted_tokens"] else 0.0
    return {**v, "multiplier_model": m.model, "multiplier_layers": m.n_layers,
            "multiplier_count": counted(v["multiplier_problems"], "problem"), "build_steps": n, "steps_clause": clause,
            "count_gap": abs(gap), "count_gap_side": "above" if gap >= 0 else "below",
            "unseen_sentence": unseen_sentence(unseen_blocks(m.power_records[m.n_layers], m.power, m.max_new_tokens),
                                               m.power)}


def unseen_sentence(u: UnseenBlocks, cfg: PowerConfig) -> str:
    """What the records say of the blocks the count does not see (`unseen_blocks`), in a sentence for the token-count
    section."""
    if cfg.mode != "reference" or not cfg.mcmc_steps:
        return ""
    if not u.ran_more:
        return (f"None of the {u.chains} chains whose final answer fits in one block shows, by its acceptance rate, that "
                "it ran a second; the records cannot rule it out.")
    part = ("" if math.isnan(u.share) else
            "; they alone decoded more tokens above the count than all the chains together (others decoded fewer "
            "than theirs)" if u.share > 1 else
            f"; they account for {100 * u.share:.0f}% of the chains' net excess over the count (some chains decoded "
            "fewer tokens than theirs)")
    return (f"The records bound the second reason from below: of the {u.chains} chains, {u.fits_one} end inside their "
            f"first block of {cfg.block_size} tokens, and at least {u.ran_more} of those ran a second (an acceptance "
            f"rate, the mean of the blocks' rates, that is no multiple of 1/N proves it){part}.")


def exercise_values(m: Measured, profile: str) -> dict:
    """What the exercises' solutions quote: the exact schedule's prediction for this build's answers with the
    report's N (what a re-run with mcmc_steps = 10 would decode, proposals ending where the answers do), beside
    the build's own N and prediction; the measured multiplier's break-even saving."""
    cfg = m.power
    steps = exercise_steps(cfg.mcmc_steps)
    predicted = predicted_tokens(m, steps)
    v = multiplier_values(m)
    which = ("the report's N = 10" if steps == int(REPORT_SETTINGS["mcmc_steps"]) else
             f"N = {steps}")
    return {"rerun_command": rerun_command(profile, "04_power_sampling", mcmc_steps=steps),
            "ex_steps": steps, "ex_steps_which": which, "ex_build_steps": cfg.mcmc_steps, "ex_predicted": predicted,
            "ex_build_predicted": v["predicted_tokens"], "ex_length": v["power_length"],
            "ex_multiplier": predicted / max(v["greedy_tokens"], 1e-9),
            "ex_break_even": 100 * (1 - 1 / max(v["multiplier_vs_greedy"], 1e-9))}


def savings_table(configs: dict, context: float, multipliers: dict[str, float],
                  contexts: Mapping[str, float] | None = None) -> str:
    """Per model, the smaller first: what removing one and two blocks saves, and the break-even depth at each multiplier; each model
    this build measured at its own mean context (`contexts`, so that its shares are the sizes section's), the
    others at `context`."""
    heads = list(multipliers)
    lines = ["| model | blocks | saved by −1 block | saved by −2 blocks | unembedding share | "
             + " | ".join(f"break-even depth at {h}" for h in heads) + " |", "|---" * (5 + len(heads)) + "|"]
    for name, config in sorted(configs.items(), key=lambda item: model_size(item[1])):  # smaller first
        at = (contexts or {}).get(name, context)
        L = Shape.of(config).layers
        c = model_cost(config, L, at)
        cells = []
        for h in heads:
            d = break_even_depth(config, multipliers[h], at)
            cells.append("none (even 1 block costs more)" if d is None else f"{d} of {L}")
        lines.append(f"| {name} | {L} | {100 * (1 - flops_share(config, L - 1, at)):.1f}% | "
                     f"{100 * (1 - flops_share(config, L - 2, at)):.1f}% | "
                     f"{100 * c.flops_unembedding / c.flops_per_token:.0f}% | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def savings_values(m: Measured, configs: dict, multipliers: dict[str, float],
                   measured: Sequence[Measured] = ()) -> dict:
    """Glued numbers: the report's 7%, this build's saving at its truncations, the break-even depth and whether
    the model still works at it, with the savings table (`savings_table` at `multipliers`, from `budgets`; each of
    the `measured` models at its own context)."""
    seven = configs["Qwen2.5-Math-7B"]
    mult = multiplier_values(m)["multiplier_vs_greedy"]
    L = m.n_layers
    cut = cut_depth(m)
    even = m.break_even
    values = {"saved_7b_26": 100 * (1 - flops_share(seven, 26, 0.0)),
              "saved_7b_26_ctx": 100 * (1 - flops_share(seven, 26, REPORT["length"] / 2)),
              "saved_build": 100 * (1 - flops_share(m.config, cut, m.context)), "build_depth": cut,
              "needed_saving": 100 * (1 - 1 / mult), "break_even": even if even is not None else 0,
              "measured_multiplier": mult, "cut_multiplier": m.full_multipliers[cut],  # against what the cut replaces
              "cut_needed_saving": 100 * (1 - 1 / m.full_multipliers[cut])}
    if even is None:
        sentence = (f"No depth of {m.model} breaks even: even a single block plus the unembedding costs more than "
                    f"1/{mult:.2f} of the full model's FLOPs per token.")
    else:
        sentence = (f"For power sampling, at its full-depth {mult:.2f} times the tokens, to cost no more than one full-depth greedy "
                    f"answer, {m.model} would have to run at most {even} of its {L} blocks, removing {L - even}.")
        if m.break_even_accuracy is not None:
            sentence += (f" Stitched to {even} blocks, it answers {percent_with_interval(m.break_even_accuracy, m.points[0].n_problems)} "
                         "of the same problems greedily.")
    values["break_even_sentence"] = sentence
    values["break_even_summary"] = (f"no depth of {m.model} lets MH break even with full-depth greedy decoding"
                                    if even is None else
                                    f"MH breaks even with full-depth greedy decoding only on {m.model} cut to {even} "
                                    f"of its {L} blocks or fewer")
    values["savings_table"] = savings_table(configs, m.context, multipliers, {x.model: x.context for x in measured})
    return values


def size_cost_table(costs: Sequence[SizeCost]) -> str:
    """One row per model (`sizes_in_order` order): the depth priced, MH's tokens there over full-depth greedy's, the
    FLOPs it saves, the saving needed to break even, the unembedding's share and the deepest depth that would break
    even."""
    lines = ["| model | blocks | priced at | MH tokens there × full-depth greedy's | FLOPs saved | saving needed | unembedding share "
             "| deepest depth that breaks even |", "|---" * 8 + "|"]
    for c in costs:
        even = "none" if c.break_even is None else f"{c.break_even} of {c.n_layers}"
        lines.append(f"| {c.model} | {c.n_layers} | {c.depth} | {c.multiplier:.2f} | {100 * c.saved:.1f}% | "
                     f"{100 * c.needed:.0f}% | {100 * c.unembedding:.0f}% | {even} |")
    return "\n".join(lines)


def cost_answer(costs: Sequence[SizeCost]) -> str:
    """The front page's second sentence: at each size, what the search cost against what the truncation saved."""
    if len(costs) == 1:
        c = costs[0]
        return (f"At {c.depth} blocks a power-sampled answer decoded {c.multiplier:.1f} times the tokens of the full "
                f"model's greedy answer to the same problem, while running {c.depth} blocks saved {100 * c.saved:.0f}% of the FLOPs "
                f"per token, where breaking even would need {100 * c.needed:.0f}%: the search costs {c.relation} the "
                "truncation saves.")
    first, *rest = costs
    parts = [f"on {first.model} at {first.depth} of {first.n_layers} blocks a power-sampled answer decoded "
             f"{first.multiplier:.1f} times the tokens of the full model's greedy answer while the truncation saved {100 * first.saved:.0f}% "
             f"of the FLOPs per token, against the {100 * first.needed:.0f}% breaking even would need"]
    parts += [f"on {c.model} at {c.depth} of {c.n_layers} blocks, {c.multiplier:.1f} times the tokens and "
              f"{100 * c.saved:.0f}% saved against {100 * c.needed:.0f}% needed" for c in rest]
    verdicts = dict.fromkeys(c.relation for c in costs)
    tail = (f"at every size the search costs {next(iter(verdicts))} the truncation saves" if len(verdicts) == 1 else
            "; ".join(f"on {c.model} the search costs {c.relation} the truncation saves" for c in costs))
    text = "; ".join(parts)
    return f"{text[0].upper()}{text[1:]}: {tail}."


def cost_lead(costs: Sequence[SizeCost]) -> str:
    """The front page's first sentence: what the search cost against what the truncation saved, as ranges over the
    sizes where every size gives one verdict (`cost_answer`, size by size, where they differ)."""
    verdicts = dict.fromkeys(c.relation for c in costs)
    if len(costs) < 2 or len(verdicts) > 1:
        return cost_answer(costs)

    def span(values: list[float], fmt: str) -> str:
        low, high = format(min(values), fmt), format(max(values), fmt)
        return low if low == high else f"{low}–{high}"

    return (f"At every size this build priced, the search costs {next(iter(verdicts))} the truncation saves: a "
            f"power-sampled answer at the cut decoded {span([c.multiplier for c in costs], '.1f')} times the tokens of "
            f"the full model's greedy answer, while the blocks removed saved {span([100 * c.saved for c in costs], '.0f')}% "
            f"of the FLOPs per token, against the {span([100 * c.needed for c in costs], '.0f')}% breaking even would "
            "need (chapter 05 prices each size).")


def cost_short(costs: Sequence[SizeCost]) -> str:
    """The cost half of the front page's answer in a word: "no" where at no size the blocks removed save what the
    search costs, "yes" where they do at every size, else the sizes where they do."""
    paid = [c.model for c in costs if c.needed <= c.saved]
    return "no" if not paid else "yes" if len(paid) == len(costs) else f"only on {listed(paid)}"


def size_cost_values(measured: Sequence[Measured]) -> dict:
    """The sizes section's glued table and sentence, the front page's cost sentence (`cost_answer`), and the first
    model's unembedding share (the comparison with the report quotes it)."""
    costs = sizes_in_order(measured)
    answer = cost_answer(costs)
    if len(costs) < 2:
        sentence = ("This build prices one model, so it cannot say whether the verdict depends on the model's size: "
                    "run chapter 04 (and this chapter, which reads its decodes) with two sizes of one family.")
    else:
        blocks = listed([f"{100 * c.per_block:.1f}% of {c.model}'s" for c in costs])
        unembedding = listed([f"{100 * c.unembedding:.0f}%" for c in costs])
        sentence = (f"{answer} Removing one block saves {blocks} FLOPs per token (the unembedding, "
                    f"which no truncation removes, is {unembedding} of them), so the verdict turns on the multiplier: ")
        paid = [c.model for c in costs if c.needed <= c.saved]
        sentence += (f"on {listed(paid)} the blocks removed pay for the search." if paid else
                     "at no size do the blocks this build removed save what the search costs.")
    first = size_cost(measured[0])
    return {"size_cost_table": size_cost_table(costs), "size_cost_sentence": sentence,
            "cost_answer": answer, "cost_lead": cost_lead(costs), "cost_short": cost_short(costs),
            "build_model": first.model,
            "build_unembedding": 100 * first.unembedding}


SIZE_MARKDOWN = ("size_cost_table", "size_cost_sentence", "cost_answer", "cost_lead")  # glued as Markdown


def _restricted(p: Point, k: int) -> str:
    return percent_with_interval(p.accuracy_on(k), k)


def front_sentence(points: Sequence[Point]) -> str:
    """Which method gives the best measured accuracy at which budget, cheapest first, on every problem; then the
    methods measured on the searches' subset, each beside full-depth greedy on the same problems."""
    front = pareto_front(points)
    parts = [f"{p.method} at {p.depth} blocks ({significant(p.flops / 1e9)} GFLOPs, {percent_with_interval(p.accuracy, p.n_problems)})"
             for p in front]
    power_on = sorted({p.method for p in front if p.method in ("power", "SMC")})
    text = (f"On {front[0].model}, cheapest first, among the methods run on all {counted(front[0].n_problems, 'problem')}, "
            "those that beat every cheaper one are: " + "; ".join(parts) + ". ")
    names = {("power",): "Power sampling", ("SMC",): "Power sampling (SMC)", ("SMC", "power"): "Power sampling, "
             "by MH and by SMC,"}
    text += (f"{names[tuple(power_on)]} is on this front." if power_on else
             "No power-sampled point is on this front: at every budget a cheaper or equal-cost method did at least "
             "as well.")
    if front_overlaps(front):
        text += (" The front is drawn through point estimates: neighbouring points on it lie inside each other's "
                 "95% intervals, so its order is suggestive, not settled.")
    full, subset = headline_set(points)
    searched = [p for p in subset if not p.matched]
    if searched:
        k = min(p.n_problems for p in searched)
        greedy = max((p for p in full if p.method == "greedy"), key=lambda p: p.depth)
        methods = sorted({p.method for p in searched})
        listed = "; ".join(f"{p.method} at {p.depth} blocks {_restricted(p, k)} for {significant(p.flops / 1e9)} GFLOPs"
                           for p in searched)
        text += (f" {' and '.join(methods)} ran on the first {counted(k, 'problem')} only, so "
                 f"{'it stands' if len(methods) == 1 else 'they stand'} off the front (faded and marked † in the "
                 f"figure); on those problems greedy at the full "
                 f"{greedy.depth} blocks scored {_restricted(greedy, k)} for {significant(greedy.flops / 1e9)} GFLOPs, "
                 f"against {listed}.")
    return text


def matched_sentence(ms: Sequence[Measured]) -> str:
    """What the paired tests against the compute-matched baselines support, depth by depth, for MH and for SMC: for
    each model that ran them, named where there are several."""
    said = [(m.model, t) for m in ms if (t := _matched_sentence(m))]
    if not said:
        return "No compute-matched baseline was run."
    if len(ms) == 1:
        return said[0][1]
    return " ".join(f"On {model}: {text}" for model, text in said)


def _matched_sentence(m: Measured) -> str:
    """`matched_sentence` of one model ('' where it ran no matched baseline)."""
    out = []
    for method, name in (("power", "MH power sampling"), ("SMC", "SMC")):
        parts = []
        tests_all = matched_comparisons(m, method)
        for depth in sorted(m.matched_k, reverse=True):
            tests = [(label, d) for label, d in tests_all if label.endswith(f"both at {depth}")]
            if not tests:
                continue
            clear = [d for _, d in tests if d.clear]
            if len(clear) == len(tests):
                sign = "beat" if all(d.mean > 0 for d in clear) else "lost to"
                numbers = "; ".join(f"{label.split(',')[0].removeprefix(method + ' − ')} {d.points(1)}, "
                                    f"p = {d.p_value:.2g}" for label, d in tests)
                parts.append(f"at {depth} blocks {name} {sign} both baselines by more than the noise ({numbers})")
            elif clear:
                parts.append(f"at {depth} blocks only one of the two differences is larger than its noise")
            elif borderline := [label.split(",")[0].removeprefix(method + " − ") for label, d in tests if d.borderline]:
                parts.append(f"at {depth} blocks no difference is clearly larger than its noise; against "
                             f"{' and '.join(borderline)} it is borderline (the interval and the paired test disagree)")
            else:
                parts.append(f"at {depth} blocks the differences stay within the noise")
        if parts:
            out.append(f"{name} against best-of-k and majority-of-k given as many samples as it costs: "
                       + "; ".join(parts) + ".")
    if not out:
        return ""
    return " ".join(out) + _strongest_matched(m)


Tests = Sequence[tuple[str, PairedDifference]]  # one model's `matched_comparisons`: (label, difference)


def _matched_verdicts(m: Measured, tests_all: Tests) -> tuple[list[int], list[int], list[int]]:
    """The depths where MH beat both budget-matched baselines by more than the noise, lost to both, and the rest
    (`tests_all`: `matched_comparisons(m, "power")`)."""
    beat, lost, rest = [], [], []
    for depth in sorted(m.matched_k, reverse=True):
        tests = [d for label, d in tests_all if label.endswith(f"both at {depth}")]
        if not tests:
            continue
        if all(d.clear and d.mean > 0 for d in tests):
            beat.append(depth)
        elif all(d.clear and d.mean < 0 for d in tests):
            lost.append(depth)
        else:
            rest.append(depth)
    return beat, lost, rest


def _matched_clause(verdicts: tuple[list[int], list[int], list[int]]) -> str:
    """One model's compute-matched verdict (`_matched_verdicts`) as a clause ('beat both at 23 blocks and was not told
    apart from them elsewhere by more than the noise'); '' where it ran no matched baseline."""
    beat, lost, rest = verdicts
    said = []
    if beat:
        said.append(f"beat both at {' and '.join(map(str, beat))} blocks")
    if lost:
        said.append(f"lost to both at {' and '.join(map(str, lost))} blocks")
    if rest:
        said.append(f"was not told apart from them{' elsewhere' if said else ''} by more than the noise"
                    + ("" if said else f" at {' or '.join(map(str, rest))} blocks"))
    return " and ".join(said)


def matched_summary(ms: Sequence[Measured]) -> str:
    """The compute-matched comparison in a clause for the chapter's summary: for each model that ran the baselines,
    at which depths MH beat, or lost to, both budget-matched baselines by more than the noise (the section's
    sentence gives each test)."""
    tests = {m.model: matched_comparisons(m, "power") for m in ms}  # each model's paired tests, once
    verdicts = {m.model: _matched_verdicts(m, tests[m.model]) for m in ms}
    said = [(m.model, c) for m in ms if (c := _matched_clause(verdicts[m.model]))]
    if not said:
        return "no compute-matched baseline was run"
    noise = _matched_noise(tests) + _borderline_matched(tests)
    if len(said) == 1 and len(ms) == 1:
        return "given its budget in best-of-k and majority-of-k samples, MH " + said[0][1] + noise
    if len(said) > 1 and not any(beat or lost for beat, lost, _ in verdicts.values()):
        return ("given its budget in best-of-k and majority-of-k samples, MH was not told apart from them by more than "
                f"the noise at any depth of {listed([model for model, _ in said])}{noise}")
    return "given its budget in best-of-k and majority-of-k samples, MH " + "; ".join(
        f"{clause} on {model}" for model, clause in said) + noise


def _borderline_matched(tests: Mapping[str, Tests]) -> str:
    """The compute-matched tests of MH that are borderline (the interval and the paired test disagree), for the
    summary: "; borderline (the interval and the paired test disagree): in MH's favour, against best-of-8 on m at 23
    blocks (+15.6 points [+3, +31])" ('' where none is). Reads the baseline and depth from `matched_comparisons`'
    labels (`tests`: model -> its `matched_comparisons`), as `_matched_verdicts` does."""
    found = []
    for model, mine in tests.items():
        for label, d in mine:
            if d.borderline:
                baseline, depth = label.split(" − ", 1)[1].split(", both at ")
                side = "in MH's favour" if d.mean > 0 else "against MH"
                found.append(f"{side}, against {baseline} on {model} at {depth} blocks ({d.points(1)})")
    return f"; borderline (the interval and the paired test disagree): {listed(found)}" if found else ""


def _matched_noise(tests: Mapping[str, Tests]) -> str:
    """How much the compute-matched tests can see (`matched_reach`), for the summary's clause: ' (on 16 problems a
    depth, where a paired 95% interval spans about ±24 points)'; '' where none ran."""
    reach = matched_reach([d for mine in tests.values() for _, d in mine])
    if reach is None:
        return ""
    (low, high), half = reach
    n = f"{low}" if low == high else f"{low}–{high}"
    return f" (on {n} problems a depth, where a paired 95% interval spans about ±{100 * half:.0f} points)"


def _strongest_matched(m: Measured) -> str:
    """Where the most accurate budget-matched baseline stands against full-depth greedy on its own problems: the
    baselines draw at temperature 1, so whether voting over many draws beats one greedy answer is the build's to say."""
    matched = [p for p in m.points if p.matched]
    greedy = [p for p in m.points if p.method == "greedy" and p.depth == m.n_layers and not p.matched]
    if not matched or not greedy:
        return ""
    best = max(matched, key=lambda p: p.accuracy)
    k = best.n_problems
    g = greedy[0].accuracy_on(k)
    relation = "above" if best.accuracy > g else "below" if best.accuracy < g else "level with"
    return (f" These baselines draw at temperature 1; the most accurate of them, {best.method} at {best.depth} blocks, "
            f"scored {100 * best.accuracy:.0f}%, {relation} full-depth greedy's {100 * g:.0f}% on the same "
            f"{counted(k, 'problem')} (point estimates; the table pairs MH with each).")


def matched_table(ms: Sequence[Measured]) -> str:
    """`matched_comparisons` of MH and of SMC, for every model that ran them, as chapter 04's paired-test table."""
    tests = [(m.model, t) for m in ms for t in matched_comparisons(m) + matched_comparisons(m, "SMC")]
    return comparisons_table([t for _, t in tests], [model for model, _ in tests])


def majority_sentence(m: Measured) -> str:
    """This build's answer to the small-model study of power sampling (Qwen2.5-0.5B on GSM8K, where majority
    voting over six samples beat MH by about 7 points at the same token budget): MH against majority-of-k at the
    full depth, with what the paired test supports."""
    tests = [d for label, d in matched_comparisons(m) if label.startswith("power − majority")
             and label.endswith(f"both at {m.n_layers}")]
    if not tests:
        return "This build ran no compute-matched majority vote, so it cannot set itself beside that study."
    d = tests[0]
    k = m.matched_k[m.n_layers]
    if d.clear and d.mean < 0:
        verdict = "points the same way: majority vote beats MH by more than the noise"
    elif d.clear:
        verdict = "points the other way: here MH beats majority vote by more than the noise"
    elif d.borderline:
        verdict = ("cannot say which way its own comparison points: the difference is borderline (the interval and the "
                   "paired test disagree)")
    else:
        verdict = "cannot say which way its own comparison points: the difference stays within the noise"
    return (f"On {m.model} at its full depth, MH power sampling against majority-of-{k} (as many samples as one MH answer "
            f"costs) is {d.describe(1)}: under its own settings, not the study's (temperature-1 votes, alpha and N "
            f"as above, these problems), this build {verdict}.")


FRONT_MARKDOWN = ("front_sentence", "matched_table", "matched_sentence", "majority_sentence")  # glued as Markdown


def front_values(m: Measured, ms: Sequence[Measured] = ()) -> dict:
    """The equal-compute section's glued values: the first model's Pareto front in a sentence, the matched table and
    verdict of every model in `ms`, the smaller first (the first alone where `ms` is empty), and the comparison with the small-model
    study of majority voting (the first model)."""
    every = sorted(list(ms) or [m], key=lambda x: model_size(x.config))  # smaller first, as every table
    return {"front_sentence": front_sentence(m.points), "matched_table": matched_table(every),
            "matched_sentence": matched_sentence(every), "matched_summary": matched_summary(every),
            "matched_k": m.matched_k[m.n_layers],
            "majority_sentence": majority_sentence(m)}


def smc_values(m: Measured) -> dict:
    """SMC's measured token multiplier at full depth (set beside MH's on the same problems), and at the cut against
    full-depth greedy decoding (what the truncation must pay for; full depth's where SMC did not run at the cut): the
    saving truncation would need, the break-even depth, and whether the report's conclusion (truncation cannot pay
    for the search) still holds with SMC."""
    L, cut = m.n_layers, cut_depth(m)
    smc_tokens = mean_of(m.smc_records[L], "decoded_tokens")
    mult = m.smc_multipliers[L]  # against greedy on SMC's own problems, like MH's against greedy on MH's
    mh = m.mh_on_smc_problems.get(L, m.multipliers[L])  # MH on the same problems as SMC
    report = report_arithmetic().exact + 1
    needed = 1 - 1 / mult if mult > 1 else 0.0
    at_cut = m.smc_full_multipliers.get(cut) if cut < L else None  # what the cut must pay for: SMC there against
    priced = at_cut if at_cut is not None else mult  # full-depth greedy (full depth's where SMC did not run at the cut)
    needed_cut = 1 - 1 / priced if priced > 1 else 0.0
    saved = 1 - flops_share(m.config, cut, m.context)
    even = break_even_depth(m.config, priced, m.context)
    holds = saved < needed_cut
    where = (f"no depth of {m.model} breaks even" if even is None else
             f"the break-even depth is {even} of {L} blocks (removing {L - even})")
    than = "less than" if mult < mh else "more than"
    there = (f"At the cut, {cut} blocks, SMC decoded {at_cut:.2f} times the full model's greedy tokens on the same "
             "problems: to cost no more" if at_cut is not None else "To cost no more")
    sentence = (f"With K = {m.smc.particles} particles, an SMC answer on {m.model} at its full {L} blocks decoded "
                f"{smc_tokens:.0f} tokens, {mult:.2f} times a greedy answer on its {counted(m.smc_problems, 'problem')}: {than} MH "
                f"at this build's settings on the same problems ({mh:.2f} times, N = {m.power.mcmc_steps}). For scale "
                f"only, the exact count puts MH at the report's settings ({REPORT['mcmc_steps']} steps per block, "
                f"B = {REPORT['block_size']}, answers of {REPORT['length']} tokens) at {report:.1f} times an answer's own "
                f"length: a prediction for other settings and problems, not a measurement beside this one. {there} "
                "than full-depth greedy "
                f"decoding, truncation would have to save {100 * needed_cut:.0f}% of the FLOPs per token; {where}. "
                f"The stitched {cut}-block model saves {100 * saved:.1f}%. ")
    sentence += ("So the report's conclusion holds for SMC too: truncation does not save enough to "
                 "pay for the search, because any search that draws K complete candidates costs about K decodes, and "
                 "removing a block or two saves a few percent of one." if holds else
                 "So with SMC the report's conclusion no longer holds on this model: the truncation saves more than the "
                 "search costs.")
    return {"smc_multiplier": mult, "smc_tokens": smc_tokens, "smc_needed_saving": 100 * needed,
            "smc_cut_multiplier": priced, "smc_cut_needed_saving": 100 * needed_cut,
            "smc_break_even": even if even is not None else 0, "smc_particles": m.smc.particles,
            "smc_conclusion_holds": holds, "smc_verdict": sentence}


def time_table(points: Sequence[Point]) -> str:
    """Per method and depth: the problems it ran on, tokens decoded and prefilled per answer, seconds per answer,
    decoded tokens/s; a row on the searches' subset is marked (†), as everywhere."""
    lines = ["| method | depth | problems | samples per answer | decoded tokens | prefilled tokens | seconds | "
             "decoded tokens/s |", "|---|---|---|---|---|---|---|---|"]
    n = max((p.n_problems for p in points), default=0)
    for p in sorted(points, key=lambda p: (-p.depth, p.flops)):
        rate = p.tokens / p.seconds if p.seconds else float("nan")
        mark = " †" if p.n_problems < n else ""
        lines.append(f"| {p.method}{mark} | {p.depth}/{p.n_layers} | {p.n_problems} | {p.samples} | {p.tokens:.0f} | "
                     f"{p.prefill:.0f} | {p.seconds:.2f} | {rate:.0f} |")
    k = min((p.n_problems for p in points), default=0)
    if k < n:
        lines += ["", f"† On the first {counted(k, 'problem')} of the {n} (the searches' subset): its costs are means "
                      "over those problems only."]
    return "\n".join(lines)
