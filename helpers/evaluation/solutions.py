"""A model's greedy solutions and the logit lens over them: the pipeline chapters 02 and 03 share, so that both read the
same stored decodes and lens records.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from helpers.data.problems import Problem, per_level
from helpers.data.prompts import build_prompt
from helpers.data.sequences import solution_sequence
from helpers.evaluation.decodes import solve
from helpers.interp.studies import lens_over_problems
from helpers.models.handle import ModelHandle


@dataclass
class Solved:
    """A model's greedy solutions and the logit lens over them."""

    records: list[dict]
    items: list[tuple[str, list[int], int]]  # (problem id, prompt + solution ids, first solution position)
    curves: dict[str, np.ndarray]  # 'kl', 'overlap': [problems, layers]


def solutions_and_lens(model: ModelHandle, problems: Sequence[Problem], *, max_new_tokens: int, shots: int,
                       batch_size: int, lens_per_level: int | None = None) -> Solved:
    """Greedy solutions (stored once for every chapter) and the lens over prompt + solution (stored too), over every
    problem or over the first `lens_per_level` of each level (`per_level`): the lens costs a pass through the
    unembedding at every layer and position, many times a solution's own decoding, and a few problems a level
    already fix the curves' shape."""
    records = solve(model, problems, max_new_tokens=max_new_tokens, shots=shots, batch_size=batch_size)
    tokenizer = model.tokenizer
    items = [(p.id, *solution_sequence(tokenizer, build_prompt(tokenizer, p.question, shots=shots),
                                  solution_tokens=r["tokens"])) for p, r in zip(problems, records, strict=True)]
    chosen = {p.id for p in (per_level(problems, lens_per_level) if lens_per_level is not None else problems)}
    return Solved(records, items, lens_over_problems(model, [i for i in items if i[0] in chosen]))
