"""Chapter 04's prose: the sentences, tables and glued values its page prints from the method comparison's
`power_sampling.DepthRow`s, the decomposition, the N sweep and the levels' scan (the numbers are computed in
`helpers.chapters.power_sampling`, which knows nothing of these words).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

from helpers.chapters.common_text import levels_text
from helpers.chapters.power_sampling import (
    DepthRow,
    Explained,
    LongerCap,
    StepsSweep,
    best_truncation,
    by_size,
    cap_part,
    comparisons,
    corrected,
    excluded_gains,
    explain,
    headline_row,
    longer_caps,
    mean_resamples,
    per_model,
    report_gains,
    size_contrast,
    sweep_subset,
)
from helpers.core.numbers import counted, listed
from helpers.data.arithmetic import LEVELS
from helpers.data.model_sets import on_own_problems
from helpers.data.published import (
    REFERENCE_LOOP,
    REPORT_HEADLINE,
    REPORT_IF_PROBLEMS,
    REPORT_SETTINGS,
    REPORT_SUBSET,
)
from helpers.evaluation.comparison import (
    comparisons_table,
)
from helpers.evaluation.decodes import (
    OUTCOMES,
    UNFINISHED,
)
from helpers.evaluation.decomposition import SEARCHES, TERMS
from helpers.evaluation.levels import ROOM, LevelScan
from helpers.evaluation.stats import (
    PairedDifference,
    format_p,
    half_width,
    percent_with_interval,
)
from helpers.models.registry import post_training
from helpers.samplers.settings import SEARCH_PARAMETERS, Searches

COLUMNS = (("greedy", "greedy"), ("low", "low temp."), ("temperature", "T=1"), ("best_of_n", "best-of-k"),
           ("majority", "majority"), ("power", "power (MH)"), ("smc", "SMC"))


def bars_title(searches: Searches) -> str:
    """Figure 4.3's title: the searches' settings (each panel names its model)."""
    return (f"α = {searches.target.alpha:g}, MH with N = {searches.power.mcmc_steps} and "
            f"B = {searches.power.block_size}, SMC with K = {searches.smc.particles}")


def results_table(rows: Sequence[DepthRow]) -> str:
    """A Markdown table of every method at every depth, each accuracy with its 95% interval."""
    seeds = max((r.n_seeds for r in rows), default=1)  # the profile's; a depth may run fewer (`seeds_at`)
    columns = [(key, label) for key, label in COLUMNS if not (key == "majority" and seeds <= 2)]  # of two, a tie goes
    # to the first sample: majority is then T = 1's first seed, not a vote
    lines = ["| model | depth | " + " | ".join(label for _, label in columns) + " | MH acceptance | tokens/sample "
             "(greedy / MH / SMC) |", "|---" * (len(columns) + 4) + "|"]
    subsets, own = set(), own_problems(rows)
    order = by_size(rows)
    for r in sorted(rows, key=lambda r: order.index(r.model)):  # smaller first, as the figures are (stable by depth)
        cells = []
        for key, _ in columns:
            on_subset = r.count(key) < r.n_problems
            subsets |= {(r.count(key), r.n_problems)} if on_subset else set()
            cells.append(r.interval(key) + (" †" if on_subset else ""))
        marks = {key: "†" if r.count(key) < r.n_problems else "" for key in ("greedy", "power", "smc")}  # a cost
        # on the searches' subset is marked as its accuracy is, on its own number
        fewer = f" ({counted(r.n_seeds, 'seed')})" if r.n_seeds < seeds else ""  # in words: ‡ marks own problems
        lines.append(f"| {r.model}{own[r.model]} | {r.depth}/{r.n_layers}{fewer} | " + " | ".join(cells)
                     + f" | {r.acceptance:.2f} | {r.tokens_greedy:.0f}{marks['greedy']} / {r.tokens_power:.0f}"
                       f"{marks['power']} / {r.tokens_smc:.0f}{marks['smc']} |")
    lines += ["", f"Best-of-k uses each problem's k = {seeds} temperature-1 samples (N is MH's steps per block only) "
                  "and keeps the one the model finds most likely (largest summed log-probability)"
                  + ("; majority vote, the most frequent answer, is left out: of two samples that disagree it would "
                     "take the first, so it would only repeat T = 1." if seeds == 2 else
                     "." if seeds < 2 else "; majority keeps the most frequent answer (a tie goes to the answer that "
                     "came first).")]
    for k in sorted({r.n_seeds for r in rows if r.n_seeds < seeds}):
        best = "is T = 1's own sample" if k == 1 else f"keeps the likeliest of {k}"
        lines += ["", f"A depth marked ({counted(k, 'seed')}) ran {counted(k, 'seed')}, not {seeds}: each sampled method "
                      f"drew {counted(k, 'sample')} a problem there, so best-of-k {best}, and a sampled accuracy there "
                      "rests on fewer samples than the other rows'."]
    for k, n in sorted(subsets):
        lines += ["", f"† On the first {counted(k, 'problem')} of the {n} (the searches' subset, levels taken in turn); "
                      f"every other cell is on all {n} (in the tokens column, the one number a † follows). Compare "
                      "a † cell with another † cell, or read the paired differences below, which pair each method "
                      "only over the problems both ran."]
    return "\n".join(lines + own_problems_note(rows))


def outcomes_table(rows: Sequence[DepthRow]) -> str:
    """How greedy and power-sampled answers end at each depth of every model, and how often those that finished
    (not cut off at the token cap) are right: where the failures are, and how much of a cut's cost the cap made."""
    mine = [r for m in by_size(rows) for r in rows if r.model == m and r.outcomes]  # smaller first, as the figures
    own = own_problems(mine)
    lines = ["| model | depth | method | problems | " + " | ".join(OUTCOMES) + " | looping | right among finished |",
             "|---" * (len(OUTCOMES) + 6) + "|"]
    subsets = set()
    for r in mine:
        for method in (m for m in ("greedy", "power", "smc") if m in r.outcomes):
            shares, n = r.outcomes[method], r.count(method)
            mark = " †" if n < r.n_problems else ""
            subsets |= {(n, r.n_problems)} if mark else set()
            finished = 1 - sum(shares[o] for o in UNFINISHED)
            right = f"{100 * shares['correct'] / finished:.0f}%" if finished > 0 else "none finished"
            loops, samples = r.looping_count(method), sum(len(per) for per in r.loops.get(method, []))
            looped = f"{100 * loops / samples:.0f}%" if loops is not None and samples else "–"
            lines.append(f"| {r.model}{own[r.model]} | {r.depth}/{r.n_layers} | {method}{mark} | {n} | "
                         + " | ".join(f"{100 * shares[o]:.0f}%" for o in OUTCOMES) + f" | {looped} | {right} |")
    for k, n in sorted(subsets):
        lines += ["", f"† On the first {counted(k, 'problem')} of the {n} only: compare its shares with another † row, "
                      "not with the rows on every problem."]
    legend = ("Each sample is counted once in the outcome columns, which sum to 100%; 'looping' is a part of the "
              "unfinished ones, not a further share. Cut off: unfinished at the token cap. Ending replaced: an MH chain that "
              "ended unfinished short of the cap, because its last block's move swapped a finished ending for a "
              "proposal that the published loop regenerates only up to the current length, and no block was left to "
              "finish it (more blocks, `mh_blocks`, give it room). The other three columns are the finished samples, "
              "so 'correct' can sit below the accuracy elsewhere, which credits an unfinished answer whose text "
              "already holds the right number. Looping: the unfinished samples whose last 256 tokens mostly repeat "
              "what they wrote before (at least half of their 8-token runs occurred earlier in the answer); a longer "
              "cap would hardly end them. The others were not looping in that window, which a loop that starts late "
              "can escape: whether they would have ended is what chapter 03's length study measures, by decoding the "
              "same greedy answers to a longer cap. Right among finished: correct over the finished samples. Where a "
              "cut leaves it near the full model's while 'cut off' grows, the cut's cost may be answers the cap ended "
              "rather than wrong ones; chapter 03's longer decode says how many of them ever end.")
    return "\n".join([*lines, "", legend, *own_problems_note(mine)])


def failure_sentence(rows: Sequence[DepthRow]) -> str:
    """Where each model's power samples fail at its deepest truncation, against its full model."""
    parts = [_failure(mine) for mine in per_model(rows, by_size=True)]
    said = [p for p in parts if p]
    if not said:
        return "No truncated depth was tested, so there is no failure to compare."
    return " ".join(said) + (" Search reweights the completions the truncated model can write; it cannot add the "
                             "ones it no longer writes.")


def _failure(mine: Sequence[DepthRow]) -> str:
    """One model's sentence for `failure_sentence` ("" where it ran no truncation or kept no endings)."""
    mine = [r for r in mine if r.ends]
    full = next((r for r in mine if r.depth == r.n_layers), None)
    cut = min((r for r in mine if r.depth < r.n_layers), key=lambda r: r.depth, default=None)
    if full is None or cut is None:
        return ""
    k = full.count("power")  # MH at the full depth may have run on the searches' subset only: compare there
    f, c = full.outcome_shares("power"), cut.outcome_shares("power", k)
    worst = max(OUTCOMES[1:], key=lambda o: c[o] - f[o])
    where = f" on the {counted(k, 'problem')} where both ran" if k < cut.count("power") else ""
    others = ", ".join(f"{o}: {100 * f[o]:.0f}% → {100 * c[o]:.0f}%" for o in ("cut off", "no answer")
                       if o != worst and f"{100 * f[o]:.0f}{100 * c[o]:.0f}" != "00")  # a failure that never occurs: unsaid
    return (f"On {full.model}, at {cut.depth} blocks {100 * c['correct']:.0f}% of power samples finish with the right "
            f"answer, against {100 * f['correct']:.0f}% at the full {full.n_layers}{where}; the failure that grows most is "
            f"'{worst}', from {100 * f[worst]:.0f}% to {100 * c[worst]:.0f}% of samples" + (f" ({others})" if others
                                                                                          else "")
            + (_loops_clause(cut, k) if worst in UNFINISHED else "") + ".")


def _loops_clause(cut: DepthRow, k: int) -> str:
    """How many of the cut's unfinished power samples (on its first `k` problems) loop, and what a longer cap would
    make of them ("" where the row kept no loops or none is unfinished)."""
    loops = cut.looping_count("power", k)
    unfinished = sum(o in UNFINISHED for per in cut.ends["power"][:k] for o in per)
    if loops is None or not unfinished:
        return ""
    if 2 * loops >= unfinished:
        return (f"; {loops} of its {unfinished} unfinished samples loop, repeating what they wrote, so that a longer "
                "cap would hardly end them: the loss is the model's, not the cap's")
    some = (f"only {loops} of its {unfinished} unfinished samples loop in their last 256 tokens" if loops else
            f"none of its {unfinished} unfinished samples loops in its last 256 tokens")
    return (f"; {some}, so that a longer cap may end some of them (a loop that starts late escapes that window: "
            "chapter 03's length study decodes greedy answers to a longer cap and counts those that end)")


UNDECIDED = "Too close to call"  # the answer's word where the paired interval cannot tell the two apart
ANSWERS = {  # (below full-depth greedy?, standing) -> the answer's word and what it says of one model
    (True, "clear"): ("No", "power sampling does not win back what truncation costs"),
    (True, "borderline"): ("Probably not", "power sampling falls short of what truncation costs"),
    (True, "noise"): (UNDECIDED, "power sampling stays below, within the noise"),
    (False, "clear"): ("Yes", "power sampling wins back what truncation costs"),
    (False, "borderline"): (UNDECIDED, "power sampling scores above the full model's greedy decoding, by a margin "
                                       "that the noise of these problems leaves in doubt"),
    (False, "noise"): (UNDECIDED, "power sampling scores no lower than the full model's greedy decoding, but the paired "
                                  "interval holds a loss as well as a gain"),
}


