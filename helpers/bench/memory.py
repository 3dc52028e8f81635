"""Chapter 01 from an empty results store, timed, with the peak resident memory of every process it starts
(`python -m helpers bench effective-depth`)."""

from __future__ import annotations

import time

from helpers.bench.common import machine
from helpers.core import env


def descendants(root: int) -> list[int]:
    """Process ids below `root` (psutil: Linux, macOS and Windows alike)."""
    import psutil

    try:
        return [child.pid for child in psutil.Process(root).children(recursive=True)]
    except psutil.Error:
        return []


def peak_rss_kib(pid: int) -> int:
    """A process's peak resident memory where the system keeps it (Linux VmHWM, Windows peak working set),
    else its resident memory now (sampled once a second, the largest sample is the peak)."""
    import psutil

    try:
        with open(f"/proc/{pid}/status") as fh:
            return next((int(line.split()[1]) for line in fh if line.startswith("VmHWM:")), 0)
    except OSError:
        pass
    try:
        memory = psutil.Process(pid).memory_info()
    except psutil.Error:
        return 0
    return int(getattr(memory, "peak_wset", memory.rss)) // 1024


def bench_effective_depth(profile: str = "default", minutes_target: float = 10.0, gib_target: float = 4.0) -> dict:
    """Chapter 01 under `profile` from an empty results store: wall time and the kernel's peak resident memory.

    The chapter runs in a Jupyter kernel (a child process); a thread samples the peak RSS (VmHWM) of every
    descendant process once a second, so the number is the largest any one process reached.
    """
    import os
    import tempfile
    import threading
    from pathlib import Path

    from helpers.runner.execute import environment
    from helpers.runner.run import run

    peak = {"kib": 0}
    stop = threading.Event()

    def watch() -> None:
        while not stop.is_set():
            for pid in descendants(os.getpid()):
                peak["kib"] = max(peak["kib"], peak_rss_kib(pid))
            stop.wait(1.0)

    with tempfile.TemporaryDirectory() as tmp, environment({env.RESULTS: str(Path(tmp) / "results")}):
        thread = threading.Thread(target=watch, daemon=True)
        thread.start()
        start = time.perf_counter()
        try:
            run(profile, {}, only="01_effective_depth", out_root=Path(tmp) / "out", build=False)
        finally:
            seconds = time.perf_counter() - start
            stop.set()
            thread.join()
    try:
        import resource  # POSIX: the peak of waited-for children (KiB on Linux), catching what sampling missed

        children = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    except ImportError:
        children = 0
    gib = max(peak["kib"], children) / 2**20
    return {"chapter": "01_effective_depth", "profile": profile, "results_store": "empty (fresh temporary folder)",
            "machine": machine(), "seconds": round(seconds, 1),
            "minutes": round(seconds / 60, 2), "minutes_target": minutes_target, "within_time": seconds / 60 < minutes_target,
            "peak_rss_gib": round(gib, 2), "peak_rss_target_gib": gib_target, "within_memory": gib < gib_target}
