"""Executing one chapter notebook with papermill: the kernel's environment, the cell named on failure, the build's
parameters shown on the page, and the student's copy with them written in.
"""

from __future__ import annotations

import ast
import contextlib
import os
import sys
import time
from collections.abc import Iterator
from pathlib import Path

from helpers.core import env, jsonlog
from helpers.core.budget import SPENT, BudgetSpent
from helpers.core.pulse import read_outcome
from helpers.results import usage
from helpers.results.store import NOT_RELEASED
from helpers.runner.profiles import CHAPTERS, NOTEBOOKS, Job, RunError


def _error_cell(nb_path: Path) -> str:
    """A short description of the cell that raised in an executed notebook."""
    import nbformat

    nb = nbformat.read(nb_path, as_version=4)
    for cell in nb.cells:
        for out in cell.get("outputs", []):
            if out.get("output_type") == "error":
                first = cell.source.strip().splitlines()[:1]
                return (f"cell [{cell.get('execution_count')}] ({first[0][:60] if first else ''}...): "
                        f"{out.get('ename')}: {out.get('evalue')}")
    return "an unknown cell"


def stderr_cells(nb_path: Path) -> list[str]:
    """Cells of an executed notebook that wrote to stderr (each as 'cell [n]: first line of the text')."""
    import nbformat

    nb = nbformat.read(nb_path, as_version=4)
    found = []
    for cell in nb.cells:
        for out in cell.get("outputs", []):
            if out.get("output_type") == "stream" and out.get("name") == "stderr":
                found.append(f"cell [{cell.get('execution_count')}]: {out.get('text', '').strip()[:160]}")
    return found


def parameters_as_run(defaults_source: str, values: dict, profile: str | None) -> str:
    """The parameters cell's source with `values` in place of its literal defaults (comments kept): what a
    reader of the page should see, since a chapter ran with these and not with the notebook's smoke defaults."""
    lines = defaults_source.splitlines()
    assigned = [node for node in ast.parse(defaults_source).body if isinstance(node, ast.Assign)
                and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name) and node.targets[0].id in values]
    for node in reversed(assigned):  # bottom up, so that a literal over several lines shrinking to one moves nothing
        first, last = node.value.lineno - 1, node.value.end_lineno - 1  # above it
        lines[first:last + 1] = [lines[first][:node.value.col_offset] + repr(values[node.targets[0].id])
                                 + lines[last][node.value.end_col_offset:]]
    body = [line for line in lines if not line.startswith("# Parameters")]
    head = f"# Parameters this page ran with (profile {profile!r})." if profile else "# Parameters this page ran with."
    return "\n".join([head, *body])


def _show_build_parameters(nb_path: Path, values: dict) -> None:
    """On the page, the parameters the chapter ran with: papermill's injected cell shows the whole set (defaults
    merged with the profile's values), and the notebook's own cell of smoke defaults is left out of the page."""
    import nbformat

    nb = nbformat.read(nb_path, as_version=4)
    own = next((c for c in nb.cells if "parameters" in c.metadata.get("tags", [])), None)
    injected = next((c for c in nb.cells if "injected-parameters" in c.metadata.get("tags", [])), None)
    if own is None or injected is None:  # no injected cell: the notebook's own cell is what ran
        return
    injected.source = parameters_as_run(own.source, values, values.get("profile"))
    injected.metadata["tags"] = [t for t in injected.metadata.get("tags", []) if t != "hide-input"]
    own.metadata["tags"] = [*own.metadata.get("tags", []), "remove-cell"]
    nbformat.write(nb, nb_path)


# The kernel logs a warning about unencrypted local TCP at every start; it runs on this machine only, and
# real kernel errors still show at ERROR.
KERNEL_ARGUMENTS = ["--IPKernelApp.log_level=ERROR"]


