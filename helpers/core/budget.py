"""A run's time budget: `run --budget` sets $SVD_DEADLINE (seconds since the epoch) for the chapters' kernels.

The decode loop owns the deadline (`helpers.engines.loop`): after each engine step, once every row that ended has
stored its record, it asks `spent()`, and past the deadline it ends the run, says so as the run's outcome in the
pulse log (its decode's `Pulse` writes `SPENT`) and raises `BudgetSpent`, which stops the chapter's notebook.
The runner reads that outcome from the log, not the exception's name, to tell a spent budget from a failure, and
raises `BudgetSpent` itself for the command line to say so.
"""

from __future__ import annotations

import os
import time

from helpers.core import env

SPENT = "budget spent"  # the outcome the decode loop logs when it stops at the deadline


class BudgetSpent(RuntimeError):
    """The run's time budget (`run --budget`) is spent: decoding stopped, or the chapter's kernel was stopped from
    outside; every finished record is stored."""


def deadline() -> float | None:
    """The budget's end from $SVD_DEADLINE (seconds since the epoch), or None."""
    try:
        return float(os.environ[env.DEADLINE])
    except (KeyError, ValueError):
        return None


def spent(now: float | None = None) -> bool:
    """Whether the run is past its budget's end (never, without a budget)."""
    end = deadline()
    return end is not None and (time.time() if now is None else now) > end
