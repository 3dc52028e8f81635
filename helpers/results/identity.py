"""What identifies a stored computation: the model it ran on, the unit of work, and the settings.

Stored runs are keyed by the inputs of the code that computes them, never by dicts typed beside a call: a model
by its handle's identity (`helpers.models.handle.ModelHandle.identity`: where it came from, a fingerprint of its
weights, its truncation and its dtype); `problem_key` and `sequence_key` name a unit of work by its content, so a
changed problem or sequence is a new unit.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any


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
