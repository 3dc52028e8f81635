"""Chapter 03's prose: the sentences, tables and glued values its page prints from each model's `stitch.Sweep` (the
numbers are computed in `helpers.chapters.stitch`, which knows nothing of these words).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from helpers.chapters.common_text import critical_depth_text, levels_text
from helpers.chapters.exercises import rerun_command
from helpers.chapters.stitch import (
    AnswerLengths,
    Sweep,
    compared_depths,
    method_differences,
    naive_everywhere,
)
from helpers.core.numbers import counted, listed, readable
from helpers.data.model_sets import on_own_problems
from helpers.data.problems import Problem
from helpers.evaluation.critical import critical_interval
from helpers.evaluation.lengths import LOOP_SHARE, choose_cap, summarize
from helpers.evaluation.stats import percent_with_interval
from helpers.models.truncation import critical_depth, critical_is_bound


def sweep_sentence(sweeps: dict, depths: Sequence[int] | None, span: int | None, floor_fraction: float | None = None,
                   naive_depths: Sequence | None = None) -> str:
    """Which depths each model's sweep evaluated and why (the rule as this build applied it: named depths, a floor,
    a span or the cut points), where naive truncation ran, and the cut points its lens found, which come from this
    chapter's own problems and may differ from chapter 02's."""
    rule = ("the depths the profile names" if depths else
            f"each model's depths from the full one down, a block at a time, until greedy accuracy falls below "
            f"{100 * floor_fraction:.0f}% of the full model's" if floor_fraction is not None else
            f"the last {span} depths below each model's full depth (the profile's budget; cut points below them are "
            "not swept)" if span is not None else "every depth from each model's earliest cut point up to its full "
            "depth")
    naive = ("with both truncations" if naive_depths is None else
             f"with stitch-and-preserve, and naive truncation at {' and '.join(map(str, naive_depths))} only")
    per = "; ".join(f"{x.model}: cut points {', '.join(map(str, x.cuts)) or 'none found'}, depths "
                    f"{', '.join(map(str, sorted(x.accuracy.get('stitch', x.depths))))}"
                    + (f" (naive at {', '.join(map(str, sorted(d for d in x.accuracy['naive'] if d < x.n_layers)))})"
                       if naive_depths is not None and "naive" in x.accuracy else "") for x in sweeps.values())
    return (f"The sweep evaluates {rule}, {naive}. {per}. The cut points come from the lens over this "
            "chapter's own problems and the full model's solutions of them, so they can differ from chapter 02's, "
            "which reads its own problems.")


def agreement_values(s: Sweep) -> dict:
    """How far the truncations move the full model's predictions: KL and the perplexity of its solutions at the
    shallowest depth where every method ran (the shallowest stitched depth where naive truncation ran at none), as
    one sentence, and at how many of the compared depths each method is the closer one."""
    compared = compared_depths(s)
    cut = min(compared) if compared else min(s.depths)
    methods = [m for m in s.agreement if cut in s.agreement[m]]
    closer = {m: [d for d in compared if min(s.agreement, key=lambda x: s.agreement[x][d]["kl"]) == m]
              for m in s.agreement}
    ppl_full = readable(math.exp(s.agreement[methods[0]][s.n_layers]["nll_full"]))
    where = (f"At {cut} of {s.n_layers} blocks, the shallowest depth where both cuts ran" if compared else
             f"At {cut} of {s.n_layers} blocks, the shallowest depth of the sweep")
    parts = [f"the {'stitched' if m == 'stitch' else 'naive'} model's KL from the full model is "
             f"{s.agreement[m][cut]['kl']:.2f} nats and the perplexity of the full model's own solutions under it "
             f"{readable(math.exp(s.agreement[m][cut]['nll']), 1)}" for m in methods]
    sentence = f"{where}, " + "; ".join(parts) + f", against {ppl_full} under the full model."
    return {"cut_depth": cut, "n_layers": s.n_layers, "ppl_full": ppl_full, "agreement_sentence": sentence,
            "closer_sentence": _closer_sentence(closer, compared)}


def _closer_sentence(closer: dict[str, list[int]], compared: list[int]) -> str:
    """Which truncation stays closer to the full model's distributions, depth by depth, said as the data have it."""
    if len(closer) < 2 or not compared:
        return "Only one truncation method ran at these depths, so there is no comparison to make."
    parts = [f"the {m} model at {len(ds)} ({', '.join(map(str, ds))})" for m, ds in closer.items() if ds]
    return (f"Of the {counted(len(compared), 'truncated depth')} where both cuts ran, the lower KL from the full model "
            "belongs to "
            + " and to ".join(parts) + ".")


