"""Shared fixtures: tiny random Llama, Qwen2 and Gemma 3 models saved to disk, and the embedded model."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import torch

from helpers.models.tiny import ARCHITECTURES, make_tiny

os.environ.setdefault("HF_HUB_OFFLINE", "1")
# A test session never writes into the user's results store: whatever a test computes without a root of its own goes
# to a folder of this session (tests that test the store's location set SVD_RESULTS themselves).
os.environ["SVD_RESULTS"] = os.path.join(__import__("tempfile").mkdtemp(prefix="svd-test-results-"), "results")
if os.environ.get("PYTEST_XDIST_WORKER"):
    # Two workers share the machine: one thread per test process, or their spinning thread pools take the cores
    # from each other. The book's notebook kernels get one thread too (`built_book`).
    torch.set_num_threads(1)

def tiny_problems():
    """Two problems in the tiny tokenizer's words, for pipelines run end to end on the tiny models."""
    from helpers.data.problems import Problem

    return [Problem(id="p0", question="Ada has 3 apples .", answer="3", level=1),
            Problem(id="p1", question="0 1 2 3 + 4", answer="7", level=2)]


@pytest.fixture(scope="session", params=list(ARCHITECTURES))
def tiny_dir(request, tmp_path_factory) -> Path:
    return make_tiny(request.param, tmp_path_factory.mktemp(f"tiny-{request.param}"))


# Where the tiny models run: the CPU, or the device SVD_TEST_DEVICE names ("cuda", "cuda:1"), so that the same
# invariants are checked on a GPU machine. A device that is not there stops the session before any test runs, rather
# than testing the CPU under another name.
TEST_DEVICE = os.environ.get("SVD_TEST_DEVICE", "").strip() or "cpu"


def pytest_configure(config) -> None:
    try:
        torch.empty(0, device=TEST_DEVICE)
    except (RuntimeError, AssertionError) as err:  # a bad name, a missing device, a torch built without it
        raise pytest.UsageError(f"SVD_TEST_DEVICE={TEST_DEVICE!r} names no device this torch can use ({err}); "
                                "unset it to test on the CPU") from None


# The unit tests' invariants (batch-independence, cache reuse, ...) hold to float32's last bits: their models
# are float32 on every machine. bfloat16 has tests of its own (test_precision.py).
@pytest.fixture(scope="session")
def tiny(tiny_dir):
    from helpers.models.loading import load_model

    return load_model(str(tiny_dir), device=TEST_DEVICE, dtype="float32")


@pytest.fixture(scope="session")
def smol():
    from helpers.models.loading import load_model

    return load_model("smollm2-135m", device="cpu", dtype="float32")


BOOK_REPOSITORY = "https://github.com/example-org/search-versus-depth"  # a stand-in: links are checked as paths


@pytest.fixture(scope="session")
def built_book(tmp_path_factory):
    """The smoke book, computed afresh and built strictly once per session: (output root, index.html)."""
    from helpers.runner.run import run

    out = tmp_path_factory.mktemp("book")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("SVD_RESULTS", str(out / "results"))  # compute everything afresh
        mp.setenv("SVD_REPOSITORY_URL", BOOK_REPOSITORY)  # the pages get repository, edit and launch buttons
        mp.setenv("SVD_REPOSITORY_BRANCH", "main")
        if os.environ.get("PYTEST_XDIST_WORKER"):  # a core for the book, the other for the unit tests: the book's
            mp.setenv("OMP_NUM_THREADS", "1")  # kernels lose little on one thread, and the unit tests gain a core
        index = run("smoke", out_root=out, strict=True)
    return out, index



BOOK_FILES = ("tests/book/test_book.py", "tests/book/test_browser.py")


ENVIRONMENTS = "tests/test_environments.py"
# Both halves of the lowest-transformers suite run on the book's worker after the book, vLLM's suite on the unit
# tests' worker. Measured by a fresh clone's make test on 2 cores: the book and its tests about 380 s, the unit tests
# about 250 s, vLLM's suite 221 s in one process (split in two processes, 134 + 127 s: its start-up twice), each half
# of the lowest-transformers suite 41-86 s; vLLM's environment, installed beside the session, was ready 311-353 s
# after it began, so make test now starts that install before its own.
AFTER_THE_BOOK = f"{ENVIRONMENTS}::test_the_unit_tests_pass_on_the_lowest_supported_transformers"


def pytest_collection_modifyitems(config, items):
    """The built book's tests first, so that under pytest-xdist the longest work starts at once; the suites of the
    other environments last, for whichever worker is free first (tests/test_environments.py)."""
    book = [item for item in items if item.nodeid.startswith(BOOK_FILES)]
    last = [item for item in items if item.nodeid.startswith(ENVIRONMENTS)]
    items[:] = book + [item for item in items if item not in book and item not in last] + last


_YIELDED = []


def pytest_runtest_setup(item):
    """Under pytest-xdist a worker that runs unit tests lowers its priority (once): the book's worker, whose
    notebook kernels are the session's longest work, gets the cores first and the unit tests fill the gaps."""
    if os.environ.get("PYTEST_XDIST_WORKER") and not item.nodeid.startswith(BOOK_FILES) and not _YIELDED:
        if hasattr(os, "nice"):
            os.nice(10)
        _YIELDED.append(True)


def pytest_xdist_make_scheduler(config, log):
    """Under pytest-xdist (`make test` runs two workers): every test of the built book in one worker, so that the
    session's book is built once, then `AFTER_THE_BOOK`; each other test on whichever worker is free. (xdist's own
    `loadgroup` does not group on pytest 9.)"""
    from xdist.scheduler import LoadScopeScheduling

    class BookTogether(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return "book" if nodeid.startswith(BOOK_FILES) or nodeid.startswith(AFTER_THE_BOOK) else nodeid

    return BookTogether(config, log)
