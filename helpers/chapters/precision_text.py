"""The appendix's prose: the sentences, tables and glued values the page prints from a `precision.DtypeComparison`
(the numbers are computed in `helpers.chapters.precision`, which knows nothing of these words).
"""

from __future__ import annotations

from statistics import median

from helpers.chapters.common_text import critical_depth_text
from helpers.chapters.exercises import rerun_command
from helpers.chapters.precision import DtypeComparison, bfloat16_spacing
from helpers.core.contention import SHARED
from helpers.core.numbers import counted
from helpers.evaluation.stats import percent_with_interval
from helpers.models.precision import FORMATS

MARKDOWN = ("dtype_sentence", "dtype_speed_sentence", "dtype_speed_summary", "dtype_summary")  # the values glued as Markdown


def comparison_values(c: DtypeComparison) -> dict:
    """The numbers and sentences the appendix glues."""
    n = c.n_problems
    diff = c.difference()
    differing = c.divergences()
    same_answer = c.same_correctness()
    gap, gap_at, kl_there = c.lens_gap()
    crit = c.critical()
    acc = c.accuracy()
    verdict = diff.standing()
    same_crit = crit["float32"] == crit["bfloat16"]
    sentence = scope_sentence(c) + (
        f"On {counted(n, 'problem')}, greedy {c.model} solves {percent_with_interval(acc['float32'], n)} in float32 and "
        f"{percent_with_interval(acc['bfloat16'], n)} in bfloat16: a paired difference of {diff.describe()}, "
        f"{verdict}. " + (f"The two greedy decodes are identical token for token on {n - len(differing)} of "
                          f"{counted(n, 'problem')}; where they differ, the first differing token is at position "
                          f"{int(median(differing))}" + (" (median)" if len(differing) > 1 else "") + ". " if differing
                          else
                          f"The two greedy decodes are identical token for token on "
                          f"{'the one problem' if n == 1 else f'all {n} problems'}. ")
        + f"The logit lens's KL per layer moves by at most "
        f"{gap:.3f} nats (at block input {gap_at}, where float32 reads {kl_there:.3f}), "
        f"and on the sweep's {counted(c.n_sweep, 'problem')} the critical stitched depth is "
        f"{critical_depth_text(crit['float32'])} in float32 and {critical_depth_text(crit['bfloat16'])} "
        f"in bfloat16{' (the same)' if same_crit else ''}.{_critical_clause(c, crit)} " + _chapter03_clause(c, crit))
    return {
        "dtype_model": c.model, "dtype_n_problems": n, "dtype_planned_problems": c.planned[0],
        "dtype_acc_float32": 100 * acc["float32"], "dtype_acc_bfloat16": 100 * acc["bfloat16"],
        "dtype_diff_points": 100 * diff.mean, "dtype_diff_low": 100 * diff.low, "dtype_diff_high": 100 * diff.high,
        "dtype_diff_p": diff.p_value, "dtype_identical": n - len(differing),
        "dtype_identical_share": 100 * (n - len(differing)) / n, "dtype_same_correctness": same_answer,
        "dtype_problems_phrase": counted(n, "problem"), "dtype_same_correctness_phrase": counted(same_answer, "problem"),
        "dtype_kl_max_gap": gap, "dtype_kl_max_gap_layer": gap_at,
        "dtype_critical_float32": critical_depth_text(crit["float32"]),
        "dtype_critical_bfloat16": critical_depth_text(crit["bfloat16"]),
        "dtype_sentence": sentence, "dtype_summary": summary_sentence(c), **speed_values(c),
    }


def summary_sentence(c: DtypeComparison) -> str:
    """The appendix's answer in a sentence of its own (the result paragraph gives the numbers): whether greedy
    accuracy, the decodes and the critical depth moved with the format."""
    diff, crit, n = c.difference(), c.critical(), c.n_problems
    differing = len(c.divergences())
    depth = ("the same critical depth in both" if crit["float32"] == crit["bfloat16"] else
             f"critical depths of {critical_depth_text(crit['float32'])} and {critical_depth_text(crit['bfloat16'])}")
    return (f"On {counted(n, 'problem')} of {c.model}, computing in bfloat16 rather than float32 moved greedy accuracy "
            f"by {diff.points(1)} ({diff.standing()}), changed the decode of {differing} of them, and gave {depth}: "
            + ("on these problems neither greedy accuracy nor the critical depth moves with the format beyond its "
               "noise." if not diff.clear and crit["float32"] == crit["bfloat16"] else
               "the format moves a number here, as the result above details."))