def examples_table(s: Sweep, problems: Sequence[Problem], n_examples: int) -> str:
    """Generations of the full model and of each method at the shallowest depth where every method ran, on the first
    `n_examples` problems (not chosen), each marked right or wrong (Markdown)."""
    compared = compared_depths(s)
    cut = min(compared) if compared else min(s.depths)
    methods = [m for m in ("stitch", "naive") if m in s.outputs and cut in s.outputs[m]]

    def clip(text: str) -> str:
        return text.replace("\n", " ⏎ ").replace("|", "∣")[:220]

    def marked(record: dict) -> str:
        return ("✓ " if record["correct"] else "✗ ") + clip(record["text"])

    rows = ["| problem | full model | " + " | ".join(f"{m} at {cut}" for m in methods) + " |",
            "|---" * (len(methods) + 2) + "|"]
    for i, p in enumerate(problems[:n_examples]):
        cells = [marked(s.full[i])] + [marked(s.outputs[m][cut][i]) for m in methods]
        rows.append(f"| {clip(p.question)} (answer {p.answer}) | " + " | ".join(cells) + " |")
    return "\n".join(rows)


def critical_values(s: Sweep, collapse_fraction: float, n_problems: int) -> dict:
    """Critical depths, what the shallowest depth keeps, and the sentence that states the result."""
    methods = list(s.accuracy)
    full_acc = 100 * s.accuracy[methods[0]][s.n_layers]
    crit = {m: critical_depth(s.accuracy[m], s.accuracy[m][s.n_layers], collapse_fraction) for m in methods}
    full_cost, kept = s.costs[s.n_layers], s.costs[min(s.depths)]
    return {"critical": crit, "full_accuracy": full_acc, "n_problems_total": n_problems,
            "flops_kept_at_cut": 100 * kept.flops_per_token / full_cost.flops_per_token,
            "params_kept_at_cut": 100 * kept.params_total / full_cost.params_total,
            "unembed_share": 100 * full_cost.flops_unembedding / full_cost.flops_per_token,
            "critical_sentence": _critical_sentence(s, crit, full_acc, collapse_fraction)
            + _interval_sentence(s, crit.get("stitch"), collapse_fraction),
            "critical_depth_stitch": critical_depth_text(crit.get("stitch"))}


EXERCISE_COLLAPSE = 0.8  # the critical-depth rule's share in exercise "a stricter critical depth"


def exercise_values(s: Sweep, profile: str) -> dict:
    """What the exercises' solutions quote: the critical depth under a stricter share (read from the sweep's
    accuracies, as a re-run with that parameter would give it) and the KL of the full-depth stitched model."""
    method = next(iter(s.accuracy))
    strict = critical_depth(s.accuracy[method], s.accuracy[method][s.n_layers], EXERCISE_COLLAPSE)
    return {"rerun_command": rerun_command(profile, "03_stitch_and_preserve", collapse_fraction=EXERCISE_COLLAPSE),
            "ex_collapse": EXERCISE_COLLAPSE, "ex_method": method,
            "ex_critical": critical_depth_text(strict),
            "ex_full_kl": readable(max(abs(s.agreement[m][s.n_layers]["kl"]) for m in s.agreement))}


