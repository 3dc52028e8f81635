"""The target every sampler of p^α shares: α and the longest completion, checked once, where a `Target` is made.

`PowerConfig`, `SMCConfig` and `DecodeSettings` keep their own settings and take α and the length through this
class, so one rule says what an α or a length may be, and the proposal's temperature 1/α is computed in one place.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from helpers.core.checks import SettingError, is_count

# How a Metropolis–Hastings chain aims at the target: `exact` samples p^α itself; `reference` is the published
# algorithm (a top-k proposal whose ratio is not exact). Spelled once: the runner, the cost model and the
# chapters take it from here.
MH_MODES = ("exact", "reference")


@dataclass(frozen=True)
class Target:
    """p^α over completions of at most `max_new_tokens` tokens (None: the caller that decodes supplies it)."""

    alpha: float
    max_new_tokens: int | None = None

    def __post_init__(self) -> None:
        a = self.alpha
        if isinstance(a, bool) or not isinstance(a, int | float) or not 0 < a < math.inf:
            raise SettingError("alpha",
                               f"alpha must be a positive, finite number (the target is p^alpha), got {a!r}")
        if self.max_new_tokens is not None and not is_count(self.max_new_tokens, 1):
            raise SettingError("max_new_tokens",
                               f"max_new_tokens must be an integer of at least 1, got {self.max_new_tokens!r}")

    @property
    def temperature(self) -> float:
        """T = 1/α: the proposal's temperature (and low-temperature sampling's)."""
        return 1.0 / self.alpha


def same_target(**configs) -> float:
    """The α that every named config (PowerConfig, SMCConfig, ...) targets; an error naming them when they differ,
    since methods compared side by side must sample the same p^α."""
    alphas = {name: float(cfg.alpha) for name, cfg in configs.items()}
    if len(set(alphas.values())) > 1:
        raise ValueError("the samplers compared must target the same p^alpha; got "
                         + ", ".join(f"{name} alpha = {a:g}" for name, a in alphas.items()))
    return next(iter(alphas.values()))
