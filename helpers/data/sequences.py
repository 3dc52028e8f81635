"""The token sequences the analyses read, with one convention for where the solution starts.

Every builder returns (ids, start) where `start` is the index of the first solution (or answer) token. The
model's prediction of that token is read at position start − 1, so a measure over the solution's predictions
covers positions start − 1 .. len(ids) − 2.
"""

from __future__ import annotations

from collections.abc import Sequence

from helpers.data.problems import Problem

# Two short prompts with a known answer, for erasure and integrated gradients (as in Csordás et al.).
PROBES: tuple[tuple[str, str], ...] = (("5 + 7 + 5 + 3 + 1 + 7 =", " 28"),
                                       ("The spouse of the performer of Imagine is", " Yoko Ono"))


def analysis_sequence(tokenizer, problem: Problem) -> tuple[list[int], int]:
    """Token ids of 'Problem: {question}\\nAnswer:' followed by the gold solution, and where the solution starts."""
    head = tokenizer(f"Problem: {problem.question.strip()}\nAnswer:")["input_ids"]
    body = (problem.solution or problem.answer).strip()
    tail = tokenizer(" " + body, add_special_tokens=False)["input_ids"]
    return list(head) + list(tail), len(head)


def probe_sequence(tokenizer, prompt: str, answer: str) -> tuple[list[int], int]:
    """A probe's ids (prompt then answer) and where the answer starts."""
    head = tokenizer(prompt)["input_ids"]
    return list(head) + list(tokenizer(answer, add_special_tokens=False)["input_ids"]), len(head)


def solution_sequence(tokenizer, prompt: Sequence[int], solution_tokens: Sequence[int] | None = None,
                 solution_text: str | None = None, stop_id: int | None = None) -> tuple[list[int], int]:
    """The prompt followed by a solution (generated tokens, or gold text ending in `stop_id`), and its start."""
    if solution_tokens is None:
        if solution_text is None:
            raise ValueError("give solution_tokens or solution_text")
        solution_tokens = tokenizer(solution_text, add_special_tokens=False)["input_ids"]
        solution_tokens = list(solution_tokens) + ([stop_id] if stop_id is not None else [])
    return list(prompt) + list(solution_tokens), len(prompt)
