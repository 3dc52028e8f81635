"""The benchmark's memory probe finds child processes and reads their peak resident memory."""

from __future__ import annotations

import os
import subprocess
import sys

from helpers.bench import _descendants, _peak_rss_kib


def test_descendants_and_peak_memory_of_a_child():
    child = subprocess.Popen([sys.executable, "-c", "x = bytearray(64 * 2**20); import time; time.sleep(3)"])
    try:
        import time

        time.sleep(1.0)
        assert child.pid in _descendants(os.getpid())
        assert _peak_rss_kib(child.pid) > 60 * 1024  # the 64 MiB it allocated
    finally:
        child.kill()
        child.wait()
    assert _peak_rss_kib(child.pid) == 0  # gone
