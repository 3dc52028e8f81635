"""The unit tests once more, on the lowest supported transformers (4.57, laid over the environment by `make`).

`make test` runs this from inside the main session: under pytest-xdist one worker spends most of the session
building the smoke book, and this run uses the core the other worker then leaves idle (`make test-lowest` runs
the same tests on their own).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SELECTION = "not book and not browser and not toy and not once"  # the toy and `once` tests touch nothing version-specific


@pytest.mark.once
def test_the_unit_tests_pass_on_the_lowest_supported_transformers(tmp_path):
    folder, version = os.environ.get("SVD_LOWEST_TRANSFORMERS"), os.environ.get("SVD_LOWEST_VERSION")
    if not folder or not version:
        pytest.skip("SVD_LOWEST_TRANSFORMERS and SVD_LOWEST_VERSION are not set: `make test` sets them (or run "
                    "`make test-lowest`)")
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_XDIST")}
    env |= {"PYTHONPATH": folder, "SVD_EXPECT_TRANSFORMERS": version, "OMP_NUM_THREADS": "1"}
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-m", SELECTION,
                           f"--basetemp={tmp_path / 'lowest'}", "tests"], cwd=REPO, env=env, capture_output=True,
                          text=True)
    summary = proc.stdout.strip().splitlines()[-1:] or ["(no output)"]
    print(f"transformers {version}: {summary[0]}")
    assert proc.returncode == 0, f"on transformers {version}:\n{proc.stdout[-8000:]}\n{proc.stderr[-3000:]}"