def _critical_sentence(s: Sweep, crit: dict, full_acc: float, collapse_fraction: float) -> str:
    if crit.get("stitch") is None:
        return ("The full model solves none of these problems, so no critical depth can be defined; "
                "enlarge the problem set or choose easier levels.")
    cs, cn = crit["stitch"], crit.get("naive")
    share = f"{100 * collapse_fraction:.0f}% of the full model's {full_acc:.0f}%"
    below = [a for x, a in s.accuracy["stitch"].items() if x < cs]
    if cs == s.n_layers:
        sentence = (f"No truncated depth keeps {share}: with stitch-and-preserve the critical depth is the full "
                    f"depth **{cs}** of {s.n_layers}, and every shallower model tested scores at most "
                    f"{100 * max(below, default=0):.0f}%. ")
    elif _bound(s, "stitch", cs):
        sentence = (f"With stitch-and-preserve, accuracy stays at or above {share} at every depth the sweep ran, down "
                    f"to **{cs}** of {s.n_layers}, the shallowest: the critical depth is {cs} or shallower. ")
    else:
        sentence = (f"With stitch-and-preserve, accuracy stays at or above {share} from depth **{cs}** of {s.n_layers} "
                    f"on, the critical depth; below it the best any depth tested reaches is "
                    f"{100 * max(below, default=0):.0f}%. ")
    naive = sorted((d for d in s.accuracy.get("naive", {}) if d < s.n_layers), reverse=True)
    if naive and not naive_everywhere(s):  # run at a few depths only: say which hold the level
        held = [d for d in naive if s.accuracy["naive"][d] >= collapse_fraction * full_acc / 100]
        sentence += (f"Naive truncation, run at {listed(naive)} blocks only, holds that level at "
                     f"{listed(held) if held else 'neither' if len(naive) == 2 else 'none of them'}.")
    elif "naive" in crit:
        sentence += (f"Naive truncation holds that level at every depth it ran, down to **{cn}**, the shallowest: its "
                     f"critical depth is {cn} or shallower." if _bound(s, "naive", cn)
                     else f"Naive truncation holds that level from depth **{cn}** on." if cn is not None and cn < s.n_layers
                     else "Naive truncation does not hold it at any depth below the full model.")
    truncated = [(a, x, m) for m, by_depth in s.accuracy.items() for x, a in by_depth.items() if x < s.n_layers]
    if truncated:  # on a tie the shallower depth, as the models' table picks it, then stitch-and-preserve
        ba, bd, bm = max(truncated, key=lambda t: (t[0], -t[1], t[2] == "stitch"))
        if ba > 0:
            relation = "above" if ba > full_acc / 100 else "equal to" if ba == full_acc / 100 else "below"
            cut = "stitched" if bm == "stitch" else "naively truncated"
            sentence += (f" The most accurate truncated model is {cut} at depth {bd}, with {100 * ba:.0f}%, {relation} "
                         "the full model.")
        else:
            sentence += " No truncated model below full depth solves a single problem."
    return sentence


def critical_span(s: Sweep, collapse_fraction: float) -> tuple[int, int] | None:
    """The stitched critical depth's 95% bootstrap interval over the sweep's problems (`critical_interval`); None where
    the sweep kept no per-problem outcomes or the full model solves nothing."""
    if "stitch" not in s.outputs:
        return None
    return critical_interval({d: [r["correct"] for r in records] for d, records in s.outputs["stitch"].items()},
                             collapse_fraction)


def _interval_sentence(s: Sweep, critical: int | None, collapse_fraction: float) -> str:
    """The critical depth's 95% bootstrap interval over problems (`critical_span`), and what a wide one means."""
    found = critical_span(s, collapse_fraction) if critical is not None else None
    if found is None:
        return ""
    lo, hi = found
    if lo == hi:
        return (f" Resampling the {len(s.full)} problems puts the critical depth at {lo} in at least 95% of resamples "
                "(its 95% interval is that one depth).")
    return (f" Resampling the {len(s.full)} problems, the critical depth's 95% interval spans depths {lo} to {hi}: "
            "a problem or two either way can move it, so a depth named by it sits on a knife-edge.")


def _bound(s: Sweep, method: str, critical: int | None) -> bool:
    """Whether the method's critical depth on this sweep is only an upper bound (`critical_is_bound`): it still held
    the share at the shallowest depth it ran."""
    return critical_is_bound(s.accuracy.get(method, {}), critical, method)


def _own(sweeps: dict[str, Sweep]) -> dict[str, bool]:
    """Which models run problems of their own (`on_own_problems`: not the set most models share)."""
    return on_own_problems({s.model: [p.id for p in s.problems] for s in sweeps.values()})


