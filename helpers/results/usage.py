"""What a chapter's kernel did with the results store: the records it reused (and how many of them came from the
release) and computed, and the runs it used, for the runner's table of chapter times and for `release add`, which
releases the runs a build used.

Counted only where $SVD_STORE_USAGE names a file (the runner sets it for each chapter's kernel): every use is one
JSON line appended to it, and the kernel's peak memory one more as it exits (`report_at_exit`). The file is the
tally, so the process keeps none; the runner reads it back with `summary`.
"""

from __future__ import annotations

import atexit
import os
from collections.abc import Container, Iterable

from helpers.core import env, jsonlog


def used(experiment: str, run_hash: str) -> None:
    """Count a run among those this process used."""
    jsonlog.append(os.environ.get(env.STORE_USAGE), [{"run": f"{experiment}/{run_hash}"}])


def note(kind: str, experiment: str, run_hash: str, keys: Iterable[str], released: Container[str] = ()) -> None:
    """Count the units `keys` of a run as 'reused' (those in `released` from the release) or 'computed'."""
    if kind not in ("reused", "computed"):
        raise ValueError(f"a unit is 'reused' or 'computed', not {kind!r}")
    run = f"{experiment}/{run_hash}"
    jsonlog.append(os.environ.get(env.STORE_USAGE),  # not set: not counted, and the lines never made
                   ({"run": run, kind: key, **({"released": True} if kind == "reused" and key in released else {})}
                    for key in keys))


def report_at_exit() -> None:
    """Where $SVD_STORE_USAGE names a file (a chapter's kernel, `helpers.runner.execute`): add the process's peak
    resident memory to it when it exits. A chapter's first call (`helpers.chapters.start`) asks for it; asked twice,
    it is still written once."""
    path = os.environ.get(env.STORE_USAGE)
    atexit.unregister(_write_peak)
    if path:
        atexit.register(_write_peak, path)


def summary(path: str | os.PathLike) -> dict | None:
    """What the kernel that wrote `path` reused (and from the release) and computed, the runs it used and its peak
    resident memory in MiB (None: no file). A unit computed in the process and read again counts as computed only;
    a line cut off (a kernel stopped mid-write) is skipped."""
    lines = jsonlog.read(path)
    if lines is None:
        return None
    reused, computed, released, runs, peaks = set(), set(), set(), set(), []
    for line in lines:
        if isinstance(line.get("peak_mib"), int):
            peaks.append(line["peak_mib"])
        run = line.get("run")
        if not isinstance(run, str):
            continue
        runs.add(run)
        if isinstance(line.get("computed"), str):
            computed.add((run, line["computed"]))
        elif isinstance(line.get("reused"), str):
            reused.add((run, line["reused"]))
            if line.get("released") is True:
                released.add((run, line["reused"]))
    usage = {"reused": len(reused - computed), "computed": len(computed), "released": len(released - computed),
             "runs": sorted(runs)}
    if peaks:
        usage["peak_mib"] = max(peaks)
    return usage


def _write_peak(path: str) -> None:
    try:
        import resource
    except ImportError:  # not on Windows
        return
    peak_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # KiB on Linux
    jsonlog.append(path, [{"peak_mib": round(peak_kib / 1024)}])

