"""The shapes stored records must have: `conforms` checks a record read back from JSON against the shape its
computing code declares (`Sized` for a list whose length a field of the run's configuration gives), so that the
store, the release and the audit trust nothing they read unchecked.
"""

from __future__ import annotations

from typing import Any


class Sized:
    """A shape for a list of exactly `n` items of shape `item` (see `conforms`): `n` is a number, or the name of a
    field of the run's configuration whose value is a count (`depth`, `particles`) or a list (`steps`), so a
    per-layer list is checked against the depth of the model that computed it."""

    def __init__(self, item: Any, n: int | str):
        self.item, self.n = item, n

    def __repr__(self) -> str:
        return f"Sized({self.item!r}, {self.n!r})"


def shape_sizes(config: dict) -> dict[str, int]:
    """The counts a configuration gives `Sized` shapes: each integer field's value and each list field's length."""
    return {k: (len(v) if isinstance(v, list | tuple) else v) for k, v in config.items()
            if isinstance(v, list | tuple) or (isinstance(v, int) and not isinstance(v, bool))}


def conforms(value: Any, shape: Any, sizes: dict[str, int] | None = None) -> bool:
    """Whether `value`, read back from JSON, has `shape`: a type (`float` also takes an int; neither takes a bool),
    a tuple of alternatives (`type(None)` for null), `[s]` for a list of s, `Sized(s, n)` for a list of exactly n
    (a name in `sizes`, see `shape_sizes`), `{key: s}` for a dict holding at least those keys, or None for anything.
    The recursion follows the shape, so it is as deep as the shape."""
    if shape is None:
        return True
    if isinstance(shape, tuple):
        return any(conforms(value, s, sizes) for s in shape)
    if isinstance(shape, Sized):
        n = shape.n if isinstance(shape.n, int) else (sizes or {}).get(shape.n)
        if n is None:
            raise ValueError(f"a Sized shape names {shape.n!r}, which the run's configuration does not give")
        return isinstance(value, list) and len(value) == n and all(conforms(v, shape.item, sizes) for v in value)
    if isinstance(shape, list):
        return isinstance(value, list) and all(conforms(v, shape[0], sizes) for v in value)
    if isinstance(shape, dict):
        return isinstance(value, dict) and all(k in value and conforms(value[k], s, sizes) for k, s in shape.items())
    if isinstance(value, bool):
        return shape is bool
    if shape is float:
        return isinstance(value, int | float)
    return isinstance(value, shape)