def models_table(sweeps: dict[str, Sweep], collapse_fraction: float) -> str:
    """One row per model: full accuracy, stitched and naive critical depths, and the blocks each lets go; with a
    column naming each model's problems where they are not the same for every model (their accuracies then do not
    compare across rows)."""
    own = _own(sweeps)
    differ = any(own.values())
    rows = ["| model | " + ("problems | " if differ else "") + "blocks | full model | critical depth (stitch) [95% interval] | "
            "blocks removable (stitch) | critical depth (naive) | best truncated (stitch) | lens cut points (stitch) |",
            "|---" * (9 if differ else 8) + "|"]
    for s in sweeps.values():
        n, full = len(s.full), s.accuracy["stitch"][s.n_layers] if "stitch" in s.accuracy else None
        crit = {m: critical_depth(s.accuracy[m], s.accuracy[m][s.n_layers], collapse_fraction) for m in s.accuracy
                if m == "stitch" or naive_everywhere(s)}  # a critical depth needs every depth: naive at a few has none
        cs, cn = crit.get("stitch"), crit.get("naive")
        truncated = {d: a for d, a in s.accuracy.get("stitch", {}).items() if d < s.n_layers}
        bd = max(truncated, key=lambda d: (truncated[d], -d)) if truncated else None
        best = f"{percent_with_interval(truncated[bd], n)} at {bd}" if bd is not None else "–"
        where = f"{len(s.problems)}, {levels_text(p.level for p in s.problems)} | " if differ else ""
        at_most, at_least = ("≤ ", "≥ ") if _bound(s, "stitch", cs) else ("", "")  # the sweep went no lower
        stitched = _with_span(cs, None if _few(s) or at_most else critical_span(s, collapse_fraction), _few(s))
        rows.append(f"| {s.model} | {where}{s.n_layers} | {percent_with_interval(full, n) if full is not None else '–'} | "
                    f"{at_most if cs is not None else ''}{stitched} | "
                    f"{f'{at_least}{s.n_layers - cs}' if cs is not None else '–'} | "
                    f"{('≤ ' if _bound(s, 'naive', cn) else '') + str(cn) if cn is not None else '–'} | {best} | "
                    f"{lens_cuts(s)} |")
    return "\n".join(rows)


def _with_span(critical: int | None, span: tuple[int, int] | None, few: bool = False) -> str:
    """'23 [22–24]': a critical depth with its bootstrap interval; '–' where there is none; no interval where the
    full model solves too few problems to read a cut by (`few`: most resamples would hold none it solves)."""
    if critical is None:
        return "–"
    if few:
        return f"{critical} (too few solved to resample)"
    return f"{critical} [{span[0]}–{span[1]}]" if span is not None else str(critical)


def _few(s: Sweep) -> bool:
    """Whether the full model solves fewer than `FEW_SOLVED` of the sweep's problems."""
    full = s.accuracy.get("stitch", {}).get(s.n_layers)
    return full is not None and round(full * len(s.full)) < FEW_SOLVED


def lens_cuts(s: Sweep) -> str:
    """A model's lens cut points (chapter 02's rules on this chapter's problems, as blocks kept), each with the
    stitched greedy accuracy there where the sweep decoded it, else said to lie outside the sweep."""
    if not s.cuts:
        return "none"
    n, acc = len(s.full), s.accuracy.get("stitch", {})
    low = min(acc, default=s.n_layers)
    return ", ".join(f"{c}: {percent_with_interval(acc[c], n)}" if c in acc else
                     f"{c}: below the sweep" if c < low else f"{c}: not swept" for c in sorted(s.cuts))


def models_sentence(sweeps: dict[str, Sweep], collapse_fraction: float) -> str:
    """How many blocks each model can lose with stitch-and-preserve before it falls below the collapse line; a model
    on problems of its own (`problem_sets`) says on which."""
    parts, mine = [], _own(sweeps)
    for s in sweeps.values():
        own = f" on its own problems, {levels_text(p.level for p in s.problems)}" if mine[s.model] else ""
        cs = critical_depth(s.accuracy["stitch"], s.accuracy["stitch"][s.n_layers], collapse_fraction)
        if cs is None:
            parts.append(f"{s.model} solves none of {'its' if own else 'the'} problems at full depth{own}, so it has "
                         "no critical depth")
        elif cs == s.n_layers:
            parts.append(f"{s.model} cannot lose a single block of its {s.n_layers}{own} ({_solved(s)})")
        elif _few(s):  # a critical depth on one or two solved problems is a coin's toss, not a finding
            parts.append(f"{s.model} gives no critical depth worth reading{own} ({_solved(s)}; the rule returns {cs})")
        else:
            bound = _bound(s, "stitch", cs)
            parts.append(f"{s.model} can lose {'at least ' if bound else ''}{s.n_layers - cs} of its {s.n_layers} "
                         f"blocks{own} ({100 * (s.n_layers - cs) / s.n_layers:.0f}% of its depth; critical depth {cs}"
                         + (" or shallower: the sweep went no lower)" if bound else ")"))
    return ("Keeping at least " + f"{100 * collapse_fraction:.0f}% of its own full-depth accuracy, " + "; ".join(parts) + ".")


