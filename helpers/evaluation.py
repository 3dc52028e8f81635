"""Greedy solutions of a problem set, graded and stored, and accuracy over such records.

`solve` is `helpers.sampling.sample` with the greedy method, one record per problem: records are written as
soon as their batch finishes, so an interrupted evaluation resumes where it stopped and a repeated one is
instant.
"""

from __future__ import annotations

from collections.abc import Sequence

from helpers.data import Problem
from helpers.sampling import sample
from helpers.store import Run


def solve(model, tokenizer, problems: Sequence[Problem], run: Run, *, max_new_tokens: int, shots: int = 0,
          seed: int = 0, batch_size: int = 16, progress: bool = True) -> list[dict]:
    """One greedy record per problem (stored in `run`): the completion, its answer, whether it is right, its cost."""
    records = sample(model, tokenizer, problems, run, method="greedy", max_new_tokens=max_new_tokens, shots=shots,
                     seed=seed, batch_size=batch_size, progress=progress)
    return [per_problem[0] for per_problem in records]


def accuracy(records: Sequence[dict]) -> float:
    """Share of correct records (0 for an empty list)."""
    return sum(bool(r["correct"]) for r in records) / len(records) if records else 0.0
