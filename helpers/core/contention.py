"""How much of the machine other processes used while this one timed something: a timing taken while other work
shared the cores is that moment's rate, not the machine's, and a page that prints one should say so.

Linux only (`/proc/stat` and the process's own CPU time); elsewhere the share is unknown (None).
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from pathlib import Path

STAT = Path("/proc/stat")
SHARED = 0.2  # other processes used at least this share of the cores' time: the timing was shared


def _busy_seconds() -> float | None:
    """Seconds every CPU of the machine has spent busy since boot (all but idle and I/O wait), or None."""
    try:
        fields = STAT.read_text().splitlines()[0].split()
    except OSError:
        return None
    if not fields or fields[0] != "cpu":
        return None
    ticks = [int(x) for x in fields[1:]]
    idle = ticks[3] + (ticks[4] if len(ticks) > 4 else 0)
    return (sum(ticks[:8]) - idle) / os.sysconf("SC_CLK_TCK")


@dataclass
class Window:
    """A timed window: `others` is the share of the cores' time that other processes used in it (None: unknown)."""

    others: float | None = None

    def __enter__(self) -> Window:
        self._busy, self._own, self._wall = _busy_seconds(), time.process_time(), time.perf_counter()
        return self

    def __exit__(self, *exc) -> None:
        busy, own, wall = _busy_seconds(), time.process_time(), time.perf_counter()
        if busy is None or self._busy is None or wall <= self._wall:
            return
        total = (os.cpu_count() or 1) * (wall - self._wall)  # /proc/stat counts every CPU of the machine
        self.others = max(0.0, min(1.0, ((busy - self._busy) - (own - self._own)) / total))

    @property
    def shared(self) -> bool:
        """Whether other processes used at least `SHARED` of the cores while the window was open."""
        return self.others is not None and self.others >= SHARED
