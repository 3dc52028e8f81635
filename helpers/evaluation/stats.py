"""Intervals for accuracies measured on tens of problems."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from helpers.core.numbers import counted

P_FLOOR = 1e-4  # the smallest p prose prints as a number: below it the test's 100,000 random draws show too few extremes


def format_p(p: float, tests: int = 1) -> str:
    """A test's p as prose gives it: two significant digits, or '< 0.0001' below `P_FLOOR` (a p of 0 would claim more
    than the test's random draws can show). `tests`: p after a correction for that many tests (Holm's), whose floor is
    that many times the test's own ('< 0.0003' for 3)."""
    floor = tests * P_FLOOR
    return f"< {floor:.1g}" if p < floor else f"{p:.2g}"


def wilson(successes: float, n: int, z: float = 1.96) -> tuple[float, float]:
    """The Wilson score interval (95% by default) of a proportion; (0, 1) when n is 0.

    `successes` may be fractional (a mean over samples per problem times the number of problems).
    """
    if n <= 0:
        return 0.0, 1.0
    p = min(max(successes / n, 0.0), 1.0)
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return max(0.0, centre - half), min(1.0, centre + half)


def percent_with_interval(accuracy: float, n: int) -> str:
    """'38% [22–55]': an accuracy over n problems with its 95% Wilson interval, in percent."""
    lo, hi = wilson(accuracy * n, n)
    return f"{100 * accuracy:.0f}% [{100 * lo:.0f}–{100 * hi:.0f}]"


def half_width(accuracy: float, n: int) -> float:
    """Half the 95% Wilson interval of an accuracy over n problems, in points: how far an accuracy measured on that
    many problems may lie from the truth."""
    lo, hi = wilson(accuracy * n, n)
    return 50 * (hi - lo)


@dataclass(frozen=True)
class PairedDifference:
    """Method a minus method b on the same problems: mean, 95% bootstrap interval and a paired permutation test."""

    mean: float
    low: float
    high: float
    n: int
    better: int  # problems where a scored higher
    worse: int  # problems where b scored higher
    p_value: float  # two-sided paired permutation (sign-flip) test of the mean difference

    @property
    def clear(self) -> bool:
        """A difference larger than its noise: the 95% interval excludes zero *and* the test rejects at 5%.

        On tens of problems the percentile bootstrap runs a little narrow; asking both keeps a claim honest.
        """
        return (self.low > 0 or self.high < 0) and self.p_value < 0.05

    @property
    def borderline(self) -> bool:
        """The interval and the test disagree: suggestive, not conclusive."""
        return not self.clear and ((self.low > 0 or self.high < 0) or self.p_value < 0.05)

    def standing(self, within: str = "within its noise") -> str:
        """Where the difference stands against its noise, in the chapters' words: `within` names the last case (a
        sentence may add what it means there)."""
        return "larger than its noise" if self.clear else "borderline" if self.borderline else within

    @property
    def p_text(self) -> str:
        """The paired test's p as prose gives it (`format_p`): '0.048', or '< 0.0001'."""
        return format_p(self.p_value)

    def points(self, decimals: int = 0, unit: str = " points") -> str:
        """'+12 points [−3, +25]': the mean to `decimals` places (one where the sentence sets it beside a difference
        of differences, whose halves whole points would round apart), the interval's ends to whole points (`_end`); a table
        whose header names the unit passes `unit=""`."""
        return f"{100 * self.mean:+.{decimals}f}{unit} [{_end(self.low)}, {_end(self.high)}]"

    def describe(self, decimals: int = 0) -> str:
        """'+12 points [−3, +25] (better on 5, worse on 2 of 16 problems; paired test p = 0.45)'."""
        return (f"{self.points(decimals)} (better on {self.better}, worse on {self.worse} of "
                f"{counted(self.n, 'problem')}; paired test p {'' if self.p_text.startswith('<') else '= '}{self.p_text})")


def _end(x: float) -> str:
    """An interval's end in whole points, or to a tenth where whole points would round it to zero: '[-0, +16]' would
    hide that the interval reaches below zero."""
    points = 100 * x
    return f"{points:+.1f}" if points != 0 and round(points) == 0 else f"{points:+.0f}"


def holm(p_values: Sequence[float]) -> list[float]:
    """Holm's step-down adjustment of several tests' p values, in their order: the smallest times the number of
    tests, the next times one fewer, each at least the one before, at most 1. A page that answers one question on
    several models tests it several times: one p just under 5% among three is weaker evidence than alone."""
    order = sorted(range(len(p_values)), key=lambda i: p_values[i])
    adjusted, running = [0.0] * len(p_values), 0.0
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (len(p_values) - rank) * p_values[i]))
        adjusted[i] = running
    return adjusted


def sign_test(better: int, worse: int) -> float:
    """Two-sided exact sign test: the probability of a split at least this uneven if either side were as likely."""
    n = better + worse
    if n == 0:
        return 1.0
    tail = sum(math.comb(n, k) for k in range(min(better, worse) + 1)) / 2**n
    return min(1.0, 2 * tail)


def sign_flip_test(differences: Sequence[float], *, exact_up_to: int = 16, n_draws: int = 100_000,
                   seed: int = 0) -> float:
    """Two-sided paired permutation test: how often flipping the sign of each problem's difference at random
    gives a total at least as far from zero. Unlike the sign test it weighs a problem lost on every seed more
    than one lost on half of them. Exact (all 2^k flips) for up to `exact_up_to` non-zero differences."""
    d = np.asarray([x for x in differences if x != 0], dtype=float)
    if len(d) == 0:
        return 1.0
    observed = abs(d.sum()) - 1e-9
    if len(d) <= exact_up_to:
        signs = 1 - 2 * ((np.arange(2 ** len(d))[:, None] >> np.arange(len(d))) & 1)
    else:
        signs = np.random.default_rng(seed).choice([-1.0, 1.0], size=(n_draws, len(d)))
    return float((np.abs(signs @ d) >= observed).mean())


def paired_difference(a: Sequence[float], b: Sequence[float], *, n_boot: int = 10_000, seed: int = 0,
                      level: float = 0.95) -> PairedDifference:
    """Compare two methods scored per problem (0/1, or a mean over samples) on the same problems.

    The interval resamples problems with replacement (a paired bootstrap), so it needs no normal approximation
    on tens of problems; the permutation test asks whether the differences could be signs flipped at random.
    """
    x, y = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    if x.shape != y.shape or x.ndim != 1 or len(x) == 0:
        raise ValueError(f"paired_difference needs two equally long, non-empty score lists; got {x.shape} and {y.shape}.")
    d = x - y
    rng = np.random.default_rng(seed)
    boot = d[rng.integers(0, len(d), size=(n_boot, len(d)))].mean(axis=1)
    low, high = np.quantile(boot, [(1 - level) / 2, (1 + level) / 2])
    better, worse = int((d > 0).sum()), int((d < 0).sum())
    return PairedDifference(float(d.mean()), float(low), float(high), len(d), better, worse, sign_flip_test(d))


def paired_prefix(a: Sequence[float], b: Sequence[float], **kwargs) -> PairedDifference:
    """`paired_difference` over the problems both methods ran, where scores are kept in one problem order and a
    method run on a subset ran on the first k problems of it (the chapters' `search_problems`)."""
    n = min(len(a), len(b))
    return paired_difference(list(a)[:n], list(b)[:n], **kwargs)