CAPPED = ("Not at this cap", "power sampling falls short of the full model at a token cap that cuts off the cut "
                              "model's answers, and under a longer cap, where only greedy decoding ran, the cut's own "
                              "cost is within its noise: the search there is not yet measured")  # a "no" that a longer cap undoes


def answer_of(below: bool, d: PairedDifference, check: LongerCap | None = None, capped: bool = False) -> tuple[str, str]:
    """The answer's word and clause for one model, from whether the search at the cut scored below full-depth greedy
    and where their paired difference stands against its noise (`ANSWERS`: the one owner of these words). A "no"
    (or "probably not") becomes `CAPPED` where the cut ends many more answers unfinished at the cap (`capped`) and
    greedy decoding under a longer cap (`check`) shows no cost of the cut larger than its noise."""
    word, clause = ANSWERS[(below, "clear" if d.clear else "borderline" if d.borderline else "noise")]
    if below and (d.clear or d.borderline) and capped and check is not None and not _costs(check):
        return CAPPED
    return word, clause


def _costs(check: LongerCap) -> bool:
    """Whether the cut costs greedy decoding more than its noise under the longer cap."""
    d = check.cost
    return d.clear and d.mean < 0


def cap_clause(check: LongerCap, before: float, after: float) -> str:
    """What the longer cap says of one capped model, for its answer: its unfinished shares at both caps and the cut's
    cost to greedy decoding under the longer one."""
    d = check.cost
    return (f"at {check.short} tokens the cut leaves {100 * after:.0f}% of greedy answers unfinished ({100 * before:.0f}% "
            f"at full depth); under {check.cap} tokens ({100 * check.cut_unfinished:.0f}%) it costs greedy decoding "
            f"{d.points(1)}, {d.standing()}, "
            + ("and the search was not run there" if not _costs(check) else
               "so the cap is not the whole of the cut's cost"))


def cap_values(rows: Sequence[DepthRow], checks: Sequence[LongerCap]) -> dict:
    """The longer cap's table (each model's unfinished shares and the cut's cost to greedy decoding at both caps,
    paired over the same problems) and a sentence read from it; empty where no longer cap ran."""
    if not checks:
        return {"cap_table": "", "cap_sentence": ""}
    short = checks[0].short
    lines = [f"| model | blocks kept | greedy unfinished at {short} tokens, full → cut | at "
             f"{checks[0].cap} tokens | cut's cost at {short} tokens [95% interval] | at {checks[0].cap} "
             "tokens |", "|---|---|---|---|---|---|"]
    said = []
    for c in checks:
        cut = next(r for r in rows if r.model == c.model and r.depth == c.depth)
        full = next(r for r in rows if r.model == c.model and r.depth == r.n_layers)
        gap, long = cut.paired("greedy", full, "greedy"), c.cost
        before, after = _unfinished(full), _unfinished(cut)
        shares = f"{100 * before:.0f}% → {100 * after:.0f}%" if before is not None and after is not None else "—"
        lines.append(f"| {c.model} | {c.depth} of {c.n_layers} | {shares} | {100 * c.full_unfinished:.0f}% → "
                     f"{100 * c.cut_unfinished:.0f}% | {gap.points(1, unit='')}, {gap.standing()} | {long.points(1, unit='')}, "
                     f"{long.standing()} |")
        if gap.clear and gap.mean < 0 and not _costs(c):
            said.append(f"on {c.model} the cut's cost of {gap.points(0)} at {short} tokens becomes "
                        f"{long.points(0)} under {c.cap}, {long.standing()}: the cap made most of it")
        elif _costs(c):
            said.append(f"on {c.model} the cut costs more than its noise under both caps ({long.points(0)} under "
                        f"{c.cap})")
        else:
            said.append(f"on {c.model} the cut's cost is {gap.points(0)} at {short} tokens ({gap.standing()}) and "
                        f"{long.points(0)} under {c.cap} ({long.standing()}): the cap made little of it")
    sentence = (f"Greedy decoding again under {checks[0].cap} tokens, on the same problems: " + "; ".join(said)
                + ". Only greedy decoding ran under the longer cap.")
    return {"cap_table": "\n".join(lines), "cap_sentence": sentence}


def verdict_values(rows: Sequence[DepthRow], checks: Sequence[LongerCap] = ()) -> dict:
    """The chapter's answer for every model (a paragraph where one ran, a list item each where several did): its best
    power-sampled truncation against its full-depth greedy, with the paired interval that says whether the difference
    is more than noise, and where a longer cap (`checks`, `longer_caps`) ran, what it says of the cut's cost. `answer`
    and `headline` are the first model's, which the front page falls back on."""
    check = {c.model: c for c in checks}
    groups = per_model(rows, by_size=True)
    tested = [(mine, best_truncation(mine, "power")) for mine in groups]
    ds = corrected([best.paired("power", next(r for r in mine if r.depth == r.n_layers), "greedy")
                    for mine, best in tested if best is not None])
    adjusted = iter(ds)
    verdicts = [_verdict(mine, check.get(mine[0].model), next(adjusted) if best is not None else None,
                         len(ds)) for mine, best in tested]
    first = next(v for v in verdicts if v["model"] == rows[0].model)  # the profile's first model's
    if len(verdicts) == 1:
        sentence = first["sentence"]
    else:
        sentence = "\n".join(f"* **{v['model']}.** {v['sentence']}" for v in verdicts)
    return {"full_greedy": first["full_greedy"], "full_power": first["full_power"], "verdict": sentence,
            "answer": first["answer"], "headline": first["headline"]}


def _holm_p(d: PairedDifference, adjusted: PairedDifference, tests: int) -> str:
    """'p = 0.048' for one test, 'p = 0.048; 0.097 after Holm's correction for 3 models' for several."""
    if tests < 2:
        return f"p {_p(d)}"
    return f"p {_p(d)}; {format_p(adjusted.p_value, tests)} after Holm's correction for {tests} models"


def _verdict(mine: Sequence[DepthRow], check: LongerCap | None = None, adjusted: PairedDifference | None = None,
             tests: int = 1) -> dict:
    """One model's verdict for `verdict_values`, from its rows, its longer cap's greedy decodes (`check`) and its
    headline difference with the p corrected across the `tests` models (`corrected`), which the answer's words read."""
    full = next(r for r in mine if r.depth == r.n_layers)
    best = best_truncation(mine, "power")
    g, p = full.accuracy["greedy"], full.accuracy["power"]
    if best is None:
        sentence = "No truncated depth was tested."
        answer, headline = "Not tested: this build ran no truncated depth.", ""
    else:
        b = best.accuracy["power"]
        d = best.paired("power", full, "greedy")
        adjusted = adjusted if adjusted is not None else d
        warm = best.paired("power", full, "temperature")
        outcome = "above" if b > g else "equal to" if b == g else "below"
        noise = adjusted.standing()  # the words the chapter's reading note defines, on the corrected p
        before, after = _unfinished(full), _unfinished(best)
        check = check if check is not None and check.depth == best.depth else None
        word, clause = answer_of(b < g, adjusted, check, _capped(before, after))
        answer = f"{word}: on this model {clause}{fragile(d)}. "
        sentence = answer + (f"Power sampling on the stitched {best.depth}-block model scored "
                    f"{best.interval('power')}, {outcome} the full {full.n_layers}-block model's "
                    f"greedy {full.interval('greedy')}. The paired difference is "
                    f"{d.points(1)} ({_holm_p(d, adjusted, tests)}), {noise}. Against T = 1 sampling at full depth ({full.interval('temperature')}), "
                    f"it is {warm.points(1)}, {warm.standing()} (p {_p(warm)}).")
        if _capped(before, after) and check is not None:
            said = cap_clause(check, before, after)
            sentence += f" {said[0].upper()}{said[1:]}."
        elif _capped(before, after):
            sentence += (f" At this token cap {100 * after:.0f}% of its greedy answers at {best.depth} blocks are "
                         f"unfinished, against {100 * before:.0f}% at full depth, so part of what the cut costs here "
                         "is the cap (the outcomes table below counts it).")
        answer = answer.strip()
        headline = (f"On {full.model}, power sampling with the model stitched to {best.depth} of its {full.n_layers} "
                    f"blocks scored {best.interval('power')} against {full.interval('greedy')} for greedy decoding "
                    f"with every block; the paired difference is {d.describe()}.")
    return {"model": full.model, "full_greedy": 100 * g, "full_power": 100 * p, "sentence": sentence,
            "answer": answer, "headline": headline}


def settings_values(searches: Searches, max_new_tokens: int) -> dict:
    """The search settings this build ran, glued by name for the comparison with the report's (`run_alpha`,
    `run_steps`, `run_block`, `run_cap`, `run_mode`, `run_blocks`: the blocks an MH chain may run, beside the published
    loop's `ref_blocks` of `ref_cap` tokens)."""
    power = searches.power
    return {"run_alpha": f"{searches.target.alpha:g}", "run_steps": power.mcmc_steps, "run_block": power.block_size,
            "run_cap": max_new_tokens, "run_mode": power.mode, "run_blocks": power.n_blocks(max_new_tokens),
            "ref_blocks": REFERENCE_LOOP["blocks"], "ref_cap": REFERENCE_LOOP["max_new_tokens"]}


def depth_axis_sentence(axes) -> str:
    """What the depth figure draws for each model: chapter 03's curve and how far down it went, or why it is not
    drawn (`DepthAxis.why`)."""
    drawn = [f"{a.model} ({min(a.curve)}–{max(a.curve)} blocks, {counted(a.curve_problems, 'problem')})"
             for a in axes if a.curve]
    reasons: dict[str, list[str]] = {}
    for a in axes:
        if not a.curve:
            reasons.setdefault(a.why, []).append(a.model)
    text = ("The line is chapter 03's stitched greedy sweep on these same problems, for " + listed(drawn) + "."
            if drawn else "")
    picked = [a for a in axes if a.curve and a.critical is not None
              and any(r.choice is not None and r.choice.relative for r in a.rows)]  # depths named from that curve
    if picked:
        text += (f" The depths searched are named from it: {'each' if len(picked) > 1 else 'the'} critical depth is "
                 "the shallowest whose greedy accuracy holds its share on these very problems, so by its choice the "
                 "cut costs greedy decoding little on them; a depth read on other problems may cost more.")
    apart = [a for a in axes if not a.curve]
    shared = {(a.sweep_subset.n, a.sweep_subset.of) for a in apart if a.sweep_subset is not None}
    if len(apart) > 1 and len(shared) == 1 and all(a.subset_only for a in apart):  # one reason for all: said once
        (n, of), = shared
        text += (" " if text else "") + (
            f"Chapter 03's sweep is not drawn: for {listed([a.model for a in apart])} it ran on the first {n} of these "
            f"{of} problems, where full-depth greedy scores "
            + listed([f"{100 * a.sweep_subset.full_greedy:.0f}%" for a in apart]) + " against "
            + listed([f"{100 * a.sweep_subset.full_greedy_all:.0f}%" for a in apart]) + f" on all {of}, in that "
            "order; only this chapter's depths are drawn.")
        reasons = {}
    if reasons:
        text += (" " if text else "") + ("Chapter 03's sweep is not drawn for " + "; for ".join(
            f"{listed(models)} ({why})" for why, models in reasons.items()) + ": only this chapter's depths are.")
    parts = [a.sweep_subset for a in axes if a.sweep_subset is not None]
    if parts:
        easier = all(p.full_greedy > p.full_greedy_all for p in parts)
        text += (f" So {'each' if len(parts) > 1 else 'the'} critical depth was read on part of the problems it is "
                 "then tested on" + (", and on their easier part" if easier else "") + ".")
    cut = [a for a in axes if a.cuts]
    if cut:
        def where(a) -> str:
            below = a.critical is not None and all(c < a.critical for c in a.cuts)
            return (f"{a.model} at {listed([str(c) for c in sorted(a.cuts)])} blocks"
                    + (f", below its critical depth ({a.critical})" if below else ""))
        text += (" The lens's cut points (chapter 02's two rules, read on chapter 03's problems) would cut "
                 + "; ".join(where(a) for a in cut) + ".")
    return text