FEW_SOLVED = 5  # fewer problems solved at full depth than this: a critical depth read from them says little


def _solved(s: Sweep) -> str:
    """How many problems the model solves at full depth, which is what its critical depth rests on."""
    n = len(s.full)
    k = round(s.accuracy["stitch"][s.n_layers] * n)
    return f"it solves {k} of {n} problems at full depth" + (", too few to read a cut by" if k < FEW_SOLVED else "")


def models_values(sweeps: dict[str, Sweep], collapse_fraction: float) -> dict:
    """The two-model comparison of the chapter: critical depth per model, a table and a sentence."""
    critical = {name: critical_depth(s.accuracy["stitch"], s.accuracy["stitch"][s.n_layers], collapse_fraction)
                for name, s in sweeps.items() if "stitch" in s.accuracy}
    return {"critical_by_model": critical, "models_table": models_table(sweeps, collapse_fraction),
            "models_sentence": models_sentence(sweeps, collapse_fraction)}


def methods_values(sweeps: Sequence[Sweep]) -> dict:
    """Does re-attaching the last block beat dropping it? A table per model and depth (a model column where there are
    several) and a sentence per model that claims a difference only where the paired interval and the paired test
    agree."""
    many = len(sweeps) > 1
    rows = [("| model " if many else "") + "| depth | stitch | naive | stitch − naive [95% interval] | paired test p | "
            "larger than its noise? |", "|---" * (6 + many) + "|"]
    sentences = []
    for s in sweeps:
        diffs = method_differences(s)
        if not diffs:
            continue
        n = len(s.full)
        for d, diff in diffs.items():
            word = "yes" if diff.clear else "borderline" if diff.borderline else "no"
            rows.append((f"| {s.model} " if many else "") +
                        f"| {d}/{s.n_layers} | {percent_with_interval(s.accuracy['stitch'][d], n)} | "
                        f"{percent_with_interval(s.accuracy['naive'][d], n)} | {diff.points(0, unit='')} | "
                        f"{diff.p_value:.2g} | {word} |")
        better = [d for d, x in diffs.items() if x.clear and x.mean > 0]
        worse = [d for d, x in diffs.items() if x.clear and x.mean < 0]

        def which(depths: list[int]) -> str:
            return f" ({', '.join(map(str, depths))})" if depths else ""

        if better or worse:
            sentences.append(f"On {s.model}'s {n} problems, stitch-and-preserve is clearly more accurate than naive "
                             f"truncation at {len(better)} of the {len(diffs)} truncated depths{which(better)}, clearly "
                             f"less accurate at {len(worse)}{which(worse)}, and indistinguishable from it at the rest.")
        else:  # "more accurate at 0 of the 3 depths, less accurate at 0" says nothing a reader can use
            sentences.append(f"On {s.model}'s {n} problems, no truncated depth of the {len(diffs)} separates "
                             "stitch-and-preserve from naive truncation by more than the noise of these problems.")
    if not sentences:
        return {"methods_table": "Only one truncation method was run.", "methods_sentence": ""}
    return {"methods_table": "\n".join(rows), "methods_sentence": " ".join(sentences)}