def _progress(stem: str) -> dict:
    """papermill's progress bar as one line per chapter: cells done out of total, and the time so far."""
    return {"desc": f"[run] {stem}", "file": sys.stdout, "mininterval": 2.0, "ascii": True,
            "bar_format": "{desc}: cell {n_fmt}/{total_fmt}, {elapsed} elapsed"}


@contextlib.contextmanager
def environment(values: dict[str, str]) -> Iterator[None]:
    """Set environment variables for the block (a kernel started inside inherits them), then restore them."""
    previous = {name: os.environ.get(name) for name in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for name, value in previous.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def pulse_log(out_root: Path, stem: str) -> Path:
    """Where a chapter's decode loop logs its progress and sustained rate (`helpers.core.pulse`), kept after the run."""
    return out_root / "_build" / "pulse" / f"{stem}.jsonl"


class _Watch:
    """Prints a chapter's progress from its pulse log every `every` seconds: records done of total, tokens/s, rows
    in flight, an ETA."""

    def __init__(self, stem: str, log: Path, every: float = 30.0):
        import threading

        self.stem, self.log, self.every = stem, log, every
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._loop, daemon=True)

    def __enter__(self) -> _Watch:
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop.set()
        self.thread.join(timeout=5)

    def _loop(self) -> None:
        shown = None
        while not self.stop.wait(self.every):
            line = progress_line(self.stem, self.log)
            if line and line != shown:  # a new entry of the log (each minute, and as records finish)
                print("\n" + line, flush=True)
                shown = line


def progress_line(stem: str, log: Path) -> str | None:
    """One line of a chapter's progress from the last entry of its pulse log that counts records (None before there
    is one; an outcome line counts none, nor does a decode's that stores no records, such as a timing's)."""
    for last in reversed(jsonlog.read(log) or []):
        try:
            done, total, elapsed = int(last["done"]), int(last["total"]), float(last["elapsed"])
        except (ValueError, KeyError, TypeError):
            continue
        if total > 0:
            break
    else:
        return None
    width = 20
    filled = round(width * done / total)
    eta = "?" if not done or done >= total else time.strftime("%H:%M:%S", time.gmtime(elapsed / done * (total - done)))
    return (f"[run] {stem}: {last.get('what') or 'decode'} [{'#' * filled}{'.' * (width - filled)}] {done}/{total} "
            f"records, {last.get('tokens_per_s', 0):.1f} tokens/s ({last.get('mean_tokens_per_s', 0):.1f} since the "
            f"decode began), {last.get('rows', 0)} rows in flight, ETA {eta}")


def _timed_out(exc: BaseException) -> bool:
    """Whether papermill stopped a cell for its time limit (nbclient's `CellTimeoutError`, a `TimeoutError`, wrapped
    or not)."""
    seen = 0
    while exc is not None and seen < 10:
        if isinstance(exc, TimeoutError):
            return True
        exc, seen = exc.__cause__ or exc.__context__, seen + 1
    return False


GRACE = 300.0  # seconds past a budget's deadline before a cell that does not decode is stopped from outside


