"""The unit tests in make test's two other environments, inside its one pytest session: on the lowest supported
transformers (an overlay on this environment's packages) and in vLLM's own environment (.venv-vllm).

They are the session's last tests, split so that the two pytest-xdist workers end together: the worker of the
smoke book takes both halves of the lowest-transformers suite after the book (tests/conftest.py), the worker of the
unit tests vLLM's suite, whose environment `make test` began installing before everything else, and no second
pass runs after the session. `make test` names the environments
(SVD_LOWEST_TRANSFORMERS, SVD_VLLM_ENV); a plain `pytest` skips these tests and `make test-lowest` or
`make test-vllm` runs the same suites on their own.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

LOWEST = os.environ.get("SVD_LOWEST_TRANSFORMERS")  # "<overlay folder>=<its transformers version>"
VLLM = os.environ.get("SVD_VLLM_ENV")  # vLLM's environment folder: it is installed while the session runs
TESTS = Path(__file__).parent
PARTS = 2  # the lowest-transformers suite in two parts, so both workers can take one when they are free
INSTALL_WAIT = 1800  # seconds to wait for vLLM's environment to finish installing
UNIT = "not book and not browser and not toy and not once and not environments"

pytestmark = pytest.mark.environments


def _pytest(python: str, args: list[str], env: dict[str, str]) -> None:
    """Run pytest in a fresh process (no xdist worker of its own, one thread: it shares the machine with the
    session) and fail with the end of its output when it fails."""
    env = {k: v for k, v in env.items() if not k.startswith("PYTEST_")}
    env.update(OMP_NUM_THREADS="1", PYTHONDONTWRITEBYTECODE="1")
    done = subprocess.run([python, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-n", "0", *args],
                          cwd=TESTS.parent, env=env, capture_output=True, text=True)
    if done.returncode != 0:
        pytest.fail(f"pytest {' '.join(args)} exited with {done.returncode}:\n{(done.stdout + done.stderr)[-6000:]}",
                    pytrace=False)


def unit_files() -> list[str]:
    """The test files of the unit tests, by name (the book's and these are not unit tests)."""
    book = {"test_book.py", "test_browser.py", Path(__file__).name}
    return sorted(str(p.relative_to(TESTS.parent)) for p in TESTS.rglob("test_*.py") if p.name not in book)


@pytest.mark.parametrize("part", range(PARTS))
def test_the_unit_tests_pass_on_the_lowest_supported_transformers(part):
    if not LOWEST:
        pytest.skip("make test runs this: SVD_LOWEST_TRANSFORMERS names the overlay of the lowest transformers")
    folder, _, version = LOWEST.rpartition("=")
    _pytest(sys.executable, ["-m", UNIT, *unit_files()[part::PARTS]],
            {**os.environ, "PYTHONPATH": folder, "SVD_EXPECT_TRANSFORMERS": version})


def test_the_vllm_engine_tests_pass_in_vllms_environment():
    if not VLLM:
        pytest.skip("make test runs this: SVD_VLLM_ENV names vLLM's environment")
    venv = Path(VLLM)
    deadline = time.monotonic() + INSTALL_WAIT
    while not (venv / ".ready").is_file():  # make test writes it when its make vllm-env has ended
        if (venv / ".install-failed").is_file() or time.monotonic() > deadline:
            log = Path(f"{venv}.log")  # where make test writes the install's output
            tail = log.read_text(errors="replace")[-3000:] if log.is_file() else "(no log)"
            pytest.fail(f"vLLM's environment {venv} was not installed:\n{tail}", pytrace=False)
        time.sleep(2)
    _pytest(str(venv / "bin" / "python"), ["-m", "vllm", "tests/engines/test_vllm_engine.py"],
            {**os.environ, "SVD_REQUIRE_VLLM": "1"})


def test_the_parts_cover_every_unit_test_file_once():
    parts = [unit_files()[part::PARTS] for part in range(PARTS)]
    assert sorted(f for part in parts for f in part) == unit_files() and all(parts)
    assert "tests/engines/test_decoding.py" in unit_files() and "tests/book/test_book.py" not in unit_files()


def test_the_tests_after_the_book_exist():
    from conftest import AFTER_THE_BOOK

    path, _, name = AFTER_THE_BOOK.partition("::")
    assert path == f"tests/{Path(__file__).name}" and callable(globals().get(name))