def naive_report_sentence(sweeps: Sequence[Sweep]) -> str:
    """The report's claim that naive truncation "produced incoherent outputs", put to accuracy: at how many of the
    depths where both cuts ran (every model's) each is the more accurate by more than the noise, how often naive
    truncation's accuracy is the higher at all, and what that means for the later chapters, which search the
    stitched model as the report does."""
    pairs = [(s.model, d, x, s.accuracy["naive"][d] - s.accuracy["stitch"][d])
             for s in sweeps for d, x in method_differences(s).items()]
    if not pairs:
        return ("Naive truncation ran beside stitch-and-preserve at no truncated depth of this build, so the claim "
                "is not put to accuracy here.")
    naive_up = [f"{m} at {d}" for m, d, x, _ in pairs if x.clear and x.mean < 0]
    stitch_up = [f"{m} at {d}" for m, d, x, _ in pairs if x.clear and x.mean > 0]
    higher = sum(gap > 0 for *_, gap in pairs)
    where = f"of the {counted(len(pairs), 'depth')} where both cuts ran, over every model"
    if naive_up and not stitch_up:
        said = (f"In accuracy the claim does not hold here: naive truncation scores above stitch-and-preserve by more "
                f"than the noise at {listed(naive_up)}, and below it at none {where}")
    elif stitch_up and not naive_up:
        said = (f"In accuracy the claim holds here: stitch-and-preserve scores above naive truncation by more than "
                f"the noise at {listed(stitch_up)}, and below it at none {where}")
    elif stitch_up:
        said = (f"In accuracy the claim holds on some models and depths and fails on others {where}: "
                f"stitch-and-preserve scores above naive truncation by more than the noise at {listed(stitch_up)}, "
                f"below it at {listed(naive_up)}")
    else:
        said = f"In accuracy the two cuts are not told apart by more than the noise at any {where}"
    said += f" (naive truncation's accuracy is the higher at {higher} of the {len(pairs)})."
    return said + (" Chapters 04 and 05 search the stitched model, as the report does, so where naive truncation "
                   "scores higher the search starts from the weaker of the two cuts." if naive_up else "")


def lens_report_sentence(sweeps: Sequence[Sweep], collapse_fraction: float) -> str:
    """The report chose its cut from the logit lens: where each model's lens cut points (`Sweep.cuts`, blocks kept)
    fall against the critical depth this chapter reads from accuracy. A model whose critical depth is a bound, or
    rests on too few solved problems, says nothing about it and is left out; empty where no model is left."""
    parts, below = [], []
    for s in sweeps:
        if not s.cuts or not s.accuracy.get("stitch", {}).get(s.n_layers) or _few(s):
            continue
        cs = critical_depth(s.accuracy["stitch"], s.accuracy["stitch"][s.n_layers], collapse_fraction)
        if cs is None or _bound(s, "stitch", cs):
            continue
        cuts = sorted(set(s.cuts))
        parts.append(f"{s.model} at {listed(cuts)} of {s.n_layers} blocks (critical depth {cs})")
        below.append(all(c < cs for c in cuts))
    if not parts:
        return ""
    share = f"{100 * collapse_fraction:.0f}%"
    said = ("The report chose where to cut from the logit lens. On these problems the lens's cut points (chapter 02's "
            "rules, as blocks kept) would cut " + "; ".join(parts))
    if all(below):
        return (said + f": each lies below its model's critical depth, the shallowest cut from which greedy decoding "
                f"keeps {share} of the full model's accuracy, so here the lens would remove too many blocks, and chapters 04 "
                "and 05 search at the critical depth read from accuracy instead.")
    if not any(below):
        return said + f": none lies below its model's critical depth, so here the lens's cut keeps {share} of the full model's accuracy."
    return said + ": on some models the lens would cut below the critical depth, on others not."


COMPARISON_MARKDOWN = ("methods_table", "methods_sentence", "report_sentence", "summary_sentence",
                       "naive_report_sentence", "lens_report_sentence")


def comparison_values(s: Sweep, collapse_fraction: float, sweeps: Sequence[Sweep] = ()) -> dict:
    """Every model's two cuts compared (`methods_values` of `sweeps`, the first model `s` alone where empty), the
    first model's removable share set beside the report's, and the chapter's summary: the values glued after the
    methods' table (`COMPARISON_MARKDOWN` are Markdown)."""
    return {**methods_values(list(sweeps) or [s]), "report_sentence": report_sentence(s, collapse_fraction),
            "summary_sentence": summary_sentence(s, collapse_fraction),
            "naive_report_sentence": naive_report_sentence(list(sweeps) or [s]),
            "lens_report_sentence": lens_report_sentence(list(sweeps) or [s], collapse_fraction)}