def execute(job: Job, out_root: Path, timeout: float | None, strict: bool = False, deadline: float | None = None
            ) -> None:
    """Run one notebook with papermill into out_root/book/chapters/. With `deadline` (`run --budget`'s end, seconds
    since the epoch), the decode loop stops itself there and logs that as its outcome (`helpers.core.budget`), and a
    cell still running `GRACE` seconds later is stopped from outside; either raises `BudgetSpent`, with every
    finished record stored and every MH chain under way checkpointed at its last finished block."""
    import papermill
    from papermill.exceptions import PapermillExecutionError

    target = out_root / CHAPTERS / f"{job.stem}.ipynb"
    target.parent.mkdir(parents=True, exist_ok=True)
    start = time.perf_counter()
    usage_log = target.with_suffix(".usage.jsonl")
    usage_log.unlink(missing_ok=True)
    log = pulse_log(out_root, job.stem)
    log.parent.mkdir(parents=True, exist_ok=True)
    log.unlink(missing_ok=True)
    # The kernel inherits these: explorers print a note, not widgets (helpers.plots.widgets); no tqdm bar is drawn,
    # for it would stay in the page as a stale widget (helpers.core.progress); the kernel counts the stored records
    # it reuses and computes into `usage_log`, and logs its decoding's progress to `log`; the launch cell
    # (helpers.runner.launch) has nothing to do; the records it computes name the chapter (helpers.results.origin).
    kernel_env = {env.LIVE_WIDGETS: "0", env.PROGRESS: "0", env.STORE_USAGE: str(usage_log), env.BOOK_RUN: "1",
                  env.PULSE: str(log), env.CHAPTER: job.stem}
    if deadline is not None:
        kernel_env[env.DEADLINE] = str(deadline)
        left = deadline - time.time() + GRACE
        timeout = left if timeout is None else min(timeout, left)
    try:
        with environment(kernel_env), _Watch(job.stem, log):
            papermill.execute_notebook(str(job.source), str(target), parameters=job.parameters,
                                       kernel_name="python3", cwd=str(NOTEBOOKS), progress_bar=_progress(job.stem),
                                       execution_timeout=None if timeout is None else max(1, int(timeout)),
                                       log_output=False, extra_arguments=KERNEL_ARGUMENTS)
    except PapermillExecutionError as exc:
        job.seconds = time.perf_counter() - start
        outcome = read_outcome(log)
        if outcome == SPENT:  # the decode loop stopped at the deadline and logged it
            _read_usage(job, usage_log)  # the kernel has exited: what it reused and computed, for the run configuration
            raise BudgetSpent(f"the budget ran out in {job.stem} after {job.seconds:.0f} s") from None
        if outcome == NOT_RELEASED:  # a published build met records the release lacks: said, not a traceback
            raise RunError(f"{job.stem} stopped before computing anything: {exc.evalue}") from None
        raise RunError(f"{job.stem} failed in cell [{exc.exec_count}]: {exc.ename}: {exc.evalue}\n"
                       f"The executed notebook with the error is {target}.") from None
    except Exception as exc:
        job.seconds = time.perf_counter() - start
        if deadline is not None and _timed_out(exc):
            raise BudgetSpent(f"the budget ran out in {job.stem} after {job.seconds:.0f} s") from None
        detail = _error_cell(target) if target.is_file() else str(exc)
        raise RunError(f"{job.stem} could not be executed ({type(exc).__name__}): {detail}") from None
    job.seconds = time.perf_counter() - start
    write_student_notebook(job, out_root)
    _read_usage(job, usage_log)
    _show_build_parameters(target, job.parameters)
    noisy = stderr_cells(target)
    if noisy:
        message = f"{job.stem} wrote to stderr in " + "; ".join(noisy)
        if strict:
            raise RunError(message)
        print("warning: " + message, file=sys.stderr)


def _read_usage(job: Job, usage_log: Path) -> None:
    """What the chapter's kernel reused and computed, and its peak memory (`helpers.results.usage`), into
    `job.records`."""
    job.records = usage.summary(usage_log)
    usage_log.unlink(missing_ok=True)


DOWNLOADS = "downloads"  # beside the executed chapters: the notebooks as a student runs them


def write_student_notebook(job: Job, out_root: Path) -> Path:
    """The chapter's source notebook with this run's parameters written in (papermill's injected cell) and no
    outputs: what the chapter's download link gives a student to run."""
    import nbformat
    from papermill.iorw import load_notebook_node
    from papermill.parameterize import parameterize_notebook

    nb = parameterize_notebook(load_notebook_node(str(job.source)), job.parameters, kernel_name="python3",
                               language="python")
    for cell in nb.cells:  # papermill's own bookkeeping, not the student's
        cell.metadata.pop("papermill", None)
    nb.metadata.pop("papermill", None)
    target = out_root / CHAPTERS / DOWNLOADS / f"{job.stem}.ipynb"
    target.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(nb, target)
    return target
