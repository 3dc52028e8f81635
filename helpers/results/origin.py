"""Where a stored record was computed: the commit of the code, the machine, the library versions.

The store writes `origin()` into every record when it computes it, so a record carries its own provenance wherever
it goes (a release batch gathers its records' origins instead of assuming they are the adder's).
"""

from __future__ import annotations

import functools
import os
import platform
import subprocess
from pathlib import Path

from helpers.core import env

CPU_FLAGS = ("avx2", "avx512f", "avx512_bf16", "amx_bf16", "amx_tile", "fma")  # the flags that change kernels
CODE = ("helpers", "notebooks")  # the code a record's numbers depend on; changes elsewhere do not make it dirty


def machine() -> dict:
    """The machine: processor, the flags that change kernels, cores."""
    flags: set[str] = set()
    model = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("flags") and not flags:
                flags = set(line.split(":", 1)[1].split())
            elif line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
    except OSError:
        pass
    return {"cpu": model, "flags": [f for f in CPU_FLAGS if f in flags], "cores": os.cpu_count()}


@functools.cache
def commit() -> dict:
    """{'commit': the checkout's HEAD, or None outside a git checkout; 'dirty': whether the code (helpers/,
    notebooks/) differs from it}. Read once per process."""
    def git(*args: str) -> str | None:
        try:
            out = subprocess.run(["git", *args], cwd=env.REPO, capture_output=True, text=True, timeout=20)
        except (OSError, subprocess.SubprocessError):
            return None
        return out.stdout.strip() if out.returncode == 0 else None

    head = git("rev-parse", "HEAD")
    if head is None:
        return {"commit": None, "dirty": None}
    changes = git("status", "--porcelain", "--untracked-files=no", "--", *CODE)
    return {"commit": head, "dirty": bool(changes) if changes is not None else None}


@functools.cache
def _computed_on() -> dict:
    return {**commit(), "machine": machine()}


def read_now() -> None:
    """Read the commit and machine now, at the start of a process that will store records (the runner's kernels, a
    command), not at its first record: a long run's code is the code it started with, whatever is committed while
    it runs."""
    _computed_on()


def origin() -> dict:
    """What a record stores about where it was computed: commit (and whether the code was changed from it),
    machine, and the chapter whose kernel computed it where the runner executed one (a release batch counts its
    records by it). Library versions go beside it, as `versions`."""
    chapter = os.environ.get(env.CHAPTER)
    return {**_computed_on(), **({"chapter": chapter} if chapter else {})}
