"""Appendix: what running the model in bfloat16 instead of float32 changes, measured side by side.

Both dtypes see the same problems and the same settings: greedy accuracy (paired, problem by problem), how often
the two greedy decodes agree token for token, the logit lens's KL per layer over the same token sequences (the
float32 model's own solutions), and chapter 03's critical depth from a stitched sweep in each dtype. Every
decode and lens curve goes through the results store under its dtype, so the float32 half is shared with the
chapters wherever their settings coincide.

Where the hardware only emulates bfloat16 (a CPU without AVX512-BF16 or AMX: 3-8x float32's cost), both halves
run on the first `emulated_problems` problems taking levels in turn (`helpers.data.problems.interleaved`), so the
comparison stays paired and the appendix says how much of the planned comparison it shows.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from helpers.chapters.exercises import rerun_command
from helpers.core.checks import is_count
from helpers.core.numbers import counted
from helpers.data.problems import Problem, build_prompt, interleaved
from helpers.data.sequences import solution_sequence
from helpers.evaluation.decodes import DecodeSettings, accuracy, sample_at_depths, solve
from helpers.evaluation.stats import PairedDifference, paired_difference, percent_with_interval
from helpers.interp.studies import lens_over_problems
from helpers.models.loading import default_device, load_model
from helpers.models.precision import native_bfloat16
from helpers.models.truncation import critical_depth, critical_depth_text

DTYPES = ("float32", "bfloat16")


@dataclass
class DtypeComparison:
    """One model in float32 and in bfloat16 (keys of every dict are DTYPES)."""

    model: str
    n_layers: int
    correct: dict[str, list[bool]]  # greedy, per problem
    tokens: dict[str, list[list[int]]]  # greedy tokens, per problem
    kl: dict[str, np.ndarray]  # [lens problems, layers]: KL(layer || final) over the float32 solutions
    sweep: dict[str, dict[int, float]]  # stitched greedy accuracy per depth (full depth included)
    n_sweep: int  # problems of the sweep
    collapse_fraction: float
    seconds: dict[str, float]  # wall time of each dtype's part, stored records reused included
    native: bool = True  # bfloat16 computed in hardware; False: emulated, and the problems below were cut
    planned: tuple[int, int] = (0, 0)  # the problems asked for (accuracy, sweep) before any cut

    @property
    def n_problems(self) -> int:
        return len(self.correct[DTYPES[0]])

    def difference(self) -> PairedDifference:
        """bfloat16 minus float32 greedy accuracy, paired over the problems."""
        return paired_difference([float(c) for c in self.correct["bfloat16"]],
                                 [float(c) for c in self.correct["float32"]])

    def critical(self) -> dict[str, int | None]:
        return {d: critical_depth(self.sweep[d], self.sweep[d][self.n_layers], self.collapse_fraction)
                for d in DTYPES}


def first_divergence(a: Sequence[int], b: Sequence[int]) -> int | None:
    """Index of the first token where two decodes differ (the shorter one's length if one is a prefix of the
    other); None when they are identical."""
    for i, (x, y) in enumerate(zip(a, b, strict=False)):
        if x != y:
            return i
    return None if len(a) == len(b) else min(len(a), len(b))


def compare_dtypes(name: str, problems: Sequence[Problem], sweep_problems: Sequence[Problem], *, max_new_tokens: int,
                   shots: int, batch_size: int, n_lens: int, span: int, collapse_fraction: float = 0.5,
                   emulated_problems: int | None = None, native: bool | None = None,
                   native_problems: int | None = None) -> DtypeComparison:
    """Run `name` in each dtype: greedy on `problems`, the lens on the first `n_lens` float32 solutions, and the
    stitched sweep of the last `span` depths on `sweep_problems`.

    Where bfloat16 is emulated (`native` False; by default, asked of the device the model loads on), at most
    `emulated_problems` of each problem set run, in both dtypes (None: all of them); where it is native, at most
    `native_problems` (a released build sets both alike, so that every machine reads the same records)."""
    if not problems or not sweep_problems:
        raise ValueError("compare_dtypes needs at least one problem for the accuracy and one for the sweep")
    for label, cap in (("emulated_problems", emulated_problems), ("native_problems", native_problems)):
        if cap is not None and not is_count(cap, 1):
            raise ValueError(f"{label} must be a whole number of at least 1 (or None: every problem), got {cap!r}")
    planned = (len(problems), len(sweep_problems))
    native = native_bfloat16(default_device()) if native is None else native
    cap = native_problems if native else emulated_problems
    if cap is not None:
        problems = interleaved(problems, cap)
        sweep_problems = interleaved(sweep_problems, cap)
        n_lens = min(n_lens, len(problems))
    if not 1 <= n_lens <= len(problems):
        raise ValueError(f"n_lens must lie in 1..{len(problems)} (the problems whose solutions the lens reads), "
                         f"got {n_lens}")
    correct, tokens, kl, sweep, seconds = {}, {}, {}, {}, {}
    items = None
    n_layers = 0
    for dtype in DTYPES:
        start = time.perf_counter()
        model, tokenizer, info = load_model(name, dtype=dtype)
        n_layers = info.n_layers
        records = solve(model, tokenizer, problems, max_new_tokens=max_new_tokens, shots=shots, batch_size=batch_size)
        correct[dtype] = [bool(r["correct"]) for r in records]
        tokens[dtype] = [list(r["tokens"]) for r in records]
        if items is None:  # the lens reads the same sequences in both dtypes: the float32 model's solutions
            items = [(p.id, *solution_sequence(tokenizer, build_prompt(tokenizer, p.question, shots=shots),
                                               solution_tokens=r["tokens"]))
                     for p, r in list(zip(problems, records, strict=True))[:n_lens]]
        kl[dtype] = lens_over_problems(model, items)["kl"]
        swept = sample_at_depths(model, tokenizer, sweep_problems, {"greedy": DecodeSettings("greedy", max_new_tokens,
                                                                                              shots)},
                                 [("stitch", d) for d in range(max(n_layers - span, 2), n_layers + 1)], n_seeds=1,
                                 batch_size=batch_size)  # every depth in one engine run, as chapter 03's sweep
        sweep[dtype] = {depth: accuracy([samples[0] for samples in by_name["greedy"]])
                        for (_, depth), by_name in swept.items()}
        seconds[dtype] = time.perf_counter() - start
        del model
    return DtypeComparison(name, n_layers, correct, tokens, kl, sweep, len(sweep_problems), collapse_fraction,
                           seconds, native, planned)


def comparison_values(c: DtypeComparison) -> dict:
    """The numbers and sentences the appendix glues."""
    n = c.n_problems
    diff = c.difference()
    splits = [first_divergence(a, b) for a, b in zip(c.tokens["float32"], c.tokens["bfloat16"], strict=True)]
    differing = [s for s in splits if s is not None]
    same_answer = sum(a == b for a, b in zip(c.correct["float32"], c.correct["bfloat16"], strict=True))
    kl32, kl16 = c.kl["float32"].mean(0), c.kl["bfloat16"].mean(0)
    gap = np.abs(kl16 - kl32)
    crit = c.critical()
    acc = {d: float(np.mean(c.correct[d])) for d in DTYPES}
    verdict = diff.standing()
    same_crit = crit["float32"] == crit["bfloat16"]
    sentence = scope_sentence(c) + (
        f"On {counted(n, 'problem')}, greedy {c.model} solves {percent_with_interval(acc['float32'], n)} in float32 and "
        f"{percent_with_interval(acc['bfloat16'], n)} in bfloat16: a paired difference of {diff.describe()}, "
        f"{verdict}. " + (f"The two greedy decodes are identical token for token on {n - len(differing)} of "
                          f"{counted(n, 'problem')}; where they differ, the first differing token is at position "
                          f"{int(np.median(differing))} (median). " if differing else
                          f"The two greedy decodes are identical token for token on "
                          f"{'the one problem' if n == 1 else f'all {n} problems'}. ")
        + f"The logit lens's KL per layer moves by at most "
        f"{gap.max():.3f} nats (at block input {int(gap.argmax())}, where float32 reads {kl32[gap.argmax()]:.3f}), "
        f"and on the sweep's {counted(c.n_sweep, 'problem')} the critical stitched depth is "
        f"{critical_depth_text(crit['float32'])} in float32 and {critical_depth_text(crit['bfloat16'])} "
        f"in bfloat16{' (the same)' if same_crit else ''}.{_critical_clause(c, crit)} Chapter 03 finds its critical "
        "depth on a sweep of its own problems, so where that sweep ran other or more problems the two need not agree: "
        "one problem can move a depth across the rule's line.")
    return {
        "dtype_model": c.model, "dtype_n_problems": n, "dtype_planned_problems": c.planned[0],
        "dtype_acc_float32": 100 * acc["float32"], "dtype_acc_bfloat16": 100 * acc["bfloat16"],
        "dtype_diff_points": 100 * diff.mean, "dtype_diff_low": 100 * diff.low, "dtype_diff_high": 100 * diff.high,
        "dtype_diff_p": diff.p_value, "dtype_identical": n - len(differing),
        "dtype_identical_share": 100 * (n - len(differing)) / n, "dtype_same_correctness": same_answer,
        "dtype_problems_phrase": counted(n, "problem"), "dtype_same_correctness_phrase": counted(same_answer, "problem"),
        "dtype_kl_max_gap": float(gap.max()), "dtype_kl_max_gap_layer": int(gap.argmax()),
        "dtype_critical_float32": critical_depth_text(crit["float32"]),
        "dtype_critical_bfloat16": critical_depth_text(crit["bfloat16"]),
        "dtype_seconds_float32": c.seconds["float32"], "dtype_seconds_bfloat16": c.seconds["bfloat16"],
        "dtype_sentence": sentence,
    }


EXERCISE_COLLAPSE = 0.8  # the critical-depth rule's share in exercise "a stricter rule in both formats"
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
    critical depths under a stricter share (read from the sweep, as a re-run with that parameter would)."""
    import torch

    eps = float(torch.finfo(torch.bfloat16).eps)  # spacing just above 1: 2^-7
    spacing = 2.0 ** np.floor(np.log2(EXERCISE_LOGIT)) * eps  # between neighbours in the logit's binade
    strict = {d: critical_depth(c.sweep[d], c.sweep[d][c.n_layers], EXERCISE_COLLAPSE) for d in DTYPES}
    return {"rerun_command": rerun_command(profile, "06_precision", collapse_fraction=EXERCISE_COLLAPSE),
            "ex_eps": eps, "ex_bits": round(float(-np.log2(eps))) + 1, "ex_logit": EXERCISE_LOGIT,
            "ex_logit_spacing": float(spacing), "ex_logit_error": float(spacing) / 2,
            "ex_collapse": EXERCISE_COLLAPSE, "ex_critical_float32": critical_depth_text(strict["float32"]),
            "ex_critical_bfloat16": critical_depth_text(strict["bfloat16"])}


