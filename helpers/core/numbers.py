"""Numbers as prose quotes them: a perplexity of 538449449.8 reads as ≈ 5.4×10⁸, a KL of 0.0e+00 as 0, one of 3e-9
as < 10⁻⁶, a count of one as "1 problem", not "1 problems" (a glued value is text a reader sees, not a float's repr)."""

from __future__ import annotations

import math
from collections.abc import Sequence

SUPERSCRIPT = str.maketrans("-0123456789", "⁻⁰¹²³⁴⁵⁶⁷⁸⁹")


def power_of_ten(exponent: int) -> str:
    """10 to `exponent`, with a superscript: 10⁸, 10⁻⁶."""
    return "10" + str(exponent).translate(SUPERSCRIPT)


def _finite(x: float) -> None:
    if not math.isfinite(x):
        raise ValueError(f"cannot quote {x!r} as a number: a computation upstream went wrong")


def readable(x: float, decimals: int = 2, large: float = 1e5, small: float = 1e-6) -> str:
    """`x` with `decimals` decimals; from `large` up in scientific notation (≈ 5.4×10⁸); exactly 0 as 0; below `small`
    (but not 0) as < 10⁻⁶, since its digits would be rounding noise."""
    _finite(x)
    if x == 0:
        return "0"
    if abs(x) < small:
        return ("−" if x < 0 else "") + "< " + power_of_ten(round(math.log10(small)))
    if abs(x) >= large:
        exponent = math.floor(math.log10(abs(x)))
        return f"≈ {x / 10 ** exponent:.1f}×{power_of_ten(exponent)}"
    return f"{x:.{decimals}f}"


def significant(x: float, digits: int = 3) -> str:
    """`x` to `digits` significant figures in plain digits, thousands separated: 1,280 and 1.28, never 1.28e+03."""
    _finite(x)
    if x == 0:
        return "0"
    places = digits - 1 - math.floor(math.log10(abs(x)))
    return f"{round(x, places):,.{max(places, 0)}f}"


def listed(items: Sequence[object], empty: str = "none") -> str:
    """Items as a sentence lists them: "1, 2 and 3", "1 and 3", "2"; `empty` for none."""
    words = [str(i) for i in items]
    if not words:
        return empty
    return ", ".join(words[:-1]) + " and " + words[-1] if len(words) > 1 else words[0]


def counted(n: int, noun: str, plural: str | None = None) -> str:
    """`n` and its noun in the number it takes: "1 problem", "0 problems", "8 problems" (`plural` where adding an s
    is wrong)."""
    return f"{n:,} {noun if n == 1 else plural or noun + 's'}"
