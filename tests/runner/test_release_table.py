"""The reproducibility page's table of the release's batches is the manifest's (which `read_manifest` checks)."""

from __future__ import annotations

import pytest

from helpers.results.release import Manifest, read_manifest, release_root
from helpers.runner.release_table import batches_markdown, write

EPYC = {"cores": 2, "cpu": "AMD EPYC", "flags": ["avx2", "avx512f", "avx512_bf16", "fma"]}
XEON = {"cores": 2, "cpu": "Intel(R) Xeon(R) Processor", "flags": ["avx2", "fma"]}


def _batch(**changes) -> dict:
    batch = {"added": "2026-12-04T01:52:48+0000", "machine": EPYC, "computed_on": [EPYC], "records": 5,
             "records_by_chapter": {"04_power_sampling": 3, "05_cost": 2},
             "compute_seconds_by_chapter": {"04_power_sampling": 3600.0, "05_cost": 30.0}, "dtypes": {"float32": 5},
             "weights": ["qwen2.5-coder-1.5b: 3432c4bce2694ece", "qwen2.5-coder-1.5b: 3432c4bce2694ece"]}
    return batch | changes


def test_each_batch_is_a_row_from_the_manifest_with_its_total(tmp_path):
    manifest = Manifest(tmp_path, batches={
        "b1": _batch(),
        "b2": _batch(computed_on=[XEON], weights=[], records=1, records_by_chapter={"01_effective_depth": 1},
                     compute_seconds_by_chapter={}, dtypes={"None": 1}, records_without_origin=1),
        "b3": _batch(computed_on=None)})
    rows = [line for line in batches_markdown(manifest).splitlines() if line.startswith("| `b")]
    assert rows[0] == ("| `b1` | 2026-12-04 | AMD EPYC, AVX-512 (BF16) | qwen2.5-coder-1.5b | float32 | "
                       "04: 3, 05: 2 | 04: 60, 05: <1 |")
    assert rows[1] == ("| `b2` | 2026-12-04 | Intel Xeon, AVX2 (* for 1 of its records) | — | — | 01: 1 |  |")  # where
    # it was computed, and where that is not known (the machine that added it, marked)
    assert "| AMD EPYC, AVX-512 (BF16) * |" in rows[2]
    assert "| all 3 batches | | | | | 11 | 2.0 hours |" in batches_markdown(manifest)
    assert batches_markdown(None).startswith("No results release was present")
    assert batches_markdown(Manifest(tmp_path)).startswith("No results release was present")


def test_the_shipped_release_is_written_as_a_table_of_every_batch_that_counts_its_records(tmp_path):
    root = release_root()
    if root is None:
        pytest.skip("no results release here")
    text = write(tmp_path).read_text(encoding="utf-8")
    manifest = read_manifest(root)
    assert [line.split(" | ")[0] for line in text.splitlines() if line.startswith("| `")] == [
        f"| `{name}`" for name in manifest.batches]
    assert f"| all {len(manifest.batches)} batches | | | | | {manifest.records():,} |" in text
