"""Appendix: what running the model in bfloat16 instead of float32 changes, measured side by side.

Both dtypes see the same problems and the same settings: greedy accuracy (paired, problem by problem), how often
the two greedy decodes agree token for token, the logit lens's KL per layer over the same token sequences (the
float32 model's own solutions), and chapter 03's critical depth from a stitched sweep in each dtype. Every
decode and lens curve goes through the results store under its dtype, so the float32 half is shared with the
chapters wherever their settings coincide.

Where the hardware only emulates bfloat16 (a CPU without AVX512-BF16 or AMX: 3-8x float32's cost), both halves
run on the first `emulated_problems` problems taking levels in turn (`helpers.data.problems.interleaved`), so the
comparison stays paired and the appendix says how much of the planned comparison it shows.

The speed of each format is measured apart from the records (`helpers.evaluation.format_speed`): the same greedy
decode of `speed_rows` prompts in each, on the build's machine, so that a build reusing every record still states
what each format costs there.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from helpers.core.checks import is_count
from helpers.data.problems import Problem, interleaved
from helpers.data.prompts import build_prompt
from helpers.data.sequences import solution_sequence
from helpers.evaluation.critical import CriticalDepthMissing, SweepSettings, stored_sweep
from helpers.evaluation.decodes import DecodeSettings, accuracy, sample_at_depths, solve
from helpers.evaluation.format_speed import SpeedTable, time_model
from helpers.evaluation.stats import PairedDifference, paired_difference
from helpers.interp.studies import lens_over_problems
from helpers.models.handle import ModelHandle
from helpers.models.loading import default_device, load_model
from helpers.models.precision import FORMATS, auto_name, describe, native_bfloat16
from helpers.models.truncation import critical_depth

SPEED_TOKENS = 32  # tokens each row decodes in the speed measurement (no stop: the same work in both formats)


@dataclass
class DtypeComparison:
    """One model in float32 and in bfloat16 (keys of every dict are FORMATS)."""

    model: str
    n_layers: int
    correct: dict[str, list[bool]]  # greedy, per problem
    tokens: dict[str, list[list[int]]]  # greedy tokens, per problem
    kl: dict[str, np.ndarray]  # [lens problems, layers]: KL(layer || final) over the float32 solutions
    sweep: dict[str, dict[int, float]]  # stitched greedy accuracy per depth (full depth included)
    n_sweep: int  # problems of the sweep
    collapse_fraction: float
    native: bool = True  # bfloat16 computed in hardware; False: emulated, and the problems below were cut
    planned: tuple[int, int] = (0, 0)  # the problems asked for (accuracy, sweep) before any cut
    speed: SpeedTable | None = None  # each format's decode measured on this machine (None: not measured)
    auto: str = "float32"  # the format `dtype: auto` takes for this model on this machine
    auto_reason: str = ""  # why, in words (`helpers.models.precision.describe`)
    speed_asked: int | None = None  # the prompts the timing was asked for (`speed_rows`), before the cap cut them
    chapter03: tuple[int | None, int] | None = None  # chapter 03's stored critical depth of this model in float32 and
    # the problems it read it on (None: chapter 03 stored none under this build's settings)

    @property
    def n_problems(self) -> int:
        return len(self.correct[FORMATS[0]])

    def difference(self) -> PairedDifference:
        """bfloat16 minus float32 greedy accuracy, paired over the problems."""
        return paired_difference([float(c) for c in self.correct["bfloat16"]],
                                 [float(c) for c in self.correct["float32"]])

    def critical(self, collapse_fraction: float | None = None) -> dict[str, int | None]:
        """Each format's critical stitched depth under the comparison's share (or `collapse_fraction`)."""
        share = self.collapse_fraction if collapse_fraction is None else collapse_fraction
        return {d: critical_depth(self.sweep[d], self.sweep[d][self.n_layers], share) for d in FORMATS}

    def accuracy(self) -> dict[str, float]:
        """Each format's greedy accuracy."""
        return {d: float(np.mean(self.correct[d])) for d in FORMATS}

    def divergences(self) -> list[int]:
        """For each problem whose two greedy decodes differ, the position of the first differing token."""
        splits = (first_divergence(a, b) for a, b in zip(self.tokens["float32"], self.tokens["bfloat16"], strict=True))
        return [s for s in splits if s is not None]

    def same_correctness(self) -> int:
        """On how many problems the two formats' greedy answers are both right or both wrong."""
        return sum(a == b for a, b in zip(self.correct["float32"], self.correct["bfloat16"], strict=True))

    def lens_gap(self) -> tuple[float, int, float]:
        """The largest move of the lens's mean KL per layer between the formats, the block input where it is, and
        float32's KL there."""
        kl32, kl16 = self.kl["float32"].mean(0), self.kl["bfloat16"].mean(0)
        gap = np.abs(kl16 - kl32)
        at = int(gap.argmax())
        return float(gap.max()), at, float(kl32[at])

    def solved_at(self, depth: int) -> dict[str, int]:
        """How many of the sweep's problems each format's stitched model solves at `depth` blocks."""
        return {d: round(self.sweep[d][depth] * self.n_sweep) for d in FORMATS}


