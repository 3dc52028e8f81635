"""A problem, and how a set of them is chosen for an analysis: by level, levels in turn, or one model's own.

Where problems come from is `helpers.data.sources` (the generated arithmetic benchmark, `helpers.data.arithmetic`;
MATH500 and GSM8K from the hub; local files), how they are asked is `helpers.data.prompts`, and which levels each
model runs is `helpers.data.model_sets`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass


class DataError(ValueError):
    """A problem set could not be built or loaded; the message says what to do."""


@dataclass(frozen=True)
class Problem:
    """One problem: `answer` is the gold final answer as a string (an integer for the arithmetic set)."""

    id: str
    question: str
    answer: str
    level: int | None = None
    source: str = "arithmetic"
    solution: str | None = None

    def as_dict(self) -> dict:
        return asdict(self)


def by_level(pairs: Sequence[tuple[Problem, object]]) -> dict:
    """Items grouped by their problem's level, levels in increasing order (no level last)."""
    groups: dict = {}
    for p, item in pairs:
        groups.setdefault(p.level, []).append(item)
    return dict(sorted(groups.items(), key=lambda kv: (kv[0] is None, kv[0])))


def per_level(problems: Sequence[Problem], k: int) -> list[Problem]:
    """The first `k` problems of each level, levels in increasing order (problems without a level count as one)."""
    return [p for group in by_level([(p, p) for p in problems]).values() for p in group[:k]]


def interleaved(problems: Sequence[Problem], n: int | None) -> list[Problem]:
    """The first `n` problems taking levels in turn (level 1, 2, …, 1, 2, …), so a small n covers every level."""
    groups = list(by_level([(p, p) for p in problems]).values())
    order = [g[i] for i in range(max(map(len, groups), default=0)) for g in groups if i < len(g)]
    return order[:n] if n else order


def problems_of(problems: Sequence[Problem] | Mapping[str, Sequence[Problem]], model: str) -> list[Problem]:
    """One model's problems, from one list for every model or from `problem_sets`' mapping."""
    if isinstance(problems, Mapping):
        if model not in problems:
            raise DataError(f"no problems were given for {model!r}; the problem sets name {sorted(problems)}")
        return list(problems[model])
    return list(problems)