def report_values() -> dict:
    """The report's answer to the same question, from `helpers.data.published`, glued by name for the notebook's
    sentence: each size's power sampling at the cut and full-model accuracy (in %), the depth and layers, the subset,
    and the 95% half-width its accuracies would have on `REPORT_IF_PROBLEMS` problems."""
    (small, s), (large, g) = sorted(REPORT_HEADLINE.items(), key=lambda item: float(item[0].split("-")[-1][:-1]))
    if (s["depth"], s["layers"]) != (g["depth"], g["layers"]):
        raise ValueError("the notebook's sentence gives one depth for both of the report's sizes")
    return {"report_small": small, "report_large": large,
            "report_power_small": 100 * s["power_truncated"], "report_greedy_small": 100 * s["greedy_full"],
            "report_power_large": 100 * g["power_truncated"], "report_greedy_large": 100 * g["greedy_full"],
            "report_depth": s["depth"], "report_layers": s["layers"], "report_subset": REPORT_SUBSET,
            "report_if_problems": REPORT_IF_PROBLEMS,
            "report_half_width": max(half_width(r["power_truncated"], REPORT_IF_PROBLEMS) for r in REPORT_HEADLINE.values())}


def _report_sizes() -> str:
    """The report's two sizes' differences (power at the truncated depth − full greedy), from `helpers.data.published`."""
    diffs = [(name, 100 * (r["power_truncated"] - r["greedy_full"]), r["depth"], r["layers"])
             for name, r in REPORT_HEADLINE.items()]
    listed = " and ".join(f"{d:+.0f} points for {name} ({depth} of {layers} layers)" for name, d, depth, layers in diffs)
    return (f"The report's differences were {listed}, on {REPORT_SUBSET}, without intervals (its layer 26 read as 26 "
            "blocks kept; read literally it keeps all 28, as *How this compares with the report* says).")


def acceptance_values(rows: Sequence[DepthRow], searches: Searches) -> dict:
    """What the chains did, for the notebook's sentence (whose frame names α, B, N and the mode, `settings_values`):
    the share of proposals accepted at each depth of each model (`acceptance_rates`), and what that says of how far
    the chains moved (`acceptance_reading`)."""
    groups = per_model(rows, by_size=True)
    rates = [(mine[0].model, ", ".join(f"{100 * r.acceptance:.0f}% at {r.depth} blocks" for r in mine
                                       if r.acceptance == r.acceptance)) for mine in groups]
    rates = [(m, text) for m, text in rates if text]
    if not rates:
        return {"acceptance_rates": "no proposal was made", "acceptance_reading": "so the chains never moved"}
    lowest = min(r.acceptance for r in rows if r.acceptance == r.acceptance)
    moved = ("so the chains do move: most proposals, each regenerating a suffix of the answer, replace the "
             "current one" if lowest > 0.5 else "so the chains do move: a regenerated suffix replaces the current "
             "one in a good share of proposals" if lowest > 0.05 else "so the chains barely move and power sampling is close to "
             "plain sampling at T = 1 here")
    said = (f"the chains accepted {rates[0][1]} of their proposals" if len(groups) == 1 else
            "the chains accepted these shares of their proposals: " + "; ".join(f"{m}, {text}" for m, text in rates))
    return {"acceptance_rates": said, "acceptance_reading": moved}


def smc_table(rows: Sequence[DepthRow]) -> str:
    """SMC against MH at each depth of each model, on the problems both ran: each one's accuracy, decoded tokens and
    wall seconds per sample there, and their paired difference; then SMC at each model's headline cut (`headline_row`,
    the depth MH's answer is judged at) against its full model's greedy decoding on the same problems (the report's
    question asked of the other sampler, at the same depth as of MH)."""
    lines = ["| model | depth | problems | SMC | MH | tokens per sample, SMC / MH | seconds per sample, SMC / MH | "
             "SMC − MH [95% interval] | against its noise |", "|---" * 9 + "|"]
    against = []
    for model in by_size(rows):  # smaller first, as the figures are
        mine = [r for r in rows if r.model == model and r.count("smc")]
        full = next((r for r in rows if r.model == model and r.depth == r.n_layers), None)
        if not mine or full is None:
            continue
        for r in mine:
            k = r.count("smc")
            d = r.paired("smc", other_key="power")
            lines.append(f"| {model} | {r.depth}/{r.n_layers} | {k} | {r.interval('smc')} | {r.interval('power', k)} | "
                         f"{r.cost('smc', 'tokens', k):.0f} / {r.cost('power', 'tokens', k):.0f} | "
                         f"{r.cost('smc', 'seconds', k):.1f} / {r.cost('power', 'seconds', k):.1f} | {d.points(0)} | "
                         f"{d.standing()} (p {_p(d)}) |")
        cut, _ = headline_row(rows, model)  # where the chapter asks it of MH: not a deeper cut, where every method fails
        if cut is not full and cut.count("smc"):
            d = cut.paired("smc", full, "greedy")
            against.append(f"on {model}, SMC at {cut.depth} blocks − greedy at {full.n_layers} is {d.points(0)} "
                           f"({d.standing()}, p {_p(d)})")
    if len(lines) == 2:
        return "*SMC ran at no depth in this build.*"
    if against:
        lines += ["", "The report's question asked of SMC, on the same problems: " + "; ".join(against) + "."]
    return "\n".join(lines)


def smc_sentence(rows: Sequence[DepthRow]) -> str:
    """The SMC table read in words: at how many of its depths SMC cost fewer tokens and less time than MH, and where
    the two differ by more than their noise (how SMC ran is the notebook's sentence, with `smc_values`)."""
    ran = [r for r in rows if r.count("smc")]
    if not ran:
        return "SMC ran at no depth of this build."
    fewer, faster = (sum(r.cost("smc", what, r.count("smc")) < r.cost("power", what, r.count("smc")) for r in ran)
                     for what in ("tokens", "seconds"))
    apart = [f"{r.model} at {r.depth}" for r in ran if r.paired("smc", other_key="power").clear]
    return (f"Of the {counted(len(ran), 'depth')} where both ran, SMC decoded fewer tokens than MH at "
            f"{fewer} and took less time at {faster}; its accuracy differs from MH's by more than the noise at "
            + listed(apart, "none of them") + ".")


def smc_values(rows: Sequence[DepthRow], searches: Searches) -> dict:
    """How SMC ran, for the notebook's sentence: its particles, how often they met, the ESS threshold and how often
    they were resampled per sample (over every depth of every model)."""
    smc = searches.smc
    return {"smc_k": smc.particles, "smc_meet": smc.block_size, "smc_ess": float(smc.ess_threshold),
            "smc_resamples": mean_resamples(rows)}


def sweep_glue(sweep: StepsSweep) -> dict:
    """The N sweep's glued values and sentence: accuracy and cost at each N, the largest N against the one it is set
    against, and the other MH mode at the chapter's N."""
    top, base, d = sweep.difference()
    at = dict(zip(sweep.steps, sweep.accuracy, strict=True))
    cost = dict(zip(sweep.steps, sweep.tokens, strict=True))
    best = [n for n in sweep.steps if at[n] >= max(sweep.accuracy) - 1e-9]  # ties named together
    sentence = (f"On {sweep.model} at {sweep.depth} of {sweep.n_layers} blocks, on {counted(sweep.n_problems, 'problem')} with "
                f"{sweep.n_seeds} seeds each, MH power sampling ({sweep.mode} mode) scored from "
                f"{100 * min(sweep.accuracy):.0f}% to {100 * max(sweep.accuracy):.0f}% across N (highest at N = "
                f"{listed(best)}: {percent_with_interval(at[best[0]], sweep.n_problems)}; the figure gives each). N = {top} spent "
                f"{cost[top]:,.0f} decoded tokens per answer against {cost[base]:,.0f} for N = {base}; the paired "
                f"difference N = {top} − N = {base} is {d.points()} (p {_p(d)}), {_verdict_word(d)}.")
    values = {"steps_depth": sweep.depth, "steps_top": top, "steps_base": base,
              "steps_difference": round(100 * d.mean, 1)}
    if sweep.other_mode is not None:
        o = sweep.other_versus_chapter()
        sentence += (f" The {sweep.other_mode} mode at the chapter's N = {sweep.chapter_steps} scored "
                     f"{percent_with_interval(sweep.other_accuracy, len(sweep.other_scores))} for "
                     f"{sweep.other_tokens:,.0f} decoded tokens per answer; {sweep.other_mode} − {sweep.mode} is "
                     f"{o.points()} (p {_p(o)}), {_verdict_word(o)}.")
        values["mode_difference"] = round(100 * o.mean, 1)
    return {**values, "steps_sentence": sentence}


TOP_50 = (", but for the reference proposal's cut to the 50 likeliest tokens, which low-temperature sampling does "
          "not make")  # the published proposal's top-k (`PowerConfig.proposal_top_k`)


def steps_values(sweep: StepsSweep, rows: Sequence[DepthRow]) -> dict:
    """"Does N matter?" answered on the headline set first (MH at the chapter's N against low temperature, the
    proposal alone, at the sweep's depth, on every problem), then the sweep's values, measured on its subset."""
    values = sweep_glue(sweep)
    row = next((r for r in rows if r.model == sweep.model and r.depth == sweep.depth), None)
    if row is None:
        return values
    d = row.paired("power", other_key="low")
    n = min(row.count("power"), row.count("low"))
    first = (f"On {'all ' if n == row.n_problems else 'the '}{counted(n, 'problem')} of the method comparison, {sweep.model}'s MH with "
             f"N = {sweep.chapter_steps} at {sweep.depth} blocks scored {row.interval('power', n)} against "
             f"{row.interval('low', n)} for low-temperature sampling at the same depth, which is what N = 0 draws (the "
             f"proposal alone{TOP_50 if sweep.mode == 'reference' else ''}): {d.points(1)} (p {_p(d)}), "  # to a tenth, as the
             # decomposition's table prints the same difference
             f"{_verdict_word(d)}. ")
    subset = "" if sweep.n_problems == n else (f"The N sweep ran on the first {sweep.n_problems} of them, so its "
                                               "intervals are wider. ")
    return {**values, "steps_sentence": first + subset + values["steps_sentence"],
            "steps_headline": round(100 * d.mean, 1)}


def _verdict_word(d: PairedDifference) -> str:
    return d.standing()  # the words the chapter's reading note defines


