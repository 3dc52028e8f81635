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


def test_throughput_bench_decodes_the_same_work_as_generate(tiny_dir):
    from helpers.bench import bench_throughput

    report = bench_throughput(str(tiny_dir), batch_sizes=(1, 3), max_new_tokens=4, shots=0)
    assert [row["batch"] for row in report["batches"]] == [1, 3]
    for row in report["batches"]:
        assert row["new_tokens"] == row["batch"] * 4
        assert row["decode_tokens_per_second"] > 0 and row["generate_tokens_per_second"] > 0