def bfloat16_spacing(value: float) -> tuple[float, int, float]:
    """bfloat16's machine epsilon (spacing just above 1: 2⁻⁷), its significand bits, and the spacing between
    neighbours in `value`'s binade."""
    import torch

    eps = float(torch.finfo(torch.bfloat16).eps)
    return eps, round(float(-np.log2(eps))) + 1, float(2.0 ** np.floor(np.log2(value)) * eps)


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
                   native_problems: int | None = None, speed_rows: int | None = 16,
                   critical_sweep: SweepSettings | dict | None = None) -> DtypeComparison:
    """Run `name` in each dtype: greedy on `problems`, the lens on the first `n_lens` float32 solutions, and the
    stitched sweep of the last `span` depths on `sweep_problems`.

    Where bfloat16 is emulated (`native` False; by default, asked of the device the model loads on), at most
    `emulated_problems` of each problem set run, in both dtypes (None: all of them); where it is native, at most
    `native_problems` (a released build sets both alike, so that every machine reads the same records). Each
    format's speed is measured on `speed_rows` prompts (None: not measured), at most as many as that cap. Where
    chapter 03 stored this model's critical depth under `critical_sweep`, it is read back beside this sweep's."""
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
    if speed_rows is not None and not is_count(speed_rows, 1):
        raise ValueError(f"speed_rows must be a whole number of at least 1 (or None: no speed measurement), got "
                         f"{speed_rows!r}")
    speed_asked = speed_rows
    if speed_rows is not None and cap is not None:
        speed_rows = min(speed_rows, cap)  # a cap that cuts the comparison cuts its timing too
    correct, tokens, kl, sweep, speeds = {}, {}, {}, {}, {}
    items, chapter03 = None, None
    n_layers = 0
    for dtype in FORMATS:
        model = load_model(name, dtype=dtype)
        tokenizer, n_layers = model.tokenizer, model.n_layers
        if dtype == "float32" and critical_sweep is not None:
            chapter03 = _chapter03(model, name, critical_sweep)
        records = solve(model, problems, max_new_tokens=max_new_tokens, shots=shots, batch_size=batch_size)
        correct[dtype] = [bool(r["correct"]) for r in records]
        tokens[dtype] = [list(r["tokens"]) for r in records]
        if items is None:  # the lens reads the same sequences in both dtypes: the float32 model's solutions
            items = [(p.id, *solution_sequence(tokenizer, build_prompt(tokenizer, p.question, shots=shots),
                                               solution_tokens=r["tokens"]))
                     for p, r in list(zip(problems, records, strict=True))[:n_lens]]
        kl[dtype] = lens_over_problems(model, items)["kl"]
        swept = sample_at_depths(model, sweep_problems, {"greedy": DecodeSettings("greedy", max_new_tokens, shots)},
                                 [("stitch", d) for d in range(max(n_layers - span, 2), n_layers + 1)], n_seeds=1,
                                 batch_size=batch_size)  # every depth in one engine run, as chapter 03's sweep
        sweep[dtype] = {depth: accuracy([samples[0] for samples in by_name["greedy"]])
                        for (_, depth), by_name in swept.items()}
        if speed_rows is not None:
            speeds[dtype] = time_model(model.module, tokenizer, [speed_rows], SPEED_TOKENS, shots)[speed_rows]
        del model
    speed = SpeedTable(name, SPEED_TOKENS, {speed_rows: speeds}) if speeds else None
    device = default_device()
    return DtypeComparison(name, n_layers, correct, tokens, kl, sweep, len(sweep_problems), collapse_fraction,
                           native, planned, speed, auto_name(device, name), describe(device, name), speed_asked,
                           chapter03)


def _chapter03(model: ModelHandle, name: str, critical_sweep: SweepSettings | dict) -> tuple[int | None, int] | None:
    """Chapter 03's stored critical depth of `model` and its problem count, or None where it stored none."""
    settings = SweepSettings.from_parameters(critical_sweep) if isinstance(critical_sweep, dict) else critical_sweep
    try:
        record = stored_sweep(model, settings.for_model(name))
    except CriticalDepthMissing:
        return None
    return record["depth"], record["n_problems"]


