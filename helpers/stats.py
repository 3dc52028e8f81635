"""Intervals for accuracies measured on tens of problems."""

from __future__ import annotations

import math


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
