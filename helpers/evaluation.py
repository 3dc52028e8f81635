"""Solve a problem set with a decoding method, grade every answer, and keep each record in the store.

Records are written per problem as soon as its batch finishes, so an interrupted evaluation resumes
where it stopped and a repeated one is instant.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence

from tqdm.auto import tqdm

from helpers.data import Problem, build_prompt
from helpers.decoding import decode_in_batches
from helpers.grading import extract_answer, is_equivalent
from helpers.models import stop_token_ids
from helpers.store import Run


def solve(model, tokenizer, problems: Sequence[Problem], run: Run, *, max_new_tokens: int, shots: int = 0,
          temperature: float = 0.0, top_k: int = 0, seed: int = 0, batch_size: int = 16,
          progress: bool = True) -> list[dict]:
    """One record per problem (stored in `run`): the completion, its answer, whether it is right, its cost."""
    stops = stop_token_ids(model, tokenizer)
    todo = [p for p in problems if p.id not in run]
    chunks = [todo[i:i + batch_size] for i in range(0, len(todo), batch_size)]
    for chunk in tqdm(chunks, desc="solving", disable=not progress or not chunks, leave=False):
        prompts = [build_prompt(tokenizer, p.question, shots=shots) for p in chunk]
        chunk_seed = seed * 1_000_003 + sum(int.from_bytes(p.id.encode()[-4:], "little") for p in chunk)
        completions, stats = decode_in_batches(model, prompts, max_new_tokens, stops, tokenizer.pad_token_id,
                                               batch_size=batch_size, temperature=temperature, top_k=top_k,
                                               seed=chunk_seed)
        share = stats.seconds / len(chunk)
        for problem, prompt, completion in zip(chunk, prompts, completions, strict=True):
            text = tokenizer.decode(completion.tokens, skip_special_tokens=True)
            predicted = extract_answer(text)
            run.add(problem.id, {
                "id": problem.id, "level": problem.level, "gold": problem.answer, "text": text,
                "tokens": completion.tokens, "prompt_tokens": len(prompt), "predicted": predicted,
                "correct": is_equivalent(predicted, problem.answer), "n_tokens": len(completion.tokens),
                "stopped": completion.stopped, "sum_logp": completion.sum_logp,
            }, seconds=share, seed=seed)
    return [run.get(p.id) for p in problems]


def accuracy_by_level(records: Sequence[dict]) -> dict[int | None, float]:
    """Share of correct records per difficulty level, levels in increasing order."""
    groups: dict = defaultdict(list)
    for r in records:
        groups[r["level"]].append(bool(r["correct"]))
    return {level: sum(v) / len(v) for level, v in sorted(groups.items(), key=lambda kv: (kv[0] is None, kv[0]))}


def accuracy(records: Sequence[dict]) -> float:
    """Share of correct records (0 for an empty list)."""
    return sum(bool(r["correct"]) for r in records) / len(records) if records else 0.0
