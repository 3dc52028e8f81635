"""Prose every chapter's text may use: problem sets in words (which levels a list covers, what each model runs)
and a critical depth as a sentence quotes it."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from helpers.core.numbers import listed
from helpers.data.problems import Problem


def levels_text(levels: Iterable[int | None]) -> str:
    """The levels of a problem list (each problem's, None where it has none), as a reader reads them: 'levels 5–6',
    'levels 1 and 3', 'level 2'."""
    found = sorted({level for level in levels if level is not None})
    if not found:
        return "problems without levels"
    if len(found) == 1:
        return f"level {found[0]}"
    if found == list(range(found[0], found[-1] + 1)):
        return f"levels {found[0]}–{found[-1]}"
    return f"levels {listed(found)}"


def sets_text(sets: Mapping[str, Sequence[Problem]]) -> str:
    """`problem_sets` in one line: how many problems each model runs, and on which levels where they differ."""
    texts = {m: f"{len(p)} problems ({levels_text(x.level for x in p)})" for m, p in sets.items()}
    if len(set(texts.values())) <= 1:
        return f"{next(iter(texts.values()), 'no problems')}; models: {', '.join(sets)}"
    return "; ".join(f"{m}: {t}" for m, t in texts.items())


def critical_depth_text(depth: int | None) -> int | str:
    """A critical depth as prose quotes it: the depth, or why there is none, in words."""
    return depth if depth is not None else "not defined (the full model solves no problem here)"
