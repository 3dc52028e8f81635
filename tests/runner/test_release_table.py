"""The reproducibility page's table of the release's batches is the manifest's, and a manifest that does not add up
is named rather than printed."""

from __future__ import annotations

import pytest

from helpers.results.release import Manifest, ReleaseError, read_manifest, release_root
from helpers.runner.release_table import batches_markdown, write

EPYC = {"cores": 2, "cpu": "AMD EPYC", "flags": ["avx2", "avx512f", "avx512_bf16", "fma"]}
XEON = {"cores": 2, "cpu": "Intel(R) Xeon(R) Processor", "flags": ["avx2", "fma"]}


def _batch(**changes) -> dict:
    batch = {"added": "2026-12-04T01:52:48+0000", "machine": EPYC, "records": 5,
             "records_by_chapter": {"04_power_sampling": 3, "05_cost": 2},
             "compute_seconds_by_chapter": {"04_power_sampling": 3600.0, "05_cost": 1800.0},
             "weights": ["qwen2.5-coder-1.5b: 3432c4bce2694ece", "qwen2.5-coder-1.5b: 3432c4bce2694ece"]}
    return batch | changes


def test_each_batch_is_a_row_from_the_manifest_with_its_total(tmp_path):
    manifest = Manifest(tmp_path, batches={"b1": _batch(), "b2": _batch(computed_on=[XEON], weights=[], records=1,
                                                                          records_by_chapter={"01_effective_depth": 1},
                                                                          compute_seconds_by_chapter={})})
    text = batches_markdown(manifest)
    rows = [line for line in text.splitlines() if line.startswith("| `b")]
    assert rows == ["| `b1` | 2026-12-04 | AMD EPYC, AVX-512 (bfloat16) | qwen2.5-coder-1.5b | 04: 3, 05: 2 | "
                    "04: 1.00, 05: 0.50 |",
                    "| `b2` | 2026-12-04 | Intel Xeon, AVX2 | — | 01: 1 |  |"]  # where it was computed, not added
    assert "| all 2 batches | | | | 6 | 1.5 |" in text
    assert batches_markdown(None).startswith("This build read no results release")
    assert batches_markdown(Manifest(tmp_path)).startswith("This build read no results release")


@pytest.mark.parametrize("change, fragment", [
    ({"records": "5"}, "a record count that is not a count"),
    ({"records": 6}, "add up to 5, not its 6"),
    ({"records_by_chapter": {"04_power_sampling": -1, "05_cost": 6}}, "not counts by chapter"),
    ({"compute_seconds_by_chapter": {"04_power_sampling": "an hour"}}, "not seconds"),
    ({"computed_on": "AMD EPYC"}, "of the wrong type"),
])
def test_a_batch_entry_that_does_not_add_up_is_named(tmp_path, change, fragment):
    with pytest.raises(ReleaseError, match=f"batch 'b1' has .*{fragment}.*git checkout release/"):
        batches_markdown(Manifest(tmp_path, batches={"b1": _batch(**change)}))


def test_the_shipped_release_is_written_as_a_table_that_counts_its_records(tmp_path):
    root = release_root()
    if root is None:
        pytest.skip("no results release here")
    text = write(tmp_path).read_text(encoding="utf-8")
    manifest = read_manifest(root)
    assert f"| all {len(manifest.batches)} batches | | | | {manifest.records():,} |" in text
