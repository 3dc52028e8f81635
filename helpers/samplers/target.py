"""The target every sampler of p^α shares: α and the longest completion, the one home of both and of their rules.

`Target` is the only class that holds α: a decode's settings (`helpers.samplers.settings.DecodeSettings`) carry one,
and the samplers take it beside their own knobs (`PowerConfig`, `SMCConfig`), so methods compared side by side
cannot aim at two different p^α, and the proposal's temperature 1/α is computed in one place.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from helpers.core.checks import SettingError, is_count

# How a Metropolis–Hastings chain aims at the target: `exact` samples p^α itself; `reference` is the published
# algorithm (a top-k proposal whose ratio is not exact). Spelled once: the runner, the cost model and the
# chapters take it from here.
MH_MODES = ("exact", "reference")


def check_length(max_new_tokens, at_least: int = 1, why: str = "") -> int:
    """The one rule for a completion's length: an integer (not a bool) of at least `at_least`."""
    if not is_count(max_new_tokens, at_least):
        raise SettingError("max_new_tokens", f"max_new_tokens must be an integer of at least {at_least}{why}, got "
                                             f"{max_new_tokens!r}")
    return max_new_tokens


@dataclass(frozen=True)
class Target:
    """p^α over completions of at most `max_new_tokens` tokens (None: the decode settings that carry it set it)."""

    alpha: float
    max_new_tokens: int | None = None

    def __post_init__(self) -> None:
        a = self.alpha
        if isinstance(a, bool) or not isinstance(a, int | float) or not 0 < a < math.inf:
            raise SettingError("alpha",
                               f"alpha must be a positive, finite number (the target is p^alpha), got {a!r}")
        if self.max_new_tokens is not None:
            check_length(self.max_new_tokens)

    @property
    def temperature(self) -> float:
        """T = 1/α: the proposal's temperature (and low-temperature sampling's)."""
        return 1.0 / self.alpha

    @property
    def length(self) -> int:
        """`max_new_tokens`, which a sampler needs set."""
        if self.max_new_tokens is None:
            raise SettingError("max_new_tokens", "max_new_tokens is not set: give Target(alpha, max_new_tokens) or "
                                                 "decode through helpers.evaluation.decodes.sample, which sets it")
        return self.max_new_tokens