def summary_sentence(s: Sweep, collapse_fraction: float) -> str:
    """The chapter's result for its first model in a few words of its own, not the sections' sentences again: how far
    stitch-and-preserve can cut it while greedy keeps its share, with the critical depth's interval, and whether naive
    truncation was told apart from it."""
    if "stitch" not in s.accuracy or not s.accuracy["stitch"].get(s.n_layers):
        return f"{s.model} solves none of these problems at full depth, so this chapter names no depth to cut it to."
    cs = critical_depth(s.accuracy["stitch"], s.accuracy["stitch"][s.n_layers], collapse_fraction)
    if cs is None:
        return f"{s.model} keeps no depth at its share of full-depth accuracy, so this chapter names no cut."
    removed, bound = s.n_layers - cs, _bound(s, "stitch", cs)
    text = (f"On {s.model}, stitch-and-preserve keeps at least {100 * collapse_fraction:.0f}% of full-depth greedy "
            f"accuracy down to {cs} of {s.n_layers} blocks"
            + (", the shallowest the sweep ran" if bound else "")
            + (f", {counted(removed, 'block')} removed" if removed else ": not one block can go"))
    found = critical_interval({d: [r["correct"] for r in records] for d, records in s.outputs.get("stitch", {}).items()},
                              collapse_fraction) if s.outputs.get("stitch") else None
    if found is not None and found[0] != found[1] and not bound:
        text += f", with a 95% interval of {found[0]} to {found[1]} blocks"
    text += "."
    diffs = method_differences(s)
    if diffs:
        above = [d for d, x in diffs.items() if x.clear and x.mean < 0]  # stitch − naive: naive the more accurate
        below = [d for d, x in diffs.items() if x.clear and x.mean > 0]
        said = [f"above it at {listed(above)} blocks"] if above else []
        said += [f"below it at {listed(below)} blocks"] if below else []
        text += (" Naive truncation scores " + " and ".join(said) + ", by more than the noise" + (
                 f", and is not told apart from it at the other {len(diffs) - len(above) - len(below)}"
                 if len(above) + len(below) < len(diffs) else "") + "." if said
                 else f" Naive truncation is not told apart from it at any of the {len(diffs)} depths where both ran.")
    return text


REPORT_REMOVABLE = (2 / 28, 3 / 28)  # with power sampling, the report's models recover at 25-26 of 28 layers


def report_sentence(s: Sweep, collapse_fraction: float) -> str:
    """The first model's removable share of depth set against the report's two to three of 28 layers."""
    full = s.accuracy["stitch"][s.n_layers]
    cs = critical_depth(s.accuracy["stitch"], full, collapse_fraction)
    if cs is None:
        return f"{s.model} solves none of the problems at full depth, so it cannot be compared with the report."
    share, bound = (s.n_layers - cs) / s.n_layers, _bound(s, "stitch", cs)
    lo, hi = REPORT_REMOVABLE
    if cs == s.n_layers:
        return (f"{s.model} cannot lose a single block of its {s.n_layers} ({_solved(s)}), where the report's models "
                f"lose {100 * lo:.0f}–{100 * hi:.0f}% of their depth and keep their accuracy.")
    relation = ("a smaller share of its depth than" if share < lo - 1e-9 else "a larger share of its depth than"
                if share > hi + 1e-9 else "about the same share of its depth as")
    kept = s.accuracy["stitch"][cs] / full if full else 0.0
    return (f"By this book's criterion (greedy decoding keeps at least {100 * collapse_fraction:.0f}% of the full "
            f"model's accuracy at every deeper cut), {s.model} can lose {'at least ' if bound else ''}"
            f"{s.n_layers - cs} of {s.n_layers} blocks ({100 * share:.0f}% of its depth"
            + (", the most the sweep removed" if bound else "")
            + f"), {relation} the report's models lose before their power-sampled accuracy recovers ({100 * lo:.0f}–{100 * hi:.0f}%); at its critical depth it keeps {100 * kept:.0f}% "
            "of its full-depth accuracy on these problems. The two are different criteria (greedy decoding against a "
            "threshold here, search-aided recovery there), so only their order of magnitude compares.")


