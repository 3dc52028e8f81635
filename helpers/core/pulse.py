"""A long run's pulse: decoded tokens, rows in flight and records done, written to a file the runner reads.

The chapters run in kernels the runner starts, whose progress bars are off (`helpers.core.progress`). So a decode
reports here instead: whoever starts one makes a `Pulse` (`Pulse.from_env`) and hands it to the decode loop, which
calls `beat` after every engine step (tokens decoded, rows in flight); the decode calls `records` as finished records
are stored. Every `INTERVAL` seconds, and when records finish, one JSON line goes to the file named by $SVD_PULSE
(nothing is written without it): the runner prints progress from the last line (records done of total, tokens/s, an
ETA) and keeps the file as the run's minute-by-minute log of its sustained rate. The file is the only state shared:
each decode's counts live on its own `Pulse`.

When the decode loop stops at its budget's end (`helpers.core.budget`), or a published build meets records the
release lacks, a last line says so (`Pulse.write(outcome=...)`, or `outcome` where no decode is under way), which the
runner reads to tell a spent budget from a failure.
"""

from __future__ import annotations

import os
import time

from helpers.core import env, jsonlog

INTERVAL = 60.0  # seconds between lines while tokens flow: the run's log of sustained speed
RATE_SPAN = 5.0  # fewest seconds a line's tokens/s is measured over: a line written just after another (a record
                 # stored, then the budget's end) repeats the last rate instead of dividing a step by microseconds


class Pulse:
    """One decode's progress, written as JSON lines to `path` (None: counted, never written)."""

    def __init__(self, path: str | os.PathLike | None) -> None:
        self.path = path
        self.start = self.rated_at = time.time()
        self.tokens = self.tokens_at_rate = 0
        self.rate = 0.0
        self.rows = self.computed = 0
        self.done = self.total = 0
        self.what = ""

    @classmethod
    def from_env(cls) -> Pulse:
        """A pulse writing to the file $SVD_PULSE names (the runner sets it for a chapter's kernel), or to none."""
        return cls(os.environ.get(env.PULSE) or None)

    def beat(self, tokens: int, rows: int, computed: int | None = None) -> None:
        """An engine step decoded `tokens` tokens with `rows` rows in flight, computing `computed` rows (rows waiting
        at a barrier or free slots below the highest busy one ride along in the pass; None: just the rows in
        flight)."""
        self.tokens += tokens
        self.rows = rows
        self.computed = rows if computed is None else computed
        if time.time() - self.rated_at >= INTERVAL:
            self.write()

    def records(self, done: int, total: int, what: str) -> None:
        """`done` of the `total` records of this decode (`what`) are stored."""
        self.done, self.total, self.what = done, total, what
        if time.time() - self.rated_at >= RATE_SPAN or done == total:
            self.write()

    def write(self, outcome: str | None = None) -> None:
        """A line of the counts so far; with `outcome`, the run's last, saying how it ended."""
        now = time.time()
        if now - self.rated_at >= RATE_SPAN:
            self.rate = (self.tokens - self.tokens_at_rate) / (now - self.rated_at)
            self.rated_at, self.tokens_at_rate = now, self.tokens
        line = {"time": round(now, 1), "elapsed": round(now - self.start, 1), "what": self.what,
                "done": self.done, "total": self.total, "rows": self.rows, "rows_computed": self.computed,
                "tokens": self.tokens,
                "tokens_per_s": round(self.rate, 2),
                "mean_tokens_per_s": round(self.tokens / max(now - self.start, 1e-9), 2)}
        if outcome is not None:
            line["outcome"] = outcome
        jsonlog.append(self.path, [line])


def outcome(what: str) -> None:
    """The run ended as `what` says (`helpers.core.budget.SPENT`, `helpers.results.store.NOT_RELEASED`) where no
    decode's pulse is at hand: a last line for the runner to read."""
    jsonlog.append(os.environ.get(env.PULSE) or None, [{"time": round(time.time(), 1), "outcome": what}])


def read_outcome(path: str | os.PathLike) -> str | None:
    """The outcome a kernel's pulse log ends with (`outcome`), or None (no log, or it ended otherwise)."""
    lines = jsonlog.read(path)
    return lines[-1].get("outcome") if lines else None
