"""The checks of values a user sets, in one place so that every module accepts and refuses the same things."""

from __future__ import annotations


def is_count(value, low: int) -> bool:
    """Whether `value` is an integer (not a bool) of at least `low`: the check of every count a user sets."""
    return isinstance(value, int) and not isinstance(value, bool) and value >= low


class SettingError(ValueError):
    """A setting a user gave is refused; `field` names it, so that a caller can point at what set it (the runner
    names the notebook parameter behind a sampler's field)."""

    def __init__(self, field: str, message: str):
        super().__init__(message)
        self.field = field
