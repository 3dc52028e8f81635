"""A long run's pulse: decoded tokens, rows in flight and records done, written to a file the runner reads.

The chapters run in kernels the runner starts, whose progress bars are off (`helpers.core.progress`). So the decode
loop reports here instead: `beat` after every engine step (tokens decoded, rows in flight), `records` as finished
records are stored. Every `INTERVAL` seconds, and when records finish, one JSON line goes to the file named by
$SVD_PULSE (nothing is written without it): the runner prints progress from the last line (records done of total,
tokens/s, an ETA) and keeps the file as the run's minute-by-minute log of its sustained rate.

When the decode loop stops at its budget's end (`helpers.core.budget`), `outcome` writes a last line that says so,
which the runner reads to tell a spent budget from a failure.
"""

from __future__ import annotations

import json
import os
import time

from helpers.core import env

INTERVAL = 60.0  # seconds between lines while tokens flow: the run's log of sustained speed
RATE_SPAN = 5.0  # fewest seconds a line's tokens/s is measured over: a line written just after another (a record
                 # stored, then the budget's end) repeats the last rate instead of dividing a step by microseconds


class _Pulse:
    def __init__(self) -> None:
        self.reset()

    def reset(self) -> None:
        self.start = self.rated_at = time.time()
        self.tokens = self.tokens_at_rate = 0
        self.rate = 0.0
        self.rows = self.computed = 0
        self.done = self.total = 0
        self.what = ""

    def beat(self, tokens: int, rows: int, computed: int | None = None) -> None:
        self.tokens += tokens
        self.rows = rows
        self.computed = rows if computed is None else computed
        if time.time() - self.rated_at >= INTERVAL:
            self.write()

    def records(self, done: int, total: int, what: str) -> None:
        if done == 0:  # a decode begins: its rate counts from here
            self.reset()
        self.done, self.total, self.what = done, total, what
        if time.time() - self.rated_at >= RATE_SPAN or done == total:
            self.write()

    def write(self, outcome: str | None = None) -> None:
        path = os.environ.get(env.PULSE)
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
        if not path:
            return
        try:
            with open(path, "a", encoding="utf-8") as fh:
                fh.write(json.dumps(line) + "\n")
        except OSError:
            pass  # a progress report never stops the work


PULSE = _Pulse()


def beat(tokens: int, rows: int, computed: int | None = None) -> None:
    """An engine step decoded `tokens` tokens with `rows` rows in flight, computing `computed` rows (rows waiting at a
    barrier or free slots below the highest busy one ride along in the pass; None: just the rows in flight)."""
    PULSE.beat(tokens, rows, computed)


def records(done: int, total: int, what: str) -> None:
    """`done` of the `total` records of the current decode (`what`) are stored."""
    PULSE.records(done, total, what)


def outcome(what: str) -> None:
    """The run ended as `what` says (`helpers.core.budget.SPENT`): a last line for the runner to read."""
    PULSE.write(outcome=what)


def read_outcome(path: str | os.PathLike) -> str | None:
    """The outcome a kernel's pulse log ends with (`outcome`), or None (no log, or it ended otherwise)."""
    try:
        with open(path, encoding="utf-8") as fh:
            lines = fh.read().strip().splitlines()
        return json.loads(lines[-1]).get("outcome") if lines else None
    except (OSError, ValueError, AttributeError):
        return None
