"""Which difficulty levels leave a model room both ways, by measurement: its full-depth greedy accuracy at every
level of the problem set, and the levels where that accuracy lies inside `ROOM`.

A model on levels where it solves almost nothing cannot lose accuracy to a cut, and one where it solves almost
everything cannot gain any from a search: the decomposition of chapter 04 needs room on both sides. The book's
levels suit the instruction-tuned Qwen models; a much weaker model (a 270 M base model) gets levels of its own
(`helpers.data.model_sets.problem_sets`), and this scan is the measurement that says which.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from helpers.data.problems import Problem, by_level

ROOM = (0.2, 0.6)  # a level leaves room both ways where full-depth greedy accuracy lies in this closed range


@dataclass(frozen=True)
class LevelScan:
    """One model's full-depth greedy accuracy per level (`n` problems each), beside the levels it was given."""

    model: str
    accuracy: dict[int, float]
    n: dict[int, int]
    given: tuple[int, ...]

    def with_room(self, room: tuple[float, float] = ROOM) -> list[int]:
        """The levels whose accuracy lies inside `room`."""
        low, high = room
        return [level for level, a in self.accuracy.items() if low <= a <= high]

    def agrees(self, room: tuple[float, float] = ROOM) -> bool:
        """Whether the levels given are exactly those the scan finds room at."""
        return sorted(self.given) == self.with_room(room)

    def within(self, room: tuple[float, float] = ROOM) -> bool:
        """Whether every level given is one the scan finds room at (some with room may be left out)."""
        return set(self.given) <= set(self.with_room(room))


def level_scan(model: str, problems: Sequence[Problem], records: Sequence[Sequence[dict]],
               given: Sequence[int]) -> LevelScan:
    """From one greedy decode per problem (records[problem][0], in `problems`' order): accuracy per level."""
    if len(problems) != len(records) or not problems:
        raise ValueError(f"a level scan needs one greedy record per problem: {len(problems)} problems, "
                         f"{len(records)} records")
    levels = by_level([(p, float(r[0]["correct"])) for p, r in zip(problems, records, strict=True)])
    levels = {lv: scores for lv, scores in levels.items() if lv is not None}
    if not levels:
        raise ValueError("a level scan needs problems with levels")
    return LevelScan(model, {lv: sum(s) / len(s) for lv, s in levels.items()}, {lv: len(s) for lv, s in levels.items()},
                     tuple(given))