CAP_CANDIDATES = (128, 160, 192, 256, 320, 384, 448, 512, 640, 768, 896, 1024)  # the caps a length study weighs


def lengths_values(studies: dict[str, AnswerLengths], sweep_cap: int, length_cap: int | None = None) -> dict:
    """The length study's table (a row per model, depth and method: how long the answers are, how many end within
    the sweep's cap and within the study's, how many of the unfinished loop), the cap each model's greedy answers at
    its critical depth need (`choose_cap`), and a sentence that says what the sweep's cap did to them; `length_cap`
    (the study's cap, glued as the page states it; 0 where none ran)."""
    if not studies:
        return {"lengths_table": "This build ran no length study (length_cap is not set).",
                "lengths_sentence": ("**This build ran no length study**: its profile sets no `length_cap` (the "
                                     "`full` profile runs one). The section above says what the study does; "
                                     "the figure and table here are empty."),
                "lengths_cap": float("nan"), "length_cap": length_cap or 0}
    cap = next(iter(studies.values())).cap
    caps = sorted({sweep_cap, cap} | {c for c in CAP_CANDIDATES if c < cap})
    rows = [f"| model | blocks | decoding | answers | median new tokens | unfinished at {sweep_cap} | unfinished at "
            f"{cap} (of them looping) | a stop at the first boxed answer: answers changed, tokens saved |",
            "|---|---|---|---|---|---|---|---|"]
    needs, clauses = {}, []
    for name, a in studies.items():
        summaries = {}
        for (method, depth), records in sorted(a.records.items(), key=lambda kv: (-kv[0][1], kv[0][0])):
            flat = [r for per in records for r in per]
            summary = summaries[(method, depth)] = summarize(flat, caps)
            box = a.box.get((method, depth))
            stop = (f"{box.changed} of {box.n}, {100 * box.saved / box.tokens:.0f}%" if box and box.tokens else "–")
            rows.append(f"| {name} | {depth} of {a.n_layers} | {'greedy' if method == 'greedy' else 'T = 1'} | "
                        f"{summary.n} | {summary.median:.0f} | {100 * summary.shares[sweep_cap].unfinished:.0f}% | "
                        f"{100 * summary.shares[cap].unfinished:.0f}% ({summary.looping}) | {stop} |")
        greedy = [r for per in a.records[("greedy", a.critical)] for r in per]
        needs[name] = choose_cap(greedy, [c for c in caps if c <= cap])
        at_sweep, at_cap = (summaries[("greedy", a.critical)].shares[c] for c in (sweep_cap, cap))
        clauses.append(f"{name} at {a.critical} of {a.n_layers} blocks leaves {100 * at_sweep.unfinished:.0f}% of its "
                       f"greedy answers unfinished at {sweep_cap} new tokens and {100 * at_cap.unfinished:.0f}% at "
                       f"{cap}, and needs a cap of {needs[name]}")
    counts = {len(a.records[("greedy", a.critical)]) for a in studies.values()}
    n = counts.pop() if len(counts) == 1 else None
    on = f"On this chapter's {counted(n, 'problem')}, at" if n else "At"
    sentence = (f"{on} its critical depth, " + "; ".join(clauses) + ". A cap is counted as enough where at least 95% of "
                "the answers end within it, or, where fewer ever end within the study's longest decode, within a "
                "point of all that do (an answer that loops is not waited for).")
    one = f"{100 / n:.2g}" if n else ""
    sentence += (f" On {n} problems one answer is {one} point{'' if one == '1' else 's'} of a share, and these shares are this chapter's "
                 "problems' only: chapter 04 counts how the answers end on its own problems (its outcomes table, "
                 "which the front page quotes), and where those are other or harder problems, the shares there can "
                 "differ." if n else "")
    legend = (f"An unfinished answer is counted as looping when at least {100 * LOOP_SHARE:.0f}% of the 8-token sequences "
              "in its last 256 tokens occurred earlier in it; the rest were not repeating themselves in that window when "
              "the cap came. The last column asks whether stopping each answer at its first closed `\\boxed{}` would change "
              "its graded answer, and how many of its tokens it would save.")
    return {"lengths_table": "\n".join([*rows, "", legend]), "lengths_sentence": sentence,
            "lengths_cap": max(needs.values()), "length_cap": cap}
