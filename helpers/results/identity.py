"""What identifies a stored computation: the model it ran on, the unit of work, and the settings.

Stored runs are keyed by the inputs of the code that computes them, never by dicts typed beside a call:
`model_identity` names a model by where it came from, a fingerprint of its weights, its truncation and its
dtype; `problem_key` and `sequence_key` name a unit of work by its content, so a changed problem or sequence is
a new unit.
"""

from __future__ import annotations

import hashlib
import json
import weakref
from collections.abc import Sequence
from pathlib import Path
from typing import Any

# What the project knows of a model object, held beside it rather than set on it (a transformers model and its config
# are not the project's objects): where it came from (`tag_model`) and, for a truncation made here, which blocks it
# runs (`derive`). Weak keys: an entry goes with its model.
_ORIGINS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
_TRUNCATIONS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def tag_model(model, name: str, source: str, weights: str | None = None, stops: str | None = None) -> None:
    """Record where `model` came from and a fingerprint of its weights, and, where a completion ends at more than
    its EOS (`stops`: a base model's blank line), that rule too; truncated models built from it inherit the tag
    (`derive`)."""
    _ORIGINS[model] = {"model": name, "source": source, "weights": weights} | ({"stops": stops} if stops else {})


def derive(model, parent, truncation: dict) -> None:
    """`model` is `parent` cut as `truncation` says ({'method', 'depth', 'kept_blocks', 'original_layers'}): it
    keeps the parent's origin, with the truncation beside it (`truncation_record`)."""
    if parent in _ORIGINS:
        _ORIGINS[model] = _ORIGINS[parent]
    _TRUNCATIONS[model] = dict(truncation)


def truncation_record(model) -> dict | None:
    """The truncation `derive` recorded for `model`, or None for a model that is not a truncation made here."""
    record = _TRUNCATIONS.get(model)
    return dict(record) if record is not None else None


def model_identity(model) -> dict:
    """{'model', 'source', 'weights', 'depth', 'truncation', 'dtype'}: everything about a model that changes its
    numbers ('weights' fingerprints the files it was loaded from, so other weights under the same name never
    share its records).

    A truncated model at its full depth runs the original blocks, so it has the original's identity.
    Models not loaded by `helpers.models.loading.load_model` are named by their config's path or class.
    """
    import torch

    base = _ORIGINS.get(model)
    if base is None:
        config = model.config
        base = {"model": getattr(config, "_name_or_path", "") or type(model).__name__, "source": "unregistered"}
    truncation = _TRUNCATIONS.get(model)
    if truncation and truncation["depth"] < truncation["original_layers"]:
        shape = {"depth": truncation["depth"], "truncation": truncation["method"]}
    else:
        shape = {"depth": int(model.config.num_hidden_layers) if not truncation else truncation["depth"],
                 "truncation": None}
    dtype = next((p.dtype for p in model.parameters()), torch.float32)
    return {**base, **shape, "dtype": str(dtype).replace("torch.", "")}


def digest(*parts: object, length: int = 10) -> str:
    """A short sha256 of the parts' text (a separator keeps ('ab', 'c') apart from ('a', 'bc'))."""
    text = "\x1f".join(str(p) for p in parts)
    return hashlib.sha256(text.encode()).hexdigest()[:length]


def problem_key(problem) -> str:
    """`<id>@<digest of question and answer>`: the same id with another question is another unit."""
    return f"{problem.id}@{digest(problem.question, problem.answer)}"


def sequence_key(name: str, ids: Sequence[int], start: int) -> str:
    """`<name>@<digest of the token ids and the first analysed position>`."""
    return f"{name}@{digest(','.join(map(str, ids)), start)}"


def sample_key(problem: str, index: int) -> str:
    """`<problem key>#<sample index>`: one sample of a decode (`problem_key`)."""
    return f"{problem}#{index}"


def key_problem(key: str) -> str:
    """The problem key a sample key (`sample_key`) begins with; a problem key itself is its own."""
    return key.split("#")[0]


def key_name(key: str) -> str:
    """The problem id or sequence name a key begins with (`problem_key`, `sequence_key`, `sample_key`)."""
    return key_problem(key).split("@")[0]


def _canonical(obj: Any) -> Any:
    """A JSON-stable form: sorted dict keys, tuples as lists, floats kept exact."""
    if isinstance(obj, dict):
        return {str(k): _canonical(v) for k, v in sorted(obj.items(), key=lambda kv: str(kv[0]))}
    if isinstance(obj, list | tuple):
        return [_canonical(v) for v in obj]
    if isinstance(obj, Path):
        return str(obj)
    return obj


def config_hash(config: dict) -> str:
    """A short, stable hash of a configuration dict (key order does not matter)."""
    text = json.dumps(_canonical(config), sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:16]