def depth_sentence(rows: Sequence[DepthRow]) -> str:
    """Which stitched depths each model ran and how they were chosen (`DepthChoice.describe`), in model order."""
    choices = list({r.model: r.choice for r in rows if r.choice is not None}.values())
    if len(choices) > 1 and all(c.relative for c in choices):  # one sentence where every model's depths are its own
        if all(c.depths == (c.critical,) for c in choices):
            return ("The depth tested on each model is its critical depth in chapter 03: "
                    + listed([f"{c.critical} of {c.model}'s {c.n_layers} blocks" for c in choices]) + ".")
        return ("The depths tested on each model are named by its critical depth in chapter 03: "
                + "; ".join(f"{listed([str(d) for d in c.depths])} of {c.model}'s {c.n_layers} blocks (critical: "
                            f"{c.critical})" for c in choices) + ".")
    return " ".join(c.describe() for c in choices)


OWN_MARK = "‡"  # a table's model cell: this model ran problems of its own (`own_problems_note` says which)


def own_problems(rows: Sequence[DepthRow]) -> dict[str, str]:
    """' ‡' for each model whose problems are not the book's (`on_own_problems`), '' for the others: what a table's
    model cell adds, so that rows on other problems are never read as paired with the rest (a mark, not the levels
    themselves, so that a wide table keeps its columns; `own_problems_note` is its footnote)."""
    return {m: f" {OWN_MARK}" if r is not None else "" for m, r in _on_own(rows).items()}


def problems_text(r: DepthRow) -> str:
    """A row's problems as a reader compares them: their levels, and for generated arithmetic how many operations an
    answer takes ('levels 1 and 3, one operation each'), since a level's number alone does not say how hard it is."""
    text = levels_text(r.problem_levels)
    if r.problem_ids and all(i.startswith("arith-") for i in r.problem_ids) and \
            all(lv in LEVELS for lv in r.problem_levels):
        ops = sorted({LEVELS[lv].n_ops for lv in r.problem_levels})
        text += (", one operation each" if ops == [1] else
                 f", {ops[0]}–{ops[-1]} operations each" if len(ops) > 1 else f", {ops[0]} operations each")
    return text


def own_problems_note(rows: Sequence[DepthRow]) -> list[str]:
    """The footnote of `own_problems`' marks, as a table's closing lines ([] where no model is marked)."""
    return [line for m, r in _on_own(rows).items() if r is not None
            for line in ("", f"{OWN_MARK} {m} ran problems of its own ({problems_text(r)}), not the other models': its "
                             "rows pair with each other, not with theirs.")]


def _on_own(rows: Sequence[DepthRow]) -> dict[str, DepthRow | None]:
    """Each model: one of its rows where it ran problems of its own, None where it ran the book's."""
    last = {r.model: r for r in rows}
    own = on_own_problems({m: r.problem_ids for m, r in last.items()})
    return {m: r if own[m] else None for m, r in last.items()}


def size_values(rows: Sequence[DepthRow], checks: Sequence[LongerCap] = ()) -> dict:
    """The report's contrast between sizes, in numbers: for each of the two smallest models (`by_size`), power
    sampling at its deepest truncation against its own full-depth greedy decoding, paired over the problems, and the
    difference between those two differences with its paired bootstrap interval and test (the problems are the
    same for both models, `size_pair`); with each critical depth as a share of its model's depth, and, where a cut
    leaves many answers unfinished at the cap, what the longer cap (`checks`) says of the cuts' costs."""
    contrast = size_contrast(rows)
    if contrast is None:
        which = ("one model" if len(by_size(rows)) == 1 else
                 f"{counted(len(by_size(rows)), 'model')} but no two sizes of one family on the same problems")
        return {"size_sentence": f"This build searches on {which}, so it cannot ask whether the answer depends on "
                                 "the model's size: run this chapter with two sizes of one family among its models "
                                 "(chapter 02 sets their logit-lens curves side by side).",
                "size_headline": ""}
    short, values = [], {}
    for tag, (cut, full), d in zip(("small", "large"), contrast.rows, contrast.differences, strict=True):
        model = full.model
        where = f"its full {full.n_layers} blocks" if cut is full else f"{cut.depth} of {full.n_layers} blocks"
        short.append(f"On {model}, power sampling at {where} scored {cut.interval('power')} against "
                     f"{full.interval('greedy')} for full-depth greedy (paired {d.points(decimals=1)}, "
                     f"{d.standing()}).")
        values.update({f"size_{tag}": model, f"size_{tag}_depth": cut.depth, f"size_{tag}_layers": full.n_layers,
                       f"size_{tag}_share": 100 * cut.depth / full.n_layers,
                       f"size_{tag}_difference": round(100 * d.mean, 1)})
    dd, n = contrast.gap, contrast.gap.n
    word = dd.standing()
    small_share, large_share = (f"{values[f'size_{t}_share']:.0f}%" for t in ("small", "large"))
    shares = (f"Both models were searched at {small_share} of their depth." if small_share == large_share else
              f"Each model was searched at {small_share} and {large_share} of its depth.")
    # one decimal: with two seeds a difference is often a half, and rounding each number on its own would print a
    # gap that is not the difference of the two differences beside it
    gap = (f"The larger {values['size_large']}'s difference ({values['size_large_difference']:+.1f} points) minus the "
           f"smaller {values['size_small']}'s ({values['size_small_difference']:+.1f}) is {dd.points(decimals=1)}")
    sentence = (f"{gap} (paired over the same {counted(n, 'problem')}, p = {dd.p_value:.2g}), {word}. {shares} "
                + _tolerance(contrast.rows) + _sizes_capped(contrast.rows, checks) + _report_sizes())
    headline = f"{short[1]} {gap}, {dd.standing()}."
    return {**values, "size_gap": round(100 * dd.mean, 1), "size_sentence": sentence, "size_headline": headline}


def _tolerance(pairs: Sequence[tuple[DepthRow, DepthRow]]) -> str:
    """The report's claim that the smaller model tolerates an earlier cut, read from the two sizes' critical depths
    (chapter 03's, where both cuts are theirs and the sweep went below them; '' otherwise): the blocks each loses and
    their share of its depth."""
    lost = []
    for cut, full in pairs:
        c = cut.choice
        if cut is full or c is None or c.critical != cut.depth or not c.curve or min(d for d, _ in c.curve) >= c.critical:
            return ""
        lost.append((full.n_layers - cut.depth, full.n_layers, full.model))
    (k_small, n_small, small), (k_large, n_large, large) = lost
    said = (f"At their critical depths {small} loses {counted(k_small, 'block')} of {n_small} "
            f"({100 * k_small / n_small:.0f}% of its depth) and {large} {counted(k_large, 'block')} of {n_large} "
            f"({100 * k_large / n_large:.0f}%)")
    if k_small == k_large:
        fewest = ", the fewest a cut can remove" if k_small == 1 else ""
        return (f"{said}: the same number of blocks{fewest}, so these two sizes give no sign of the report's claim that "
                "the smaller model tolerates an earlier cut. ")
    if k_small / n_small > k_large / n_large:
        return f"{said}: the smaller tolerates the larger share of its depth cut, as the report says. "
    return f"{said}: the larger tolerates the larger share of its depth cut, the other way from the report's claim. "


def _sizes_capped(pairs, checks: Sequence[LongerCap]) -> str:
    """Where a size's cut leaves many more greedy answers unfinished at the cap (`_capped`), the sentence that says so
    and gives both cuts' costs to greedy decoding under the longer cap, which the contrast rests on ('' otherwise)."""
    longer = {c.model: c for c in checks}
    capped = [(cut, full) for cut, full in pairs if cut is not full and _capped(_unfinished(full), _unfinished(cut))]
    if not capped:
        return ""
    said = listed([f"{100 * _unfinished(cut):.0f}% of {full.model}'s greedy answers at its cut" for cut, full in capped])
    text = f"Both differences are read at a cap that leaves {said} unfinished"
    known = [longer[full.model] for cut, full in pairs if full.model in longer and longer[full.model].depth == cut.depth]
    if len(known) == len(pairs):
        text += (f"; under {known[0].cap} tokens the two cuts cost greedy decoding "
                 + listed([f"{c.cost.points(1)} ({c.model}, {c.cost.standing()})" for c in known])
                 + " (the longer-cap table below)")
        short = [cut.paired("greedy", full, "greedy").mean for cut, full in pairs]
        long = [c.cost.mean for c in known]
        if (short[1] - short[0]) * (long[1] - long[0]) < 0:
            text += (", so the point estimates of which size the cut costs more reverse with the cap (no test sets the "
                     "two sizes' costs against each other)")
    return text + ". "


TERM_NAMES = {"cut_cost": "the cut (greedy at the cut − greedy full)",
              "recovery": "search at the cut (search − greedy, both at the cut)",
              "full_gain": "search at full depth (search − greedy, both full)",
              "mechanism": "search helps more where depth was removed (the two above, subtracted)",
              "headline": "headline (search at the cut − greedy full)"}


def decomposition_table(explained: Sequence[Explained]) -> str:
    """The decomposition of every model as one Markdown table: a row per (model, term), a column per search, each
    cell a paired difference in points with its 95% interval and sign-flip p; a term paired over a subset is
    marked † and footnoted."""
    if not explained:
        return "*No truncated depth ran, so there is no cut to take apart.*"
    lines = ["| model | term | " + " | ".join(label for _, label in SEARCHES) + " |", "|---|---|---|---|"]
    subsets, own = set(), own_problems([e.full for e in explained])
    for e in explained:
        for i, term in enumerate(TERMS):
            cells = []
            for key, _ in SEARCHES:
                part = e.parts[key]
                d = part.terms[term]
                if part.on_subset(term):
                    subsets.add((d.n, part.n_problems))
                cells.append(f"{d.points(1)}, p {_p(d)}" + (" †" if part.on_subset(term) else ""))
            name = (f"{e.full.model}{own[e.full.model]}, cut to {e.cut.depth} of {e.full.n_layers} blocks" if i == 0
                    else "")
            lines.append(f"| {name} | {TERM_NAMES[term]} | " + " | ".join(cells) + " |")
    for k, n in sorted(subsets):
        lines += ["", _subset_note(k, n)]
    return "\n".join(lines + own_problems_note([e.full for e in explained]))


def _subset_note(k: int, n: int) -> str:
    """The footnote of a decomposition term marked † (`Decomposition.on_subset`): paired over the first k of n."""
    return (f"† Paired over the first {counted(k, 'problem')} of the {n} only (MH at this model's full depth ran on "
            "those), so its interval is wider and it is not on the same problems as the other rows.")


def _p(d: PairedDifference) -> str:
    """'= 0.03' or '< 0.0001': the paired test's p after a 'p'."""
    return d.p_text if d.p_text.startswith("<") else f"= {d.p_text}"


def _mechanism(d: PairedDifference) -> str:
    """What the difference of the two gains says of the report's mechanism, in words its interval supports."""
    more = "more" if d.mean > 0 else "less"
    if d.clear:
        return f"larger than its noise: search helps {more} where depth was removed"
    if d.borderline:
        return f"borderline: a hint, not a finding, that search helps {more} where depth was removed"
    return "within its noise: these problems cannot tell whether search helps more where depth was removed"


