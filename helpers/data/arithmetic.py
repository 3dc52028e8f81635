"""The embedded arithmetic benchmark, generated so that it needs no download: each level adds steps and larger
numbers, every answer is an exact integer, and problem `i` of level `l` depends only on (seed, l, i).
"""

from __future__ import annotations

import random
from collections.abc import Iterable
from dataclasses import dataclass

from helpers.data.problems import DataError, Problem

NAMES = ("Ada", "Bruno", "Chen", "Dara", "Emil", "Farah", "Goran", "Hana", "Ivo", "Jun", "Kemal", "Lina",
         "Mateo", "Nia", "Omar", "Priya", "Quinn", "Rosa", "Sami", "Tove")


ITEMS = ("marbles", "stickers", "apples", "coins", "stamps", "shells", "pencils", "cards", "beads", "books")


CONTAINERS = ("boxes", "bags", "jars", "baskets", "envelopes")


@dataclass(frozen=True)
class Level:
    """How hard a level is: operations after the start, largest start and step amounts, allowed operations."""

    n_ops: int
    start_max: int
    step_max: int
    ops: tuple[str, ...]


# Calibrated on qwen2.5-coder-0.5b (greedy, two worked examples; chapter 02's level table gives the numbers):
# levels 1-3 are one step and solved almost always, 4-6 take three or four steps (the 40-75% band that
# chapters 03-04 use is 5-6), and 7 has larger numbers, which the model mostly fails. Levels 1-3 are the
# smoke profile's and keep the wording and numbers they always had.
LEVELS: dict[int, Level] = {
    1: Level(1, 9, 9, ("add",)),
    2: Level(1, 30, 30, ("add",)),
    3: Level(1, 20, 20, ("add", "sub")),
    4: Level(3, 50, 30, ("add", "sub", "mul")),
    5: Level(3, 50, 30, ("add", "sub", "mul", "div")),
    6: Level(4, 30, 20, ("add", "sub", "mul", "div")),
    7: Level(4, 100, 60, ("add", "sub", "mul", "div")),
}


# The worked examples of few-shot prompts: a two-step and a one-step problem, from their own namespace.
SHOT_LEVELS: tuple[Level, ...] = (Level(2, 30, 20, ("add", "sub")), Level(1, 9, 9, ("add",)))


def _step(rng: random.Random, op: str, value: int, name: str, item: str, level: Level
          ) -> tuple[int, str, str] | None:
    """Apply one operation to `value`: (new value, sentence of the question, line of the solution) or None."""
    if op == "add":
        n = rng.randint(2, level.step_max)
        sentence = rng.choice((f"Then {name} receives {n} more {item}.", f"A neighbour gives {name} another {n} {item}.",
                               f"{name} finds {n} more {item}."))
        return value + n, sentence, f"Adding {n}: {value} + {n} = {value + n}."
    if op == "sub":
        if value < 3:
            return None
        n = rng.randint(1, min(value - 1, level.step_max))
        sentence = rng.choice((f"{name} gives away {n} {item}.", f"Then {name} loses {n} of the {item}.",
                               f"{name} trades {n} {item} for a snack."))
        return value - n, sentence, f"Taking away {n}: {value} - {n} = {value - n}."
    if op == "mul":
        k = rng.randint(2, 3)
        word = {2: "doubles", 3: "triples"}[k]
        sentence = rng.choice((f"Then {name} {word} the number of {item}.",
                               f"After a lucky week, {name} has {k} times as many {item} as before."))
        return value * k, sentence, f"Multiplying by {k}: {value} * {k} = {value * k}."
    if op == "div":
        divisors = [k for k in (2, 3, 4, 5) if value % k == 0]
        if not divisors or value < 4:
            return None
        k, box = rng.choice(divisors), rng.choice(CONTAINERS)
        sentence = (f"{name} splits the {item} equally into {k} {box}, keeps one of the {box} and gives the "
                    "others away.")
        return value // k, sentence, f"Keeping one of {k} equal parts: {value} / {k} = {value // k}."
    raise ValueError(op)


def _compose(spec: Level, rng: random.Random) -> tuple[str, str, int]:
    """A question, its worked solution and its answer, following `spec`."""
    name, item = rng.choice(NAMES), rng.choice(ITEMS)
    value = rng.randint(2, spec.start_max)
    sentences, lines = [f"{name} has {value} {item}."], [f"{name} starts with {value} {item}."]
    while len(sentences) <= spec.n_ops:
        result = _step(rng, rng.choice(spec.ops), value, name, item, spec)
        if result is not None:
            value, sentence, line = result
            sentences.append(sentence)
            lines.append(line)
    sentences.append(f"How many {item} does {name} have now?")
    lines.append(f"The final answer is \\boxed{{{value}}}.")
    return " ".join(sentences), "\n".join(lines), value


def arithmetic_problem(level: int, index: int, seed: int = 0) -> Problem:
    """Problem `index` of `level`: a start amount, then the level's operations; answer = the final amount.

    The problem carries a worked solution in the same wording, used as gold text for comparisons.
    """
    if level not in LEVELS:
        raise DataError(f"Arithmetic levels are {sorted(LEVELS)}; got {level!r}.")
    question, solution, value = _compose(LEVELS[level], random.Random(f"arith:{seed}:{level}:{index}"))
    return Problem(id=f"arith-L{level}-{seed}-{index}", question=question, answer=str(value), level=level,
                   source="arithmetic", solution=solution)


def arithmetic_problems(n_per_level: int, levels: Iterable[int] = tuple(LEVELS), seed: int = 0) -> list[Problem]:
    """`n_per_level` problems of each level, in level order; deterministic in (seed, level, index)."""
    if n_per_level < 1:
        raise DataError(f"n_per_level must be at least 1, got {n_per_level}.")
    return [arithmetic_problem(level, i, seed) for level in levels for i in range(n_per_level)]


def worked_examples(n: int) -> list[Problem]:
    """`n` solved problems for few-shot prompts, from a namespace the benchmark never uses."""
    shots = []
    for i in range(n):
        question, solution, value = _compose(SHOT_LEVELS[i % len(SHOT_LEVELS)], random.Random(f"shot:{i}"))
        shots.append(Problem(id=f"shot-{i}", question=question, answer=str(value), source="worked-example",
                             solution=solution))
    return shots
