"""What a process did with the results store: the records it reused (and how many of them came from the release) and
computed, and the runs it used, which a chapter's kernel reports when it exits (`report_at_exit`), for the runner's
table of chapter times and for `release add`, which releases the runs a build used.
"""

from __future__ import annotations

import atexit
import json
import os
from pathlib import Path

from helpers.core import env


class Usage:
    """The runs and units one process used, counted only where $SVD_STORE_USAGE names a report file."""

    def __init__(self) -> None:
        self.reused: set = set()
        self.computed: set = set()
        self.released: set = set()
        self.runs: set = set()

    @staticmethod
    def counting() -> bool:
        return bool(os.environ.get(env.STORE_USAGE))

    def used(self, experiment: str, run_hash: str) -> None:
        """Count a run among those this process used."""
        if self.counting():
            self.runs.add(f"{experiment}/{run_hash}")

    def note(self, kind: str, experiment: str, run_hash: str, key: str, released: bool = False) -> None:
        """Count unit `key` of a run as 'reused' (from the release where `released`) or 'computed'."""
        if self.counting():
            self.used(experiment, run_hash)
            getattr(self, kind).add((run_hash, key))
            if kind == "reused" and released:
                self.released.add((run_hash, key))

    def write(self, path: str) -> None:
        """The records this process reused (and how many of them from the release) and computed, the runs it used,
        and its peak resident memory (MiB; the runner's table of chapter times and memory, which the instructor's
        page quotes, and the release's counts per chapter)."""
        usage = {"reused": len(self.reused - self.computed), "computed": len(self.computed),
                 "released": len(self.released - self.computed), "runs": sorted(self.runs)}
        try:
            import resource

            usage["peak_mib"] = round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)  # KiB on Linux
        except ImportError:  # not on Windows
            pass
        Path(path).write_text(json.dumps(usage))


USAGE = Usage()  # this process's
_REPORTING: list[str] = []  # the file a report at exit is registered for, once


def report_at_exit() -> None:
    """Where $SVD_STORE_USAGE names a file (a chapter's kernel, `helpers.runner.execute`): write this process's usage
    there when it exits. A chapter's first call (`helpers.chapters.start`) asks for it; registered once."""
    path = os.environ.get(env.STORE_USAGE)
    if path and path not in _REPORTING:
        _REPORTING.append(path)
        atexit.register(USAGE.write, path)