def why_sentence(e: Explained, check: LongerCap | None = None) -> str:
    """One model's answer explained in two sentences: the cut's cost (and, with the longer cap's greedy decodes
    `check`, its cost under that cap), MH's recovery at the cut and gain at full depth, their difference, and low
    temperature's two gains beside them (chapter 04's decomposition gives each term's interval and p)."""
    t, low = e.parts["power"].terms, e.parts["low"].terms
    power = e.parts["power"]

    def term(key: str) -> str:
        d = t[key]
        where = f", on the first {counted(d.n, 'problem')}" if power.on_subset(key) else ""
        return f"{d.points(1)} ({d.standing()}{where})"

    where = (f", paired over the first {counted(t['mechanism'].n, 'problem')} only" if power.on_subset("mechanism")
             else "")
    finished = credited_gain(e)
    finishing = "" if finished is None else (
        f", of which {finished:+.1f} points are answers that finished right; the rest are unfinished answers the "
        "grader credits with a number they hold, not reasoning recovered" if finished > 0 else
        f", none of it from answers that finished right (those moved by {finished:+.1f} points): unfinished answers the "
        "grader credits with a number they hold make all of it, not reasoning recovered")
    longer = (f", and under {check.cap} tokens {check.cost.points(1)} ({check.cost.standing()})"
              if check is not None and check.depth == e.cut.depth else "")
    return (f"On {e.full.model}, the cut to {e.cut.depth} of {e.full.n_layers} blocks costs greedy decoding "
            f"{term('cut_cost')}{longer}. Against greedy decoding at the same depth, power sampling moves accuracy by "
            f"{term('recovery')} at the cut{finishing}. At full depth it moves it by {term('full_gain')}, a difference "
            f"of {t['mechanism'].points(1)} (p {_p(t['mechanism'])}{where}), {_mechanism(t['mechanism'])} (low "
            f"temperature: {low['recovery'].points(1)} at the cut, {low['full_gain'].points(1)} at full depth).")


CAP_MARK, CREDIT_MARK = "*", "°"  # Figure 4.5's marks of a point that sets the cut against the full model at a cap
# that cuts the cut's answers off, and of a gain made mostly of unfinished answers the grader credits
MARKS = {CAP_MARK: "sets the cut against the full model at a token cap that leaves many more of the cut's answers "
                   "unfinished",
         CREDIT_MARK: "mostly unfinished answers the grader credits with a number they hold"}


def credited_gain(e: Explained) -> float | None:
    """Where MH's gain at the cut is positive and at most half of it is answers that finished right (the rest being
    unfinished answers the grader credits with a number they hold), the points that finished right; else None."""
    gain = e.parts["power"].terms["recovery"].mean
    if gain <= 0 or not e.cut.ends.get("power") or not e.cut.ends.get("greedy"):
        return None
    finished = 100 * (e.cut.outcome_shares("power")["correct"] - e.cut.outcome_shares("greedy")["correct"])
    return finished if finished <= 50 * gain else None


def caveats(explained: Sequence[Explained]) -> dict[str, dict[tuple[str, str], str]]:
    """The limits a point's reading carries, as Figure 4.5 marks them ({model: {(term, search): mark}}, the search
    'greedy' for the cut's cost, which greedy alone measures): every term that sets the cut against the full model
    (the cut's cost, and both searches' mechanism and headline) where the cut ends many more greedy answers unfinished
    at the token cap than the full model (`CAP_MARK`: the cap takes more from one side than the other), MH's gain at
    the cut where it is mostly unfinished answers the grader credits (`CREDIT_MARK`: counted for MH's answers, not low
    temperature's)."""
    marks: dict[str, dict[tuple[str, str], str]] = {}
    for e in explained:
        mine = {}
        if _capped(_unfinished(e.full), _unfinished(e.cut)):
            mine |= {("cut_cost", "greedy"): CAP_MARK} | {(term, key): CAP_MARK for term in ("mechanism", "headline")
                                                          for key, _ in SEARCHES}
        if credited_gain(e) is not None:
            mine[("recovery", "power")] = CREDIT_MARK
        if mine:
            marks[e.full.model] = mine
    return marks


def decomposition_summary(explained: Sequence[Explained], checks: Sequence[LongerCap] = ()) -> str:
    """The decomposition read across the models, in words its intervals support: on which models each of MH's terms
    is larger than its noise (the table beside it gives the numbers, and the front page each model's paragraph), with
    the limit each such reading carries where it carries one (`caveats`): the cut's cost at a cap that cuts answers
    off (and, with the longer cap's greedy decodes `checks`, that cost under the longer cap), a gain at the cut made
    mostly of answers the grader credits unfinished."""
    if not explained:
        return "No truncated depth ran, so there is no cut to take apart."
    marks, longer = caveats(explained), {c.model: c for c in checks}

    def limit(e: Explained, term: str) -> str:
        mark = marks.get(e.full.model, {}).get((term, "greedy" if term == "cut_cost" else "power"))
        if mark == CAP_MARK:
            check = longer.get(e.full.model)
            under = (f"; under {check.cap} tokens {check.cost.points(0)}, {check.cost.standing()}"
                     if check is not None and check.depth == e.cut.depth else "")
            return f" (at a cap that leaves {100 * _unfinished(e.cut):.0f}% of its greedy answers at the cut unfinished{under})"
        if mark == CREDIT_MARK:
            return (f" (of which {credited_gain(e):+.1f} points finished right; the rest is unfinished answers the "
                    "grader credits)")
        return ""

    def where(term: str, key: str = "power", sign: int = 0) -> str:
        hits = [e.full.model + (limit(e, term) if key == "power" else "") for e in explained
                if e.parts[key].terms[term].clear and (sign == 0 or sign * e.parts[key].terms[term].mean > 0)]
        return listed(hits)

    n = counted(len(explained), "model")
    return (f"Read across the {n}, MH's terms are larger than their noise as follows: the cut's cost on {where('cut_cost')}; "
            f"the search's gain at the cut on {where('recovery', sign=1)} (a loss there on {where('recovery', sign=-1)}); "
            f"its gain at full depth on {where('full_gain', sign=1)} (a loss on {where('full_gain', sign=-1)}). That "
            f"search helps more where depth was removed is larger than its noise on {where('mechanism', sign=1)}, and "
            f"the reverse on {where('mechanism', sign=-1)}. Low temperature's gain at the cut is larger than its noise "
            f"on {where('recovery', 'low', 1)} (a loss there on {where('recovery', 'low', -1)}), at full depth on "
            f"{where('full_gain', 'low', 1)} (a loss on {where('full_gain', 'low', -1)}).")


def decomposition_values(explained: Sequence[Explained], checks: Sequence[LongerCap] = ()) -> dict:
    """The decomposition's glued table and sentences (Markdown), and each model's terms in points, named by the model
    (`dec_qwen2_5_coder_0_5b_power_cut_cost`: a name that means the same model in every build, for `glued-diff`),
    from `explain`."""
    values = {"decomposition_table": decomposition_table(explained),
              "decomposition_sentence": decomposition_summary(explained, checks)}
    for e in explained:
        name = re.sub(r"\W", "_", e.full.model)
        for key, _ in SEARCHES:
            values |= {f"dec_{name}_{key}_{term}": round(100 * d.mean, 1) for term, d in e.parts[key].terms.items()}
    return values


ROBUSTNESS = ("robustness_table", "robustness_sentence")
SETTING_WORDS = {"max_new_tokens": "{:,} tokens", "block_size": "B = {}", "mcmc_steps": "N = {}", "alpha": "α = {:g}",
                 "power_mode": "{} mode", "mh_blocks": "at most {} blocks a chain"}  # tokens and B always, the rest
# where two settings differ


def setting_labels(mine: Mapping, theirs: Mapping) -> tuple[str, str]:
    """('384 tokens, B = 192', '160 tokens, B = 28'): two settings of the chapter as its tables name them, by their
    token cap and block size and by every other search setting in which they differ."""
    keys = [k for k in SETTING_WORDS if k in ("max_new_tokens", "block_size") or mine.get(k) != theirs.get(k)]

    def word(x: Mapping, k: str) -> str:
        if k == "mh_blocks" and not x[k]:  # 0: as many as the cap holds
            return f"at most {-(-x['max_new_tokens'] // x['block_size'])} blocks a chain"
        return SETTING_WORDS[k].format(x[k])

    return tuple(", ".join(word(x, k) for k in keys) for x in (mine, theirs))


def robustness_values(explained: Sequence[Explained], other_rows: Sequence[DepthRow], searches: Searches,
                      max_new_tokens: int, other: Mapping | None) -> dict:
    """The decomposition at the chapter's setting (`searches`, `max_new_tokens`; its `explained`) beside the same
    comparison at another setting (`other`: its parameters; `other_rows`: `power_sampling.at_setting`'s rows): a
    table with a row per model and setting, and a sentence per model on what the cut cost at the other setting and,
    where that setting decoded greedily under a longer cap, how much of the cost that cap takes away. Empty
    without one."""
    if not other_rows or not other:
        return dict.fromkeys(ROBUSTNESS, "")
    mine = {"max_new_tokens": max_new_tokens} | {name: getattr(getattr(searches, owner), field)
                                                 for name, (owner, field) in SEARCH_PARAMETERS.items()}
    label, other_label = setting_labels(mine, other)
    theirs = {e.full.model: e for e in explain(other_rows)}
    longer = {c.model: c for c in longer_caps(other_rows)}
    lines = ["| model | setting | cut to | the cut (greedy) | greedy unfinished at the cut (at full depth) | "
             "MH at the cut | MH at full depth | headline (MH at the cut − greedy full) |",
             "|---|---|---|---|---|---|---|---|"]
    said, same, subsets = [], True, set()
    for e in explained:
        x = theirs.get(e.full.model)
        same = same and (x is None or (x.full.problem_ids == e.full.problem_ids and x.cut.problem_ids == e.cut.problem_ids))
        for name, y in ((label, e), (other_label, x)):
            if y is None:
                continue
            part = y.parts["power"]
            share = (_unfinished(y.cut), _unfinished(y.full))
            unfinished = "—" if None in share else f"{100 * share[0]:.0f}% ({100 * share[1]:.0f}%)"
            terms = ("cut_cost", "recovery", "full_gain", "headline")
            subsets |= {(part.terms[t].n, part.n_problems) for t in terms if part.on_subset(t)}
            cells = [part.terms[t].points(1, "") + (" †" if part.on_subset(t) else "") for t in terms]
            lines.append(f"| {e.full.model if y is e else ''} | {name} | {y.cut.depth} of {y.full.n_layers} | "
                         f"{cells[0]} | {unfinished} | {' | '.join(cells[1:])} |")
        if x is None:
            continue
        cost, check = x.parts["power"].terms["cut_cost"], longer.get(e.full.model)
        made, own = "", (check is not None and check.cap == max_new_tokens and check.depth == e.cut.depth
                         and x.cut.problem_ids == e.cut.problem_ids)  # its longer cap's greedy decodes are this chapter's
        if check is not None and check.depth == x.cut.depth:
            part = cap_part(x, check)
            where = f"this chapter's cap of {check.cap:,} tokens, where its greedy decodes are this chapter's own," \
                if own else f"{check.cap:,} tokens"
            made = (f"; under {where} the same cut costs {check.cost.points(1)}, "
                    + ("no less: every problem is graded alike under both caps" if part.better == part.worse == 0
                       else f"no less ({part.points(1)} apart, {part.standing()})" if part.mean <= 0 else
                       f"{part.points(1)} less (larger than its noise): answers the shorter cap cut off made that "
                       "part of its cost" if part.clear else
                       f"{part.points(1)} less ({part.standing()}): too close to say that the shorter cap made part "
                       "of its cost"))
        said.append(f"{'There, on' if not said else 'On'} {e.full.model}, the cut to {x.cut.depth} of "
                    f"{x.full.n_layers} blocks cost greedy decoding {cost.points(1)} ({cost.standing()}){made}"
                    + ("" if own and made else f"; at this chapter's setting the cut to {e.cut.depth} blocks costs "
                       f"{e.parts['power'].terms['cut_cost'].points(1)}"))
    problems = ("both settings ran the same problems" if same else
                "**the settings ran different problems**, so their rows do not pair")
    lines += ["", f"Each cell is a paired difference in points with its 95% interval, MH's terms of the decomposition "
                  f"above; {problems}, each on the seeds its profile names."]
    lines += [_subset_note(k, n) for k, n in sorted(subsets)]
    lead = (f"The table sets this chapter's decomposition ({label}) beside the same comparison at {other_label}, "
            f"{'on the same problems' if same else 'on other problems'}.")
    return {"robustness_table": "\n".join(lines), "robustness_sentence": " ".join([lead, *(f"{x}." for x in said)])}


