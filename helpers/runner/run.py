"""The book runner: execute the chapters with papermill under a profile, then build the book.

profile YAML → checked against each notebook's `parameters` cell → papermill (kernel python3, working
directory notebooks/) writes executed copies to book/chapters/ → jupyter-book build -W --keep-going.
Any failure stops the run with the notebook and cell named.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

from helpers.core import env
from helpers.core.budget import BudgetSpent
from helpers.results.store import reading_release_only
from helpers.runner import front, glued, release_table, weights
from helpers.runner.book import build_book, prepare_root, source_repository
from helpers.runner.execute import execute, progress_line, pulse_log
from helpers.runner.installs import check_models, model_cache
from helpers.runner.params import check_engines
from helpers.runner.pdf import build_pdf
from helpers.runner.planning import job_models, plan
from helpers.runner.profiles import CHAPTERS, Job, RunError, load_profile, times_the_machine, toc_chapters
from helpers.runner.run_config import previous_chapters, time_table, write_run_config
from helpers.runner.typed_numbers import check_build


def writable(folder: Path, what: str) -> None:
    """Create `folder` if needed and prove a file can be written there, before any chapter runs."""
    import tempfile

    try:
        folder.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=folder, prefix=".write-test-"):
            pass
    except OSError as err:
        raise RunError(f"{what}: cannot write into {folder} ({err.strerror or err}); choose a folder you can write "
                       "to.") from None


def run(profile: str, overrides: dict | None = None, only: str | None = None, out_root: Path = env.REPO,
        build: bool = True, strict: bool = False, budget: float | None = None, recompute: bool = False
        ) -> Path | None:
    """Execute the profile's chapters and build the book; returns the path of index.html.

    With `budget` (seconds), the run stops when it is spent: the decode under way stops itself, every finished
    record stored (and each MH chain under way checkpointed at its last finished block), and `BudgetSpent` says how
    far the run got; the same call again goes on from there. A profile marked `released: true` is read from the
    results release as complete: a record that neither the release nor the local store holds stops the run before
    it is computed (`helpers.results.store.NotReleased`), unless `recompute`."""
    jobs = plan(profile, overrides, only)  # the checkout, the profile and every parameter, before anything else
    guarded = bool(load_profile(profile).get("released")) and not recompute
    if guarded:
        _check_release(profile)
    with reading_release_only(guarded):
        return _run(profile, jobs, out_root, build, strict, budget, at_once=book_jobs() if guarded else 1)


def _execute_together(profile: str, jobs: list[Job], out_root: Path, timeout: float | None, strict: bool,
                      at_once: int) -> None:
    """Execute `jobs` `at_once` at a time, each in a process of its own (a kernel's environment is its process's)
    with its share of the cores as its threads, in book order as workers free up; then, one at a time with every
    core, the chapters that time something (their notebooks say so: `times_the_machine`), whose measurements another chapter beside them would
    slow. Each job comes back with its time and what its kernel reused; the first failure stops the rest and is
    raised as `execute` raised it."""
    import concurrent.futures
    import multiprocessing

    alone = [i for i, job in enumerate(jobs) if times_the_machine(job.stem)]
    together = [i for i in range(len(jobs)) if i not in alone]
    print(f"[run] {len(together)} chapters ({profile}), {at_once} at a time: the build reads a complete release and "
          f"computes nothing ({env.BOOK_JOBS}=1 runs them in turn)" + (f"; then {', '.join(jobs[i].stem for i in alone)}"
                                                                       " alone, which times the models" if alone else ""),
          flush=True)
    threads = max(1, (os.cpu_count() or 1) // at_once)
    context = multiprocessing.get_context("spawn")
    with concurrent.futures.ProcessPoolExecutor(max_workers=at_once, mp_context=context) as pool:
        futures = {pool.submit(_execute_one, jobs[i], out_root, timeout, strict, threads): i for i in together}
        for future in concurrent.futures.as_completed(futures):
            try:
                done = future.result()
            except BaseException:
                for other in futures:
                    other.cancel()
                raise
            jobs[futures[future]].seconds, jobs[futures[future]].records = done.seconds, done.records
            print(f"[run] {done.stem} done in {done.seconds:.0f} s", flush=True)
    for i in alone:
        print(f"[run] {jobs[i].stem} ({profile}) ...", flush=True)
        execute(jobs[i], out_root, timeout, strict)
        print(f"[run] {jobs[i].stem} done in {jobs[i].seconds:.0f} s", flush=True)


def _execute_one(job: Job, out_root: Path, timeout: float | None, strict: bool, threads: int) -> Job:
    """`execute` in a worker process whose kernel takes `threads` threads (torch and the BLAS read these when they
    start): the job, with its time and usage filled in."""
    for name in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
        os.environ[name] = str(threads)
    print(f"[run] {job.stem} ...", flush=True)
    execute(job, out_root, timeout, strict)
    return job


def _check_release(profile: str) -> None:
    """A profile read from the results release needs one: a missing release is said first, before any chapter looks
    for a record it would have held and blames whatever it misses first (a critical depth, a decode)."""
    from helpers.results.release import MANIFEST, release_folder, release_off, release_root

    if release_off() or release_root() is not None:
        return
    raise RunError(f"Profile {profile!r} is read from the results release, but there is none at {release_folder()} (no "
                   f"{MANIFEST}): restore it (git checkout release/), point {env.RELEASE} at a release folder, or "
                   "compute every record with --recompute (hours for the full profile).")


def book_jobs() -> int:
    """How many chapters a build that reads a complete release executes at once: $SVD_BOOK_JOBS, else 2 where the
    machine has two cores or more. Such a build computes nothing, so its chapters depend on none of each other and
    spend most of their time in one thread (starting a kernel, reading records, drawing figures); a build that
    computes runs them in turn, each with every core."""
    raw = os.environ.get(env.BOOK_JOBS, "").strip()
    if not raw:
        return 2 if (os.cpu_count() or 1) >= 2 else 1
    if not raw.isdigit() or not 1 <= int(raw) <= 16:
        raise RunError(f"{env.BOOK_JOBS} must be a number of chapters from 1 to 16, got {raw!r}")
    return int(raw)


def _run(profile: str, jobs: list[Job], out_root: Path, build: bool, strict: bool, budget: float | None,
         at_once: int = 1) -> Path | None:
    if budget is not None and not (isinstance(budget, int | float) and 0 < budget < float("inf")):
        raise RunError(f"the budget must be a positive time, got {budget!r}")
    deadline = None if budget is None else time.time() + budget
    check_models(jobs)
    check_engines(jobs)
    timeout = load_profile(profile).get("timeout")
    from helpers.results.store import results_root

    writable(out_root / CHAPTERS, "--out")
    writable(results_root(), "SVD_RESULTS (the results store)")
    writable(model_cache(), "SVD_CACHE (the converted models)")
    repo = source_repository() if build else None
    previous_chapters(out_root / CHAPTERS / "run_config.json", say=True)  # said now, not after the chapters ran
    prepare_root(out_root)
    together = at_once > 1 and len(jobs) > 1 and deadline is None
    if together:
        _execute_together(profile, jobs, out_root, timeout, strict, at_once)
    for i, job in enumerate([] if together else jobs):
        if deadline is not None and time.time() >= deadline:
            raise BudgetSpent(f"the budget was spent before {job.stem}; chapters not run: "
                              + ", ".join(j.stem for j in jobs[i:]))
        print(f"[run] {job.stem} ({profile}) ...", flush=True)
        try:
            execute(job, out_root, timeout, strict, deadline)
        except BudgetSpent as spent:
            write_run_config(out_root, profile, jobs[:i + 1])  # which runs each chapter used, for `release add`
            line = progress_line(job.stem, pulse_log(out_root, job.stem))
            raise BudgetSpent(f"{spent}; " + (line.removeprefix("[run] ") if line else "no decode had begun")
                              + ("; chapters not run: " + ", ".join(j.stem for j in jobs[i + 1:]) if jobs[i + 1:]
                                 else "")) from None
        print(f"[run] {job.stem} done in {job.seconds:.0f} s", flush=True)
    print(time_table(jobs), flush=True)
    info = write_run_config(out_root, profile, jobs)
    rows = glued.write(out_root / CHAPTERS, toc_chapters(out_root))
    if typed := check_build(out_root / CHAPTERS, env.REPO / "book", rows):
        print(f"[run] {len(typed)} numbers typed into the pages equal values this build computes (glue them instead; "
              f"the list is in {out_root / CHAPTERS / 'typed_numbers.md'})", flush=True)
    front.write(out_root / CHAPTERS, rows, profile, info["commit"], info["date"])
    weights.write(out_root / CHAPTERS, job_models(plan(profile)))  # every model of the profile, whatever --only ran
    release_table.write(out_root / CHAPTERS)
    if not build:
        return None
    missing = [s for s in toc_chapters(out_root) if not (out_root / CHAPTERS / f"{s}.ipynb").is_file()]
    if missing and load_profile(profile).get("chapters"):
        print(f"[run] profile {profile!r} covers {', '.join(j.stem for j in jobs)} only; the executed notebooks are "
              f"in {out_root / CHAPTERS}. Chapters {missing} do not exist there, so no book was built.")
        return None
    if missing:
        raise RunError(f"Cannot build the book: chapters {missing} have not been executed yet. Run the whole "
                       f"profile once (python -m helpers run --profile {profile}) before using --only.")
    print("[run] building the book ...", flush=True)
    index = build_book(out_root, repo)
    start = time.perf_counter()
    pdf = build_pdf(out_root, repo)
    if pdf is not None:
        print(f"[run] PDF ready: {pdf} ({pdf.stat().st_size / 1e6:.1f} MB, {time.perf_counter() - start:.0f} s)")
    print(f"[run] book ready: {index}" + (f" (buttons link to {repo.url}, branch {repo.branch})" if repo else
                                          " (no repository buttons: set SVD_REPOSITORY_URL to add them)"))
    return index