def _shared(speed) -> str:
    """A sentence where other processes used much of the machine while the formats were timed (`SpeedTable.others`):
    the rates are then that moment's, not the machine's; '' where they did not, or it is unknown."""
    if speed.others is None or speed.others < SHARED:
        return ""
    return (f" Other processes used {100 * speed.others:.0f}% of the machine's cores while these timings ran, so "
            "they are that moment's rates, not this machine's: the performance page measures both formats at rest.")


def _ratio_clause(speed, decode: float | None) -> str:
    """The summary's clause on bfloat16's decode rate over float32's, said to be that moment's where other work
    shared the machine; '' where the decode was too fast to time."""
    if decode is None:
        return ""
    if _shared(speed):
        return (f"While other processes used {100 * speed.others:.0f}% of this build's machine, bfloat16 decoded at "
                f"{decode:.2f} times float32's rate (that moment's rate, not the machine's); ")
    return f"On this build's machine bfloat16 decoded at {decode:.2f} times float32's rate; "


def speed_values(c: DtypeComparison) -> dict:
    """Each format's measured rates on this build's machine, what `dtype: auto` takes, and the sentence saying so."""
    auto = f"`dtype: auto` takes {c.auto} for {c.model} on this machine: {c.auto_reason}."
    if c.speed is None:
        return {"dtype_auto": c.auto, "dtype_speed_summary": f"`auto` takes {c.auto} here.",
                "dtype_speed_sentence": f"This build did not time the two formats (`speed_rows` is None). {auto}"}
    (rows, speeds), = c.speed.by_rows.items()
    f32, bf16 = speeds["float32"], speeds["bfloat16"]
    decode, prompt = c.speed.ratio(rows, "decode"), c.speed.ratio(rows, "prompt")

    def rate(value: float | None) -> str:
        return "too fast to time" if value is None else f"{value:.0f} tokens/s"

    if decode is not None and decode > 1 and c.auto == "float32":  # faster here, yet not taken: say why, not a riddle
        auto = (f"`dtype: auto` takes float32 for {c.model} on this machine all the same: {c.auto_reason}. `auto` "
                f"reads only what `python -m helpers bench dtype --model {c.model}` recorded on this machine (the prompt "
                "pass and the whole decode at up to 128 rows), not this chapter's short timing.")

    plural = "s" if rows != 1 else ""
    why_rows = ("" if c.speed_asked is None or rows >= c.speed_asked else
                f" (not the {c.speed_asked} that `speed_rows` asks for: the timing reads at most the {rows} "
                f"problem{plural} that the profile's cap leaves the comparison)")
    sentence = (f"Timed on this build's machine, the book's engine read {rows} prompt{plural}{why_rows} at "
                f"{f32.prompt_tokens_per_s:.0f} prompt tokens/s in float32 and {bf16.prompt_tokens_per_s:.0f} in "
                f"bfloat16 (bfloat16 at {prompt:.2f} times float32's rate), then decoded "
                f"{c.speed.max_new_tokens} tokens per row at {rate(f32.decode_tokens_per_s)} in float32 and "
                f"{rate(bf16.decode_tokens_per_s)} in bfloat16"
                + (f" ({decode:.2f} times float32's rate)" if decode is not None else "")
                + f": a decode that ran, never stored records read back.{_shared(c.speed)} {auto}")
    return {"dtype_speed_rows": rows, "dtype_prompt_float32": f32.prompt_tokens_per_s,
            "dtype_prompt_bfloat16": bf16.prompt_tokens_per_s, "dtype_prompt_ratio": prompt,
            "dtype_decode_float32": f32.decode_tokens_per_s, "dtype_decode_bfloat16": bf16.decode_tokens_per_s,
            "dtype_decode_ratio": decode, "dtype_auto": c.auto, "dtype_speed_sentence": sentence,
            "dtype_speed_summary": _ratio_clause(c.speed, decode) + f"`auto` takes {c.auto} here, for the reason "
                                                                    "given under *How to read this*."}


EXERCISE_SHARES = {"stricter": 0.8, "looser": 0.25}  # the critical-depth rule's share in exercise "another rule in
# both formats": a stricter one where the critical depth lies below the full model, else a looser one, so that the
# answer can move


def exercise_rule(c: DtypeComparison) -> str:
    """'stricter' or 'looser': the rule the exercise asks about, the one under which the critical depths can move
    (a critical depth at the full model cannot rise, one at the sweep's shallowest depth cannot fall)."""
    crit = [d for d in c.critical().values() if d is not None]
    return "looser" if crit and min(crit) == c.n_layers else "stricter"


EXERCISE_LOGIT = 20.0  # a typical top logit, in exercise "how close is a tie?"