CAP_SHARE = 0.10  # a cut whose greedy answers end unfinished at the cap this much more often than at full depth
# has a cost the cap may have made: the front page says so


def _unfinished(r: DepthRow) -> float | None:
    """The share of a row's greedy answers left unfinished, right or wrong (None where the row keeps none of its
    endings)."""
    return sum(r.outcome_shares("greedy")[o] for o in UNFINISHED) if r.ends.get("greedy") else None


def _capped(before: float | None, after: float | None) -> bool:
    """Whether the cut's greedy answers end unfinished (`after`) at least `CAP_SHARE` more often than the full model's
    (`before`, both `_unfinished`), so part of the cut's cost may be the cap."""
    return before is not None and after is not None and after - before >= CAP_SHARE


def _report_note(explained: Sequence[Explained]) -> str:
    """The line under the front table that sets the report's gains beside this build's intervals, and says on how
    much that rests: other models, problems, blocks, caps and depths."""
    report = " and ".join(f"{g:+.0f} points ({size})" for size, g in report_gains().items())
    out = [e.full.model for e in explained if excluded_gains(e.parts["power"].terms["headline"]) == report_gains()]
    held = [e.full.model for e in explained if e.full.model not in out]
    def of(models: list[str]) -> str:
        return f"the interval of {models[0]}" if len(models) == 1 else f"the intervals of {listed(models)}"

    verdict = "; ".join(part for part in (
        f"the MH − greedy {of(out)[4:]} {'lies' if len(out) == 1 else 'lie'} below both" if out else "",
        f"the MH − greedy {of(held)[4:]} {'holds' if len(held) == 1 else 'hold'} at least one" if held else "") if part)
    return (f"The report's gains, {report}, came from Qwen2.5-Math base models on MATH500, with blocks of 192 tokens (and "
            f"an answer length of about {REPORT_SETTINGS['length']:.0f} tokens, which it gives with Karan and Du's "
            "suggested parameters and which matches the mean length they report for power sampling on "
            "Qwen2.5-Math-7B; the report does not say it measured it), at the depths its lens chose: not this build's models, problems or "
            f"settings, so they are set beside these intervals for scale only ({verdict}). Read literally, its "
            "\"Layer 26\" keeps all 28 blocks, and its gains are then search on the uncut model, chapter 04's "
            "*search at full depth* term.")


def several_tests(models: Sequence[str], fair: Sequence[PairedDifference]) -> str:
    """The note under the front table where the headline was tested on several models: why each p is given after
    Holm's correction too, and which stay below 5% (`fair`: each model's headline difference as `corrected` gives
    it; "" for one model)."""
    if len(models) < 2:
        return ""
    kept = [m for m, d in zip(models, fair, strict=True) if d.p_value < 0.05]
    return (f"The headline is tested once on each of the {len(models)} models, so one p below 5% among them is "
            f"weaker evidence than it would be alone: the table gives each p after Holm's correction for "
            f"{len(models)} tests too, and its words and the answer above read the corrected p. After it, "
            f"{listed(kept, 'none') + (' stays' if len(kept) == 1 else ' stay')} below 5%.")


def _knife_edge(explained: Sequence[Explained]) -> str:
    """The note under the front table where a model's cut is chapter 03's critical depth and sits within one problem
    of the collapse line on the problems chapter 03 read it on: one problem either way would move the cut ("" where
    none does, or the depths were not chosen so)."""
    close, read, parts = [], [], []
    for e in explained:
        choice = e.cut.choice
        if choice is None or not choice.relative or choice.critical != e.cut.depth or not choice.curve \
                or choice.sweep is None:
            continue
        curve, n = dict(choice.curve), choice.curve_problems
        line = choice.sweep.collapse_fraction * curve[max(curve)] * n  # problems the critical depth must keep
        if curve.get(e.cut.depth) is not None and round(curve[e.cut.depth] * n) - line < 1:
            above = "the full model: no cut at all" if e.cut.depth + 1 == e.full.n_layers else f"{e.cut.depth + 1} blocks"
            close.append(f"{e.full.model} solves {round(curve[e.cut.depth] * n)} of {n} at its cut, where the line "
                         f"asks {line:g}; one fewer and its critical depth would be {above}")
            part = sweep_subset([e.full, e.cut], choice)
            if part is not None:
                read.append(f"{e.full.model}'s on {part.describe()}")
                parts.append((e.full.model, part))
    if not close:
        return ""
    if len(parts) > 1 and len({(p.n, p.of) for _, p in parts}) == 1:  # one subset for every model: said once
        n, of = parts[0][1].n, parts[0][1].of
        read = [f"the first {n} of these {of} problems, where full-depth greedy scores "
                + listed([f"{100 * p.full_greedy:.0f}%" for _, p in parts]) + " against "
                + listed([f"{100 * p.full_greedy_all:.0f}%" for _, p in parts]) + f" on all {of} ("
                + listed([model for model, _ in parts]) + ", in that order)"]
    where = ("on chapter 03's own problems" if not read else
             "on chapter 03's problems (" + "; ".join(read) + ")")
    return ("Each cut is chapter 03's critical depth, the shallowest from which greedy decoding keeps at least "
            f"{100 * explained[0].cut.choice.sweep.collapse_fraction:.0f}% of the full model's accuracy, read {where} "
            f"under chapter 03's cap of {explained[0].cut.choice.sweep.max_new_tokens} new tokens. "
            f"There {'this model sits' if len(close) == 1 else 'these models sit'} within one "
            f"problem of that line: {'; '.join(close)}. The depth each answer is read at is itself that uncertain "
            "(chapter 03's table of models gives each one's bootstrap interval).")


def fragile(d: PairedDifference) -> str:
    """A clause for an answer whose interval ends at zero in whole points (its word would change with one problem
    either way), or ""."""
    end = d.high if abs(d.high) < abs(d.low) else d.low
    if d.clear or abs(100 * end) >= 0.5:
        return ""
    return f"; its interval ends at {100 * end:+.0f} points, so one problem either way could change this word"


def provisional(explained: Sequence[Explained], checks: Sequence[LongerCap] = ()) -> str:
    """The paragraph under the answer's lead that says which answers the token cap leaves provisional: the unfinished
    shares of each model whose cut ends many more greedy answers unfinished (`_capped`), and what greedy decoding
    under the longer cap (`checks`) says of the cut's cost there ("" where the cap cut no model's answers)."""
    longer = {c.model: c for c in checks}
    capped, costs = [], []
    for e in explained:
        before, after = _unfinished(e.full), _unfinished(e.cut)
        if not _capped(before, after):
            continue
        capped.append(f"{100 * after:.0f}% of {e.full.model}'s greedy answers at {e.cut.depth} blocks "
                      f"({100 * before:.0f}% at full depth)")
        check = longer.get(e.full.model)
        if check is not None and check.depth == e.cut.depth:
            costs.append(f"{check.cost.points(1)} on {e.full.model} ({check.cost.standing()}; "
                         f"{100 * check.cut_unfinished:.0f}% unfinished)")
    if not capped:
        return ""
    cap = next(iter(longer.values())).short if longer else None
    text = (f"These words are provisional where the cap cuts answers off: {'at ' + str(cap) + ' tokens ' if cap else ''}"
            f"the cut leaves unfinished {listed(capped)}, and the search is graded through the same window.")
    if costs:
        text += (f" Under {checks[0].cap} tokens, where only greedy decoding ran, the cut costs greedy decoding "
                 f"{listed(costs)}; how the search fares under that cap this build does not measure.")
    else:
        text += " No longer cap ran in this build to say how much of the cut's cost is the cap's."
    return text


def answer_values(explained: Sequence[Explained], checks: Sequence[LongerCap] = ()) -> dict:
    """The front page's answer at every size: a lead that every model's own answer supports (or one line per model
    where they differ) and what the token cap leaves provisional (`provisional`), a table with a row per model, and
    why, from the decomposition. Glued as `answer_lead`, `answer_table` and `answer_why` (Markdown), which
    `helpers.runner.front` sets on the front page; from `explain`, and from `longer_caps`' `checks` where a longer cap
    ran (`answer_of`)."""
    if not explained:
        return {"answer_lead": "", "answer_table": "", "answer_why": "", "answer_summary": "no cut was searched"}
    ends = all(_unfinished(r) is not None for e in explained for r in (e.full, e.cut))
    lines = ["| model | blocks kept | power sampling (MH) at the cut | greedy at full depth | MH − greedy [95% interval], "
             "against its noise | T = 1 at full depth | MH − T = 1 [95% interval], against its noise |"
             + (" greedy answers unfinished at the cap, full → cut |" if ends else ""),
             "|---|---|---|---|---|---|---|" + ("---|" if ends else "")]
    answers, own = [], own_problems([e.full for e in explained])
    longer = {c.model: c for c in checks}
    adjusted = corrected([e.parts["power"].terms["headline"] for e in explained])  # one question, several models
    for e, fair in zip(explained, adjusted, strict=True):
        d = e.parts["power"].terms["headline"]
        before, after = _unfinished(e.full), _unfinished(e.cut)
        check = longer.get(e.full.model)
        check = check if check is not None and check.depth == e.cut.depth else None
        word, clause = answer_of(e.cut.accuracy["power"] < e.full.accuracy["greedy"], fair, check,
                                 _capped(before, after))
        answers.append((word, clause + fragile(d)))
        warm = e.cut.paired("power", e.full, "temperature")
        cell = f" {100 * before:.0f}% → {100 * after:.0f}% |" if ends else ""
        lines.append(f"| {e.full.model}{own[e.full.model]} | {e.cut.depth} of {e.full.n_layers} | {e.cut.interval('power')} | "
                     f"{e.full.interval('greedy')} | {d.points(1)}, {fair.standing()} ({_holm_p(d, fair, len(adjusted))}) | "
                     f"{e.full.interval('temperature')} | {warm.points(1)}, {warm.standing()} (p {_p(warm)}) |{cell}")
    notes = ["", "Against its noise: **larger than its noise** where the paired 95% interval excludes zero and the paired "
                 "test rejects at 5%, **borderline** where only one of the two does, **within its noise** where neither "
                 "does (chapter 04 defines them). The answer above is read against greedy decoding at full depth; "
                 "the report's \"full baseline\" does not say whether it decoded greedily or sampled, so the table "
                 "also sets the search against sampling at T = 1 at full depth. " + _report_note(explained)]
    several = several_tests([e.full.model for e in explained], adjusted)
    if several:
        notes += ["", several]
    edge = _knife_edge(explained)
    if edge:
        notes += ["", edge]
    noun = "size" if len({(e.full.family, post_training(e.full.model)) for e in explained}) == 1 else "model"
    if len(set(answers)) == 1:
        (word, clause), = set(answers)
        sizes = f"the one {noun} this build ran" if len(explained) == 1 else \
            f"both {noun}s" if len(explained) == 2 else f"all {len(explained)} {noun}s"
        lead = f"**{word}, at {sizes}:** {clause}."
    else:
        opening = (f"**No {noun} this build searched shows search winning back what the cut costs:**"
                   if all(word != "Yes" for word, _ in answers) else f"**The answer depends on the {noun}:**")
        lead = opening + "\n\n" + "\n".join(f"* **{e.full.model}**, {word.lower()}: {clause}."
                                           for e, (word, clause) in zip(explained, answers, strict=True))
    caveat = provisional(explained, checks)
    summary = ("the answer, model by model, is " + listed([f"{word.lower()} on {e.full.model}" for e, (word, _) in
                                                          zip(explained, answers, strict=True)])
               + " (the front page and the verdict above give each clause)")
    return {"answer_lead": lead + (f"\n\n{caveat}" if caveat else ""),
            "answer_table": "\n".join(lines + own_problems_note([e.full for e in explained]) + notes),
            "answer_why": " ".join(why_sentence(e, longer.get(e.full.model)) for e in explained),
            "answer_summary": summary, "answer_short": accuracy_short(explained, [w for w, _ in answers])}