def _critical_clause(c: DtypeComparison, crit: dict[str, int | None]) -> str:
    """Where the two critical depths differ, the counts behind them: how far each format is from the rule's line."""
    if crit["float32"] == crit["bfloat16"] or None in crit.values():
        return ""
    depth = min(crit.values())
    solved = {d: round(c.sweep[d][depth] * c.n_sweep) for d in DTYPES}
    full = {d: round(c.sweep[d][c.n_layers] * c.n_sweep) for d in DTYPES}
    return (f" At {depth} blocks the stitched model solves {solved['float32']} of {c.n_sweep} problems in float32 and "
            f"{solved['bfloat16']} in bfloat16, against {full['float32']} and {full['bfloat16']} at full depth; the "
            f"critical depth asks for at least {c.collapse_fraction:.0%} of the full model's accuracy, a line that one "
            f"problem of {c.n_sweep} can cross; here the formats differ by "
            f"{abs(solved['float32'] - solved['bfloat16'])} problem(s) at that depth.")


def sweep_table(c: DtypeComparison) -> str:
    """Stitched greedy accuracy per depth in each dtype, with 95% intervals (Markdown)."""
    rows = ["| blocks | " + " | ".join(DTYPES) + " |", "|---" * (len(DTYPES) + 1) + "|"]
    for d in sorted(c.sweep[DTYPES[0]]):
        rows.append(f"| {d}{' (full)' if d == c.n_layers else ''} | "
                    + " | ".join(percent_with_interval(c.sweep[t][d], c.n_sweep) for t in DTYPES) + " |")
    return "\n".join(rows)
