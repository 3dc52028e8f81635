"""The stored studies over many sequences: the logit lens over a problem set (chapter 02) and a truncated model's
agreement with the full one (chapter 03).

Each sequence's result is kept in the results store as soon as it is computed, keyed by the models' identities
and the sequence's content, so any chapter that reads the same sequences through the same models reuses it. The
primitives they wrap (`helpers.interp.lens`, `helpers.models.truncation`) know nothing of the store.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np
import torch

from helpers.core.progress import bar
from helpers.interp.lens import lens_table, logit_lens
from helpers.interp.metrics import kl_divergence
from helpers.models.handle import ModelHandle
from helpers.results.identity import sequence_key
from helpers.results.kinds import AGREEMENT, LENS_TABLE, LOGIT_LENS
from helpers.results.shapes import Sized
from helpers.results.store import Run


def lens_over_problems(model: ModelHandle, items: Sequence[tuple[str, list[int], int]], k: int = 5,
                       direction: str = "layer||final", progress: bool = True,
                       root: Path | None = None) -> dict[str, np.ndarray]:
    """Per-problem logit-lens curves, averaged over the positions that predict the solution.

    `items` are (name, ids, index of the first solution token), as `helpers.data.sequences` builds them. Each sequence's curves are stored as soon as they are
    computed, keyed by the model (`ModelHandle.identity`), k, the direction and the sequence's content, so any
    chapter that reads the same sequences through the same model reuses them. Returns arrays
    [problems, layers] for 'kl' and 'overlap'.
    """
    run = Run(LOGIT_LENS, {**model.identity(), "k": k, "direction": direction}, root=root)
    keys = [sequence_key(name, ids, start) for name, ids, start in items]
    for key, (_, ids, start) in bar(list(zip(keys, items, strict=True)), desc="logit lens", progress=progress):
        run.compute(key, lambda ids=ids, start=start: lens_record(model.module, ids, start, k, direction))
    stored = run.get_many(keys)
    return {name: np.array([s[name] for s in stored]) for name in ("kl", "overlap")}


LENS_SHAPE = {"kl": Sized(float, "depth"), "overlap": Sized(float, "depth"), "n_positions": int}  # a `lens_record`: a
# value per layer


def lens_record(model, ids: Sequence[int], start: int, k: int, direction: str) -> dict:
    """One sequence's stored lens record: the curves averaged over the positions that predict tokens start.."""
    kl, overlap = logit_lens(model, ids, k=k, direction=direction, start=start - 1).mean()
    return {"kl": kl.tolist(), "overlap": overlap.tolist(), "n_positions": int(len(ids) - start + 1)}


def lens_explorer_table(model: ModelHandle, item: tuple[str, list[int], int], n_positions: int, n_top: int = 3,
                        root: Path | None = None) -> dict:
    """The lens explorer's table (`helpers.interp.lens.lens_table`) of one (name, ids, start) sequence from its first
    solution token on, stored under the model's identity and the sequence's content like the lens curves, so a build
    that reads it again reads it back instead of running the model."""
    name, ids, start = item
    run = Run(LENS_TABLE, {**model.identity(), "n_positions": n_positions, "n_top": n_top}, root=root)
    key = sequence_key(name, ids, start)
    return run.compute(key, lambda: lens_table(model.module, model.tokenizer, ids, start, n_positions, n_top))


TABLE_SHAPE = {"tokens": [str], "top_tokens": Sized([Sized(str, "n_top")], "depth"),
               "top_probs": Sized([Sized(float, "n_top")], "depth"),
               "kl": Sized([float], "depth")}  # a `lens_table`: per tap, per position (and per rank)


def _solution_logp(model, x, start: int):
    """log p of the predictions of tokens start..T-1 (positions start-1..T-2): the head runs on those alone."""
    logits = model(input_ids=x, use_cache=False, logits_to_keep=x.shape[1] - start + 1).logits[0, :-1]
    return torch.log_softmax(logits.float(), -1)


def _agreement_values(logp_trunc, logp_full, targets) -> dict[str, float]:
    return {"kl": float(kl_divergence(logp_trunc, logp_full).mean()),
            "nll": float(-logp_trunc.gather(-1, targets).mean()),
            "nll_full": float(-logp_full.gather(-1, targets).mean())}


def _checked(full, ids, start: int):
    x = torch.as_tensor(list(ids), dtype=torch.long, device=next(full.parameters()).device)[None]
    if not 1 <= start < x.shape[1]:
        raise ValueError(f"start (the first solution token) must lie in 1..{x.shape[1] - 1}, got {start}")
    return x


def agreement(full, truncated, ids, start: int) -> dict[str, float]:
    """How a truncated model's next-token distributions differ from the full model's on one sequence.

    Over the predictions of tokens start..T-1 (`start` is the first solution token, see `helpers.data.sequences`):
    mean KL(truncated || full), the truncated model's mean negative log-likelihood of those tokens, and the
    full model's.
    """
    x = _checked(full, ids, start)
    with torch.inference_mode():
        return _agreement_values(_solution_logp(truncated, x, start), _solution_logp(full, x, start), x[0, start:, None])


AGREEMENT_SHAPE = {"kl": float, "nll": float, "nll_full": float}  # what `agreement` returns, as stored


def agreement_over(full: ModelHandle, truncated: dict[object, ModelHandle], items, root: Path | None = None) -> dict:
    """`agreement` averaged over (name, ids, start) sequences, for each truncated model of `truncated` (any keys to
    handles); each sequence's values are stored under both models' identities. The full model runs once per
    sequence that some truncation has not stored yet."""
    runs = {key: Run(AGREEMENT, {"full": full.identity(), "truncated": model.identity()}, root=root)
            for key, model in truncated.items()}
    values: dict = {key: [] for key in truncated}
    for name, ids, start in items:
        unit = sequence_key(name, ids, start)
        missing = [key for key, run in runs.items() if unit not in run]
        for key in missing:
            runs[key].refuse_work([unit])
        if missing:
            x = _checked(full.module, ids, start)
            with torch.inference_mode():
                logp_full = _solution_logp(full.module, x, start)
            for key in missing:
                with torch.inference_mode():
                    found = _agreement_values(_solution_logp(truncated[key].module, x, start), logp_full,
                                              x[0, start:, None])
                runs[key].compute(unit, lambda found=found: found)
        for key, run in runs.items():
            values[key].append(run.get(unit))
    return {key: {k: sum(v[k] for v in vals) / len(vals) for k in ("kl", "nll", "nll_full")} if vals else {}
            for key, vals in values.items()}