def limit_sentence(explained: Sequence[Explained], rows: Sequence[DepthRow]) -> str:
    """Where the answer's test can look: how many blocks each searched cut removes, what greedy decoding and MH
    scored with one more block removed where that ran (a collapse there leaves only the searched depth to ask at), the
    models whose cut cost greedy decoding no more than its noise, where a search that reaches the full model's accuracy
    cannot be told from a cut that cost nothing, and those whose cut cost more, where the search had accuracy to win
    back. Glued as `answer_limit` ('' without a cut)."""
    cut = [e for e in explained if e.cut.depth < e.full.n_layers]
    if not cut:
        return ""
    removed = {e.full.n_layers - e.cut.depth for e in cut}
    critical = all(e.cut.choice is not None and e.cut.choice.critical == e.cut.depth for e in cut)
    where = "its critical depth, " if critical else ""
    said = (f"Every model was searched {counted(removed.pop(), 'block')} below its full depth ({where}"
            f"{listed([f'{e.cut.depth} of {e.full.n_layers}' for e in cut])} blocks)" if len(removed) == 1 else
            "The models were searched at " + listed([f"{e.cut.depth} of {e.full.n_layers} blocks ({e.full.model})"
                                                     for e in cut]) + (", each its critical depth" if critical else ""))
    said += f", keeping {_range([100 * e.cut.depth / e.full.n_layers for e in cut], '.0f')}% of the blocks."
    deeper = [next((r for r in rows if r.model == e.full.model and r.depth == e.cut.depth - 1), None) for e in cut]
    if deeper and all(r is not None and "power" in r.accuracy for r in deeper):
        seeds = " (one seed)" if all(r.n_seeds == 1 for r in deeper) else ""
        said += (f" With one more block removed ({listed([r.depth for r in deeper])} blocks), greedy decoding scored "
                 f"{_range([100 * r.accuracy['greedy'] for r in deeper], '.0f')}% and MH "
                 f"{_range([100 * r.accuracy['power'] for r in deeper], '.0f')}%{seeds}, against "
                 f"{_range([100 * e.full.accuracy['greedy'] for e in cut], '.0f')}% for greedy decoding at full depth, "
                 f"so the test can look only at the {'critical depth' if critical else 'depth searched'} itself.")
    cost = {e.full.model: e.parts["power"].terms["cut_cost"] for e in cut}
    free = [m for m, d in cost.items() if not d.clear]
    if free:
        said += (f" Where the cut's own cost to greedy decoding is within its noise, on "
                 f"{listed([f'{m} ({cost[m].points(1)})' for m in free])}, a search that reaches the full model's "
                 "accuracy cannot be told from a cut that cost nothing.")
    if free and len(free) < len(cost):
        said += (f" Only on {listed([f'{m} ({d.points(1)})' for m, d in cost.items() if d.clear])} does the cut cost "
                 "more than its noise: there the search had accuracy to win back.")
    return said


SETTLED = {"No": "no", "Probably not": "probably not", "Yes": "yes"}  # the answer's words that settle it one way


def accuracy_short(explained: Sequence[Explained], words: Sequence[str]) -> str:
    """The accuracy half of the front page's answer in a few words, from each model's answer word (`answer_of`): the
    word where every model gives one that settles it (`SETTLED`); "not settled" where some model's does not and none
    says yes; else "it depends on the model"; each model's word in brackets where they differ."""
    if len(set(words)) == 1 and words[0] in SETTLED:
        return SETTLED[words[0]]
    each = "; ".join(f"{w.lower()} on {e.full.model}" for e, w in zip(explained, words, strict=True))
    if len(set(words)) == 1:
        return f"not settled ({words[0].lower()} on every model)"
    unsettled = any(w not in SETTLED for w in words) and "Yes" not in words
    return f"{'not settled' if unsettled else 'it depends on the model'} ({each})"


def sharpness_values(rows: Sequence[DepthRow]) -> dict:
    """How sharp each model already is at each depth (smaller model first, full depth first), with what the search
    gained there: a table, a sentence that sets the sharpest and the least sharp against their gains, and the
    premise tested (`premise_sentence`)."""
    mine = [r for m in by_size(rows) for r in sorted((r for r in rows if r.model == m and r.sharp), key=lambda r: -r.depth)]
    if not mine:
        return {"sharpness_table": "*No T = 1 decodes ran, so there is nothing to measure sharpness with.*",
                "sharpness_sentence": "", "premise_sentence": "", "premise_summary": "", "premise_base_models": 0}
    lines = ["| model | kind | depth | T=1 = greedy | nats/token | MH accepts | low T − T=1 | MH − greedy [95%] |",
             "|---|---|---|---|---|---|---|---|"]
    gains, own = [], own_problems(mine)
    for r in mine:
        d = r.paired("power", other_key="greedy")
        gains.append((r, d))
        mark = " †" if r.count("power") < r.n_problems else ""
        kind = post_training(r.model).replace("instruction-tuned", "instruct")  # a narrow column; the note says it
        lines.append(f"| {r.model}{own[r.model]} | {kind} | {r.depth}/{r.n_layers} | {100 * r.sharp.agreement:.0f}% | "
                     f"{r.sharp.entropy:.3f} | {r.acceptance:.2f} | "
                     f"{100 * (r.accuracy['low'] - r.accuracy['temperature']):+.1f} | {d.points(1, unit='')}{mark} |")
    lines += ["", "kind: base, or instruct (instruction-tuned); T=1 = greedy: the share of T = 1 answers equal to the "
                  "greedy answer of the same problem; "
                  "nats/token: the mean entropy per token of the T = 1 decodes; MH accepts: the share of MH proposals "
                  "accepted; the last two columns in points."]
    if any(r.count("power") < r.n_problems for r in mine):
        k = min(r.count("power") for r in mine)
        lines += ["", f"† MH on the first {counted(k, 'problem')} only, paired with greedy there."]
    sharpest = max(gains, key=lambda g: (g[0].sharp.agreement, -g[0].sharp.entropy))
    softest = min(gains, key=lambda g: (g[0].sharp.agreement, -g[0].sharp.entropy))
    sentence = (f"Ranked by the share of T = 1 answers equal to the greedy one, the sharpest here is "
                f"{sharpest[0].model} at {sharpest[0].depth} blocks: {100 * sharpest[0].sharp.agreement:.0f}% "
                f"of its T = 1 answers equal its greedy answer, at {sharpest[0].sharp.entropy:.3f} nats per token, and MH "
                f"moved its accuracy by {sharpest[1].points(1)} ({sharpest[1].standing()}). The least sharp is "
                f"{softest[0].model} at {softest[0].depth} blocks ({100 * softest[0].sharp.agreement:.0f}%, "
                f"{softest[0].sharp.entropy:.3f} nats), where MH moved it by {softest[1].points(1)} ({softest[1].standing()}).")
    calm = min(gains, key=lambda g: g[0].sharp.entropy)[0]
    wild = max(gains, key=lambda g: g[0].sharp.entropy)[0]
    instead = ([f"the sharpest is {calm.model} at {calm.depth} blocks ({calm.sharp.entropy:.3f} nats)"]
               if calm is not sharpest[0] else [])
    instead += ([f"the least sharp is {wild.model} at {wild.depth} blocks ({wild.sharp.entropy:.3f} nats)"]
                if wild is not softest[0] else [])
    if instead:  # the two measures rank the rows apart: say where, not merge them
        sentence += f" By entropy per token instead, {' and '.join(instead)}."
    if sharpest[0] is softest[0]:
        sentence = (f"{sharpest[0].model} at {sharpest[0].depth} blocks: {100 * sharpest[0].sharp.agreement:.0f}% of its "
                    f"T = 1 answers equal its greedy answer, at {sharpest[0].sharp.entropy:.3f} nats per token; MH moved "
                    f"its accuracy by {sharpest[1].points(1)} ({sharpest[1].standing()}).")
    return {"sharpness_table": "\n".join(lines + own_problems_note(mine)), "sharpness_sentence": sentence,
            "premise_sentence": premise_sentence(rows), "premise_summary": premise_summary(rows),
            "premise_base_models": len(base_models(mine))}


def _range(values: Sequence[float], fmt: str) -> str:
    low, high = min(values), max(values)
    return format(low, fmt) if format(low, fmt) == format(high, fmt) else f"{format(low, fmt)}–{format(high, fmt)}"


def base_models(rows: Sequence[DepthRow]) -> list[str]:
    """The rows' base (pretrained) models with T = 1 decodes at full depth, smaller first: those the premise is
    tested on."""
    return [m for m in by_size(rows) if post_training(m) == "base"
            and any(r.model == m and r.sharp and r.depth == r.n_layers for r in rows)]


def premise_sentence(rows: Sequence[DepthRow]) -> str:
    """The report's premise tested on this build: each base model's sharpness at full depth beside the
    instruction-tuned models' range, what MH gained over greedy, T = 1 and low temperature there (each beside the
    instruction-tuned models' gains) and at its cut, and whether the two steps of the premise (a base model is less
    sharp; so the search gains on it) showed. Sharpness is compared across models, each on its own problems; gains
    are tested only within a model, where they pair, and set beside other models' as point estimates."""
    full = {r.model: r for r in rows if r.sharp and r.depth == r.n_layers}
    base = base_models(rows)
    tuned = [full[m] for m in by_size(rows) if m in full and post_training(m) == "instruction-tuned"]
    if not base:
        return ("No base model ran in this build, so the table holds only the instruction-tuned half of the premise "
                "(the one base model that ships offline is Gemma 3 270M).")
    sentences = []
    for m in base:
        f = full[m]
        text = (f"The base model, {m}, gives its greedy answer in {100 * f.sharp.agreement:.0f}% of its T = 1 answers "
                f"at full depth, at {f.sharp.entropy:.3f} nats per token")
        if tuned:
            text += (f", where the instruction-tuned models give it in "
                     f"{_range([100 * t.sharp.agreement for t in tuned], '.0f')}% at "
                     f"{_range([t.sharp.entropy for t in tuned], '.3f')} nats (each on its own problems): on these two "
                     f"measures it is {_sharper(f, tuned)}")
        sentences.append(text + ".")
        sentences.append(_premise_gains(f, tuned, [r for r in rows if r.model == m and r.depth < r.n_layers
                                                   and r.count("power")]))
    return " ".join(sentences)


