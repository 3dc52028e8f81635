"""Plain decoding, greedy or sampled: one program of one extension per prompt, run on the slot engine
(`helpers.engines.registry`) unless another engine is given."""

from __future__ import annotations

from collections.abc import Sequence

import torch

from helpers.engines.engine import Engine
from helpers.engines.protocol import Completion, Extension, OnDone, Program, Row, ends_with_stop
from helpers.engines.registry import make_engine
from helpers.samplers.work import Work, check_prompts, one_work, run_together


def decode(model, prompts: Sequence[Sequence[int]], max_new_tokens: int, stop_ids: Sequence[int],
           temperature: float = 0.0, top_k: int = 0, seeds: Sequence[int] | None = None,
           engine: Engine | None = None, batch_size: int | None = None,
           on_done: OnDone | None = None) -> list[Completion]:
    """Decode every prompt (greedy at temperature 0); row b samples with seed `seeds[b]`.

    At most `batch_size` rows decode at once (all of them by default); `on_done(b, completion)` hears of each
    row as soon as it ends.
    """
    stops = set(stop_ids)
    work = decode_work(prompts, max_new_tokens, stops, temperature, top_k, seeds)
    (done,) = run_together(engine or make_engine("slot", model), [work], stops, batch_size, one_work(on_done))
    return done


def decode_work(prompts: Sequence[Sequence[int]], max_new_tokens: int, stops: set[int], temperature: float = 0.0,
                top_k: int = 0, seeds: Sequence[int] | None = None) -> Work:
    """Plain decoding's programs (one extension of each prompt), checked, for `decode` or a shared engine run."""
    if not isinstance(max_new_tokens, int) or max_new_tokens < 1:
        raise ValueError(f"max_new_tokens must be an integer of at least 1, got {max_new_tokens!r}.")
    if temperature < 0:
        raise ValueError(f"temperature must be 0 (greedy) or positive, got {temperature!r}.")
    seeds = list(range(len(prompts))) if seeds is None else list(seeds)
    check_prompts(prompts, seeds, "decoding")
    rows = [Row(list(p), torch.Generator().manual_seed(int(s)) if temperature > 0 else None, temperature, top_k)
            for p, s in zip(prompts, seeds, strict=True)]
    return Work([(row, _extend_once(row, max_new_tokens, stops)) for row in rows], len(rows), room=max_new_tokens)


def _extend_once(row: Row, limit: int, stops: set[int]) -> Program:
    """The program of plain decoding: one extension of the prompt."""
    req = yield Extension(row, 0, limit)
    return Completion(req.tokens, req.logp, req.logq, ends_with_stop(req.tokens, stops))