def scope_sentence(c: DtypeComparison) -> str:
    """What share of the planned comparison ran, where a cap cut it (empty where every problem ran natively)."""
    (asked, asked_sweep), n = c.planned, c.n_problems
    if c.native:
        if (n, c.n_sweep) == (asked, asked_sweep):
            return ""
        return (f"Both formats ran on {n} of the {asked} planned problems and the sweep on {c.n_sweep} of "
                f"{asked_sweep} (`native_problems`), the same problems a machine that only emulates bfloat16 runs, "
                "so that this build reads the same released records on every machine; the intervals are wider for "
                "it. ")
    if (n, c.n_sweep) == (asked, asked_sweep):
        return ("This machine only emulates bfloat16 (no AVX512-BF16 or AMX), at several times float32's cost; the "
                "comparison below is nonetheless the whole one planned. ")
    return (f"This machine only emulates bfloat16 (no AVX512-BF16 or AMX), at several times float32's cost, so both "
            f"formats ran on {n} of the {asked} planned problems and the sweep on {c.n_sweep} of {asked_sweep} "
            f"(`emulated_problems`); the intervals are wider for it, and a build where bfloat16 is native runs them "
            f"all. ")


def exercise_values(c: DtypeComparison, profile: str) -> dict:
    """What the exercises' solutions quote: bfloat16's spacing and what it means for a logit of 20, and the
    critical depths under another share, one that can move them (`exercise_rule`; read from the sweep, as a re-run
    with that parameter would)."""
    eps, bits, spacing = bfloat16_spacing(EXERCISE_LOGIT)
    rule = exercise_rule(c)
    share = EXERCISE_SHARES[rule]
    strict = c.critical(share)
    return {"rerun_command": rerun_command(profile, "06_precision", collapse_fraction=share),
            "ex_eps": eps, "ex_bits": bits, "ex_logit": EXERCISE_LOGIT,
            "ex_logit_spacing": float(spacing), "ex_logit_error": float(spacing) / 2, "ex_rule": rule,
            "ex_collapse": share, "ex_critical_float32": critical_depth_text(strict["float32"]),
            "ex_critical_bfloat16": critical_depth_text(strict["bfloat16"])}


def _chapter03_clause(c: DtypeComparison, crit: dict[str, int | None]) -> str:
    """This sweep's float32 critical depth beside chapter 03's for the same model, where chapter 03 stored one: equal,
    or apart, and why two sweeps of other problems can part."""
    why = "one problem can move a depth across the rule's line"
    if c.chapter03 is None:
        return (f"Chapter 03 finds its critical depth on a sweep of its own problems, so the two need not agree: {why}.")
    depth, n = c.chapter03
    if depth == crit["float32"]:
        return f"Chapter 03 reads the same critical depth, {critical_depth_text(depth)}, on its own {n} problems."
    return (f"Chapter 03 reads {critical_depth_text(depth)} for {c.model} on its own {n} problems, this sweep "
            f"{critical_depth_text(crit['float32'])} on {c.n_sweep}: the two disagree because {why}, and a depth named "
            "by the critical depth is that fragile.")


def _critical_clause(c: DtypeComparison, crit: dict[str, int | None]) -> str:
    """Where the two critical depths differ, the counts behind them: how far each format is from the rule's line."""
    if crit["float32"] == crit["bfloat16"] or None in crit.values():
        return ""
    depth = min(crit.values())
    solved, full = c.solved_at(depth), c.solved_at(c.n_layers)
    return (f" At {depth} blocks the stitched model solves {solved['float32']} of {c.n_sweep} problems in float32 and "
            f"{solved['bfloat16']} in bfloat16, against {full['float32']} and {full['bfloat16']} at full depth; the "
            f"critical depth asks for at least {c.collapse_fraction:.0%} of the full model's accuracy, a line that one "
            f"problem of {c.n_sweep} can cross; here the formats differ by "
            f"{abs(solved['float32'] - solved['bfloat16'])} problem(s) at that depth.")


def sweep_table(c: DtypeComparison) -> str:
    """Stitched greedy accuracy per depth in each dtype, with 95% intervals (Markdown)."""
    rows = ["| blocks | " + " | ".join(FORMATS) + " |", "|---" * (len(FORMATS) + 1) + "|"]
    for d in sorted(c.sweep[FORMATS[0]]):
        rows.append(f"| {d}{' (full)' if d == c.n_layers else ''} | "
                    + " | ".join(percent_with_interval(c.sweep[t][d], c.n_sweep) for t in FORMATS) + " |")
    return "\n".join(rows)
