"""Which problems each model runs: the book's levels, or levels of its own where the shared ones leave it no room,
with one rule for telling a model on problems of its own.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from helpers.data.problems import DataError, Problem
from helpers.data.sources import load_problems


def levels_of(model: str, levels: Sequence[int] | None, model_levels: Mapping[str, Sequence[int]] | None
              ) -> list[int] | None:
    """The levels one model's problems are drawn from: its own in `model_levels` (a model too weak or too strong
    for the book's levels, chosen by measurement), else `levels`, the levels of every other model."""
    own = (model_levels or {}).get(model)
    return list(own) if own is not None else (list(levels) if levels is not None else None)


def check_model_levels(value: object, models: Sequence[str] | None = None) -> dict[str, tuple[int, ...]]:
    """`model_levels` checked and made canonical, the one rule the runner and the library share: a mapping of model
    names to non-empty lists of difficulty levels (whole numbers from 1 to 100); with `models`, every key among them,
    since a key that names no model would silently leave that model on the shared levels."""
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise DataError(f"model_levels must map model names to lists of difficulty levels, e.g. "
                        f"{{'gemma-3-270m': [1, 3]}}, got {value!r}.")
    checked = {}
    for model, chosen in value.items():
        if not isinstance(model, str):
            raise DataError(f"model_levels: {model!r} is not a model name.")
        if not isinstance(chosen, list | tuple) or not chosen or not all(
                isinstance(v, int) and not isinstance(v, bool) and 1 <= v <= 100 for v in chosen):
            raise DataError(f"model_levels: the levels of {model!r} must be a non-empty list of difficulty levels, "
                            f"e.g. [1, 2, 3], got {chosen!r}.")
        checked[model] = tuple(chosen)
    if models is not None and (stray := sorted(set(checked) - set(models))):
        raise DataError(f"model_levels names {stray}, which are not among the models {list(models)}: name each "
                        "model exactly as the models list does.")
    return checked


def problem_sets(models: Sequence[str], dataset: str, *, n: int | None, levels: Sequence[int] | None,
                 model_levels: Mapping[str, Sequence[int]] | None = None, seed: int = 0,
                 fields: dict[str, str] | None = None) -> dict[str, list[Problem]]:
    """Each model's problems (`load_problems` at `levels_of` the model), one load per distinct set of levels, so
    that models on the same levels get the very same problems and pair problem by problem (`model_levels` as
    `check_model_levels` allows, its keys among `models`)."""
    check_model_levels(model_levels, models)
    loaded: dict[tuple | None, list[Problem]] = {}
    sets = {}
    for model in models:
        own = levels_of(model, levels, model_levels)
        key = tuple(own) if own is not None else None
        if key not in loaded:
            loaded[key] = load_problems(dataset, n=n, levels=own, seed=seed, fields=fields)
        sets[model] = loaded[key]
    return sets


def on_own_problems(sets: Mapping[str, Sequence[str]]) -> dict[str, bool]:
    """For each model (its problems' ids), whether it runs problems of its own rather than the book's: the set most
    models share, the first model's on a tie. The one rule by which every table and sentence marks a model whose
    numbers do not pair with the others'."""
    ids = [tuple(v) for v in sets.values()]
    shared = max(ids, key=ids.count) if ids else ()
    return {model: tuple(v) != shared for model, v in sets.items()}