def premise_summary(rows: Sequence[DepthRow]) -> str:
    """The premise's test in one sentence per base model, for the front page (`premise_sentence` gives the numbers):
    how sharp it is beside the instruction-tuned models and where its gains at full depth lie beside theirs ("" where
    no base model or no instruction-tuned model ran)."""
    full = {r.model: r for r in rows if r.sharp and r.depth == r.n_layers}
    tuned = [full[m] for m in by_size(rows) if m in full and post_training(m) == "instruction-tuned"]
    if not tuned:
        return ""
    said, own = [], _on_own(rows)
    for m in base_models(rows):
        where, verdict = _premise_reading(full[m], tuned)
        mine = f" (on {problems_text(full[m])}, against {problems_text(tuned[0])} for the others)" if own.get(m) else ""
        said.append(f"Here {m} is one{mine}: it is {_sharper(full[m], tuned, 'the instruction-tuned models')}, and its "
                    f"gains from search at full depth lie {where}: {verdict}.")
    return ("The report samples base models, which the premise says are less sharp, so search gains more on them. "
            + " ".join(said) + " These are point estimates across models, each on its own problems: no test sets one "
            "model's gain against another's; chapter 04 gives the numbers." if said else "")


def _sharper(base: DepthRow, tuned: Sequence[DepthRow], them: str = "them") -> str:
    """Where a base model's sharpness at full depth lies beside every instruction-tuned model's (`them`), in words."""
    less = all(base.sharp.agreement < t.sharp.agreement and base.sharp.entropy > t.sharp.entropy for t in tuned)
    more = all(base.sharp.agreement > t.sharp.agreement and base.sharp.entropy < t.sharp.entropy for t in tuned)
    return (f"less sharp than every one of {them}, as the premise expects" if less else
            f"sharper than every one of {them}, against the premise's expectation" if more else
            f"neither sharper nor less sharp than all of {them}")


PREMISE_GAINS = (("greedy", "MH − greedy"), ("temperature", "MH − T = 1"), ("low", "MH − low temperature"))


def _gain(r: DepthRow, other: str) -> float:
    """MH's mean gain over `other` at `r`, in points, over the problems both ran: the point estimate that is set beside
    other models' (no interval: gains of different models do not pair, so none is tested against another)."""
    a, b = r.scores["power"], r.scores[other]
    n = min(len(a), len(b))
    return 100 * (sum(a[:n]) - sum(b[:n])) / n


def _premise_reading(base: DepthRow, tuned: Sequence[DepthRow]) -> tuple[str, str]:
    """Where the base model's three gains at full depth lie beside the instruction-tuned models' (point estimates,
    each model on its own problems) and what that says of the premise's prediction."""
    sides = {}
    for other, name in PREMISE_GAINS:
        mine, theirs = _gain(base, other), [_gain(t, other) for t in tuned]
        sides[name] = ("above" if all(mine > x for x in theirs) else "below" if all(mine < x for x in theirs)
                       else "within")
    grouped = {side: [name.removeprefix("MH − ") for name, s in sides.items() if s == side]
               for side in ("above", "within", "below")}
    whose = {"above": "above every instruction-tuned model's", "within": "within the instruction-tuned models'",
             "below": "below every instruction-tuned model's"}
    where = "; ".join(f"{whose[side]} against {listed(names)}" for side, names in grouped.items() if names)
    verdict = ("as the premise predicts for a less sharp model" if set(sides.values()) == {"above"} else
               "against the premise's prediction" if set(sides.values()) == {"below"} else
               "so the three comparisons do not agree on the premise's prediction")
    return where, verdict


def _premise_gains(base: DepthRow, tuned: Sequence[DepthRow], cut: Sequence[DepthRow]) -> str:
    """The premise's prediction read from the search's gains at full depth: the base model's MH − greedy (the report's
    comparison), MH − T = 1 and MH − low temperature, each paired within it and set beside the instruction-tuned
    models' (point estimates: gains of different models on different problems do not pair, so no test compares
    them), and its MH − greedy at its deepest cut (`cut`: its truncated rows)."""
    parts = []
    for other, name in PREMISE_GAINS:
        d = base.paired("power", other_key=other)
        theirs = [_gain(t, other) for t in tuned]
        parts.append(f"{name} {d.points(1)} ({d.standing()}" + (f"; theirs {_range(theirs, '+.1f')})" if theirs else ")"))
    text = "At full depth its gains are " + listed(parts)
    if cut:
        c = min(cut, key=lambda r: r.depth)
        d = c.paired("power", other_key="greedy")
        text += f"; at {c.depth} of {c.n_layers} blocks MH − greedy is {d.points(1)} ({d.standing()})"
    if not tuned:
        return text + "."
    where, verdict = _premise_reading(base, tuned)
    return (f"{text}. Its gains at full depth lie {where}: {verdict} (point estimates across models, each on its own "
            "problems: no test sets one model's gain against another's).")


def level_values(scans: Sequence[LevelScan], shared: Sequence[int] | None) -> dict:
    """The scan as a Markdown table (a row per scanned model, a column per level) and a sentence per model that
    says what the scan measured at the levels the other models run (`shared`; None: every level), which levels leave
    it room both ways, and whether the levels it runs are those; with no scan, which levels every model runs."""
    every = "every level" if shared is None else f"levels {listed(list(shared))}"
    if not scans:
        return {"levels_table": "", "levels_sentence": f"Every model runs the same problems, from {every}."}
    low, high = ROOM
    levels = sorted({lv for s in scans for lv in s.accuracy})
    lines = ["| model | kind | " + " | ".join(f"level {lv}" for lv in levels) + " | levels run |",
             "|---" * (len(levels) + 3) + "|"]
    sentences = []
    for s in scans:
        cells = [percent_with_interval(s.accuracy[lv], s.n[lv]) if lv in s.accuracy else "–" for lv in levels]
        lines.append(f"| {s.model} | {post_training(s.model)} | " + " | ".join(cells) + f" | {listed(s.given)} |")
        room, theirs = s.with_room(), [lv for lv in (shared or s.accuracy) if lv in s.accuracy]
        at_theirs = listed([f"{100 * s.accuracy[lv]:.0f}%" for lv in theirs])
        where = ("the other models' levels leave it no room" if not set(theirs) & set(room) else
                 "some of the other models' levels would leave it room too")
        runs = f"level{'s' if len(s.given) > 1 else ''} {listed(s.given)}"
        if s.agrees():
            verdict = "so the levels it runs are the measured ones"
        elif s.within():
            left = [lv for lv in room if lv not in s.given]
            verdict = (f"and it runs {runs}, {'each' if len(s.given) > 1 else 'one'} among them "
                       f"(level{'s' if len(left) > 1 else ''} {listed(left)} would leave room too)")
        else:
            verdict = f"while it runs {runs}, as the profile chose them: this scan does not support that choice"
        sentences.append(f"At full depth, {s.model}'s greedy decoding solves {at_theirs} of the other models' "
                         f"{every} ({min(s.n.values())} problems per level), so {where}. The levels where it leaves "
                         f"room both ways ({100 * low:.0f}–{100 * high:.0f}% solved) are {listed(room)}, {verdict}.")
    lines += ["", f"Full-depth greedy accuracy with its 95% interval, {min(n for s in scans for n in s.n.values())} "
                  "problems per level; the chapter's other models run " + every + "."]
    return {"levels_table": "\n".join(lines), "levels_sentence": " ".join(sentences)}


PROSE = ("answer_limit", "comparisons_table", "acceptance_rates", "acceptance_reading", "outcomes_table", "failure_sentence", "cap_table", "cap_sentence",
         "smc_sentence", "smc_table", "depth_sentence", "size_sentence", "size_headline", "decomposition_table",
         "decomposition_sentence", "answer_lead", "answer_table", "answer_why", "sharpness_table", "sharpness_sentence",
         "premise_sentence", "premise_summary", "levels_table", "levels_sentence", "pass_sentence")


def prose_values(rows: Sequence[DepthRow], searches: Searches, scans: Sequence[LevelScan] = (),
                 levels: Sequence[int] | None = None, checks: Sequence[LongerCap] = (),
                 explained: Sequence[Explained] | None = None) -> dict:
    """The chapter's glued tables and sentences besides the verdict (those named in `PROSE` are Markdown), with the
    two-size contrast's numbers, the levels' scan (`helpers.chapters.levels`; `levels`: the shared ones), the
    longer cap's greedy decodes (`checks`) and the rows taken apart (`explained`: `explain(rows)`, which the
    decomposition's figure already drew, else computed here)."""
    explained = explain(rows) if explained is None else explained  # its bootstraps, once per build
    tests = comparisons(rows)
    return {"comparisons_table": comparisons_table([(label, d) for _, label, d in tests], [m for m, _, _ in tests]),
            **acceptance_values(rows, searches), "outcomes_table": outcomes_table(rows),
            "failure_sentence": failure_sentence(rows), "smc_sentence": smc_sentence(rows), **smc_values(rows, searches),
            "smc_table": smc_table(rows),
            "depth_sentence": depth_sentence(rows), **size_values(rows, checks), **decomposition_values(explained, checks),
            **answer_values(explained, checks), "answer_limit": limit_sentence(explained, rows), **cap_values(rows, checks), **sharpness_values(rows), **level_values(scans, levels),
            "pass_sentence": pass_sentence(rows), **report_values()}


def pass_sentence(rows: Sequence[DepthRow]) -> str:
    """What the pass@k figure shows: at which depths power sampling's pass@k rose less than T = 1's from k = 1 to the
    largest k (the sign of collapsed diversity), as far as so few samples can say; the figure gives each rise."""
    groups = [[r for r in mine if len(r.pass_at_k.get("power", [])) > 1] for mine in per_model(rows, by_size=True)]
    groups = [g for g in groups if g]
    if not groups:
        return "With one sample per problem there is no pass@k beyond k = 1 to compare."
    k = len(groups[0][0].pass_at_k["power"])
    less = {(r.model, r.depth): (r.pass_at_k["power"][-1] - r.pass_at_k["power"][0])
            < (r.pass_at_k["temperature"][-1] - r.pass_at_k["temperature"][0])
            for mine in groups for r in sorted(mine, key=lambda r: -r.depth)}
    lower = [key for key, x in less.items() if x]

    def places(keys: list[tuple[str, int]], unit: str = "") -> str:  # depths alone where one model ran
        return listed([str(d) for _, d in keys]) + unit if len(groups) == 1 else listed([f"{m} at {d}" for m, d in keys])

    verdict = ("power sampling's pass@k rises less than T = 1's at every depth: its samples agree more, as a "
               "sharper distribution's do" if len(lower) == len(less) else
               "at no depth does power sampling's pass@k rise less than T = 1's: no sign that the search collapsed "
               "the samples' diversity" if not lower else
               f"power sampling's pass@k rises less than T = 1's at {places(lower, ' blocks')} and not at "
               f"{places([key for key in less if key not in lower])}: these few samples show no consistent sign "
               "either way")
    return (f"From k = 1 to k = {k}, {verdict} (the figure gives each rise). With {k} samples per problem this is the "
            "curve's first step only, where the claim it tests concerns the whole curve.")
