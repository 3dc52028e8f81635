"""One home for every environment variable the library reads, and for the repository root.

A leaf module: it imports nothing of the project, so any layer may import it. (The tests' own switches,
SVD_REQUIRE_VLLM, SVD_REQUIRE_BROWSER, SVD_EXPECT_TRANSFORMERS and the like, live with the tests.)
"""

from __future__ import annotations

from pathlib import Path

REPO = Path(__file__).resolve().parents[2]  # the checkout's top (where _toc.yml is), when run from one

RESULTS = "SVD_RESULTS"  # the results store's folder (default: results/ at the top of the checkout)
RELEASE = "SVD_RELEASE"  # the results release's folder (default: release/ in the checkout); "off": none
RELEASED_ONLY = "SVD_RELEASED_ONLY"  # "1": a record the release lacks is an error, not work (published builds)
CACHE = "SVD_CACHE"  # the converted models' folder
STORE_USAGE = "SVD_STORE_USAGE"  # a file: a chapter's kernel writes what it reused and computed, and its peak memory
BOOK_RUN = "SVD_BOOK_RUN"  # "1" in the runner's kernels: the runner has checked the models, the launch cell need not
CHAPTER = "SVD_CHAPTER"  # the chapter a runner's kernel executes: the records it computes say so (their origin)
PULSE = "SVD_PULSE"  # a file: the decode loop appends its progress and sustained rate (helpers.core.pulse)
DEADLINE = "SVD_DEADLINE"  # seconds since the epoch: run --budget's end, past which decoding stops (helpers.core.budget)
BOOK_JOBS = "SVD_BOOK_JOBS"  # chapters a build that reads a complete release executes at once (default 2; 1: in turn)
PROGRESS = "SVD_PROGRESS"  # "0" turns progress bars off (the runner prints each chapter's progress itself)
LIVE_WIDGETS = "SVD_LIVE_WIDGETS"  # "0": explorers print a note instead of live widgets (a static build)
REPOSITORY_URL = "SVD_REPOSITORY_URL"  # the repository the book's buttons link to
REPOSITORY_BRANCH = "SVD_REPOSITORY_BRANCH"  # and its branch
BASE_URL = "SVD_BASE_URL"  # where the book is published (canonical links, the sitemap)
VLLM_LOGZ_DIR = "SVD_VLLM_LOGZ_DIR"  # the folder where vLLM's log-normaliser writes its records, per process
