"""The results store: long computations append one JSON line per finished unit of work.

A run is identified by its configuration (a dict of everything that changes the numbers); its records
live in `results/<experiment>/<config hash>.jsonl`. Re-running the same configuration reuses the finished
records, an interrupted run resumes where it stopped, and a changed configuration starts a new file.
"""

from __future__ import annotations

import json
import os
import platform
import sys
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from filelock import FileLock, Timeout

from helpers.core import env, pulse
from helpers.core.numbers import counted
from helpers.results import usage
from helpers.results.checkpoints import checkpoint_line, checkpoint_states
from helpers.results.identity import _canonical, config_hash
from helpers.results.kinds import Kind
from helpers.results.origin import origin
from helpers.results.shapes import conforms, shape_sizes
from helpers.results.versions import keyed


def results_root() -> Path:
    """Where results go: $SVD_RESULTS, else `results/` at the top of the repository (in a checkout) or in the
    working folder (an installed package, whose folder is no place for data)."""
    if os.environ.get(env.RESULTS):
        return Path(os.environ[env.RESULTS])
    return (env.REPO if (env.REPO / "_toc.yml").is_file() else Path.cwd()) / "results"


def versions() -> dict[str, str]:
    """Versions that can change numbers: Python, torch, transformers, helpers."""
    import torch
    import transformers

    from helpers import __version__

    return {"python": platform.python_version(), "torch": torch.__version__,
            "transformers": transformers.__version__, "helpers": __version__}


class StoreError(RuntimeError):
    """The results store cannot be read or written where it is; the message says what to do."""


NOT_RELEASED = "not released"  # the outcome a kernel logs when it stops before computing what the release lacks


class NotReleased(StoreError):
    """A build that reads the release as complete (`SVD_RELEASED_ONLY`) met records the release does not hold."""


def released_only() -> bool:
    """Whether this build reads the release as complete: missing records stop it instead of being computed."""
    return os.environ.get(env.RELEASED_ONLY, "").strip() not in ("", "0")


@contextmanager
def reading_release_only(on: bool = True) -> Iterator[None]:
    """`released_only()` while the block runs (with `on`; kernels started meanwhile inherit it), as it was afterwards:
    a published build, or a chapter reading another setting's released records, computes none."""
    before = os.environ.get(env.RELEASED_ONLY)
    if on:
        os.environ[env.RELEASED_ONLY] = "1"
    try:
        yield
    finally:
        if before is None:
            os.environ.pop(env.RELEASED_ONLY, None)
        else:
            os.environ[env.RELEASED_ONLY] = before


class Run:
    """The records of one experiment under one configuration, keyed by unit of work.

    The book's records are opened by their kind, `Run(KIND, config)` (`helpers.results.kinds`), which gives the name
    they are stored under, the version in their key and their shape; a bare name and an optional `shape` serve the
    store's own tests. With a shape (see `conforms`; its `Sized` lengths are read from the configuration), a stored
    result of another shape or length does not count as finished: it is reported, set aside in `aside_path` as soon
    as it is read (or by the process holding the run's lock, before it writes), and its unit computed again.
    """

    def __init__(self, experiment: str | Kind, config: dict, root: Path | None = None, shape: Any = None):
        if isinstance(experiment, Kind):
            if shape is not None:
                raise ValueError(f"a {experiment.name} run takes its shape from its kind; give no shape")
            experiment, shape = experiment.name, experiment.shape_for(config)
        if not experiment or "/" in experiment:
            raise ValueError(f"experiment must be a plain name, got {experiment!r}")
        self.experiment = experiment
        config = keyed(experiment, config)  # the version of the code that computes it, where past 1
        self.config = _canonical(config)
        self.hash = config_hash(config)
        self.path = (root or results_root()) / experiment / f"{self.hash}.jsonl"
        self.shape = shape  # what a stored result must look like (`conforms`); None: anything
        self._sizes = shape_sizes(self.config)
        self._records: dict[str, dict] = {}
        self._lock_depth = 0
        self._lock = None
        self._said: dict[str, int] = {}  # the unusable lines this reader has reported, by what is wrong with them
        self._released = self._load_released()
        self._load()
        if self._bad:
            self._set_aside_now()

    @property
    def released(self) -> frozenset[str]:
        """The keys whose records come from the results release (`helpers.results.release`), never rewritten."""
        return frozenset(self._released)

    def _load_released(self) -> dict[str, dict]:
        """This run's released records, each checked like a stored line; one that fails is reported and computed
        locally instead."""
        from helpers.results.release import released_lines

        released, bad = {}, 0
        self._refused = 0
        for raw in released_lines(self.experiment, self.hash):
            _, record = self._verdict(raw)
            if record is None:
                bad += 1
            else:
                released[record["key"]] = record
        self._refused = bad
        if bad:
            print(f"[store] {counted(bad, 'released record')} of {self.experiment}/{self.hash} cannot be "
                  "used here (unreadable or of another shape); their units are computed locally", file=sys.stderr,
                  flush=True)
        return released

    def _verdict(self, raw: bytes) -> tuple[str, dict | None]:
        """('ok', record), ('other', None) for another configuration's line, or ('unreadable' | 'wrong shape',
        None) for a line that must not count as finished work."""
        try:
            record = json.loads(raw.decode("utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError, RecursionError):
            return "unreadable", None
        if not (isinstance(record, dict) and isinstance(record.get("key"), str) and "result" in record):
            return "unreadable", None
        if record.get("config_hash") != self.hash:
            return "other", None
        if not conforms(record["result"], self.shape, self._sizes):
            return "wrong shape", None
        return "ok", record

    def _load(self) -> None:
        self._records = dict(self._released)
        self._loaded_size = self._size()
        self._bad = 0
        if not self.path.is_file():
            return
        bad = {"unreadable": 0, "wrong shape": 0}
        with self.path.open("rb") as fh:
            for raw in fh:
                if not raw.strip():
                    continue
                if not raw.endswith(b"\n") and self._verdict(raw)[0] == "unreadable":
                    continue  # a last line still being written (or torn, which the lock holder sets aside)
                verdict, record = self._verdict(raw)
                if verdict in bad:
                    bad[verdict] += 1  # that unit is simply redone
                elif record is not None and record["key"] not in self._released:  # a released record wins
                    self._records[record["key"]] = record
        self._bad = sum(bad.values())
        for what, n in bad.items():
            if n and self._said.get(what) != n:  # a reload that finds the same lines says nothing new
                self._said[what] = n
                lines = counted(n, f"{what} line") if what == "unreadable" else \
                    f"{counted(n, 'record')} whose result has the wrong shape or length for {self.experiment}"
                print(f"[store] skipped {lines} of {self.path}; they are moved to {self.aside_path.name} (now, or by "
                      "the process holding this run's lock before it writes), and the units they held are computed "
                      "again", file=sys.stderr, flush=True)

    def _set_aside_now(self) -> None:
        """Set the lines that cannot count aside as soon as they are read, so that they are said once, not by every
        reader: unless another process holds the run's lock (it sets them aside itself before it writes) or the
        folder cannot be written (then every reader skips them, and says so)."""
        try:
            with self.locked(wait=False):
                pass
        except (Timeout, StoreError):
            pass

    @property
    def aside_path(self) -> Path:
        """Where lines that cannot count as finished work are kept (never deleted): `<hash>.jsonl.set-aside`."""
        return self.path.with_name(self.path.name + ".set-aside")

    def _set_aside(self) -> None:
        """Move the unreadable and wrong-shape lines out of the run's file into `aside_path` (lock held)."""
        keep, aside = [], []
        with self.path.open("rb") as fh:
            for raw in fh:
                if raw.strip():
                    (aside if self._verdict(raw)[0] in ("unreadable", "wrong shape") else keep).append(raw)
        if aside:
            with self.aside_path.open("ab") as fh:
                fh.writelines(aside)
                fh.flush()
                os.fsync(fh.fileno())
            tmp = self.path.with_name(f"{self.path.name}.tmp{os.getpid()}")
            with tmp.open("wb") as fh:
                fh.writelines(keep)
                fh.flush()
                os.fsync(fh.fileno())
            os.replace(tmp, self.path)
        self._load()

    def _size(self) -> int:
        return self.path.stat().st_size if self.path.is_file() else 0

    @contextmanager
    def locked(self, wait: bool = True) -> Iterator[None]:
        """Hold this run's lock file, so that two processes never compute or write the same run at once.

        Reentrant within a process. A second process waits, says so on stderr, and then reads what the first
        one wrote, so it computes only what is still missing; without `wait`, `Timeout` is raised instead.
        """
        if self._lock_depth == 0:
            try:
                self.path.parent.mkdir(parents=True, exist_ok=True)
                lock = FileLock(self.path.with_suffix(".lock"))
                try:
                    lock.acquire(timeout=0)
                except Timeout:
                    if not wait:
                        raise
                    print(f"[store] another process is working on {self.experiment}/{self.path.name}; waiting for it "
                          "and then reusing its records", file=sys.stderr, flush=True)
                    lock.acquire()
            except Timeout:  # an OSError too, but no failure to write: the lock is busy and this caller won't wait
                raise
            except OSError as err:
                raise StoreError(f"The results store cannot be written at {self.path.parent} ({err.strerror or err}); "
                                 "set SVD_RESULTS to a folder you can write to.") from None
            try:
                self._repair_tail()  # only a lock holder writes, so an unfinished last line is an interrupted one
            except OSError as err:
                lock.release()
                raise StoreError(f"{self.path} cannot be repaired ({err.strerror or err}); make it writable or move "
                                 "it away (its units are then computed again).") from None
            self._lock = lock
            if self._size() != self._loaded_size:  # another process wrote meanwhile
                self._load()
            if self._bad:
                try:
                    self._set_aside()
                except OSError as err:
                    self._lock = None
                    lock.release()
                    raise StoreError(f"{self.path} holds lines that cannot be used and they cannot be set aside "
                                     f"({err.strerror or err}); make its folder writable.") from None
        self._lock_depth += 1
        try:
            yield
        finally:
            self._lock_depth -= 1
            if self._lock_depth == 0:
                self._lock.release()
                self._lock = None

    def _repair_tail(self) -> None:
        """End a last line that lacks its newline: a whole record gets its newline (it is finished work); a torn
        one (an interruption mid-write) is moved into `aside_path` and cut, so the file stays valid JSONL."""
        if not self.path.is_file():
            return
        with self.path.open("rb+") as fh:
            size = fh.seek(0, os.SEEK_END)
            if size == 0:
                return
            fh.seek(size - 1)
            if fh.read(1) == b"\n":
                return
            end, cut_at = size, 0  # look back, a block at a time, for the newline that ends the last whole line
            while end > 0:
                start = max(0, end - (1 << 16))
                fh.seek(start)
                cut = fh.read(end - start).rfind(b"\n")
                if cut >= 0:
                    cut_at = start + cut + 1
                    break
                end = start
            fh.seek(cut_at)
            tail = fh.read()
            if self._verdict(tail)[0] in ("ok", "other"):  # complete JSON of a record: keep it
                fh.seek(size)
                fh.write(b"\n")
                return
            with self.aside_path.open("ab") as aside:
                aside.write(tail + b"\n")
            fh.truncate(cut_at)

    def __contains__(self, key: str) -> bool:
        return key in self._records

    def __len__(self) -> int:
        return len(self._records)

    def get(self, key: str) -> dict | None:
        """The stored result of unit `key`, or None."""
        record = self._records.get(key)
        if record is None:
            return None
        usage.note("reused", self.experiment, self.hash, [key], self._released)
        return record["result"]

    def get_many(self, keys: Sequence[str]) -> list[dict | None]:
        """The stored results of units `keys` in order (None where missing), counted as one use."""
        found = [k for k in keys if k in self._records]
        usage.note("reused", self.experiment, self.hash, found, self._released)
        return [self._records[k]["result"] if k in self._records else None for k in keys]

    def seconds(self, key: str) -> float | None:
        """The wall time stored with unit `key` (its share of the batch it was computed in), or None."""
        record = self._records.get(key)
        return None if record is None else record.get("seconds")

    def results(self) -> dict[str, Any]:
        """All stored results by key."""
        usage.note("reused", self.experiment, self.hash, self._records, self._released)
        return {k: r["result"] for k, r in self._records.items()}

    def missing(self, keys: Iterable[str]) -> list[str]:
        return [k for k in keys if k not in self._records]

    def add(self, key: str, result: Any, seconds: float, seed: int | None = None) -> None:
        """Append one finished unit at once (flushed and synced), so nothing is lost if the run stops."""
        record = {"key": key, "config_hash": self.hash, "experiment": self.experiment,
                  "model": self.config.get("model"), "seed": seed if seed is not None else self.config.get("seed"),
                  "config": self.config, "versions": versions(), "origin": origin(), "seconds": round(seconds, 4),
                  "time": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "result": _canonical(result)}
        line = json.dumps(record, separators=(",", ":")) + "\n"
        with self.locked():
            try:
                with self.path.open("a", encoding="utf-8") as fh:
                    fh.write(line)
                    fh.flush()
                    os.fsync(fh.fileno())
            except OSError as err:
                raise StoreError(f"{self.path} cannot be written ({err.strerror or err}): it must be a file in a "
                                 "folder you can write to; move what is there away, or set SVD_RESULTS to another "
                                 "folder.") from None
            self._records[key] = record
            self._loaded_size = self._size()
        usage.note("computed", self.experiment, self.hash, [key])

    @property
    def checkpoints_path(self) -> Path:
        """Where the checkpoints of units under way are kept (local, never released): `<hash>.jsonl.checkpoints`."""
        return self.path.with_name(self.path.name + ".checkpoints")

    def save_checkpoint(self, key: str, state: dict) -> None:
        """Append unit `key`'s newest checkpoint (a JSON-able state it can go on from), flushed and synced."""
        line = checkpoint_line(key, self.hash, _canonical(state))
        with self.locked():
            try:
                with self.checkpoints_path.open("ab") as fh:
                    fh.write(line)
                    fh.flush()
                    os.fsync(fh.fileno())
            except OSError as err:
                raise StoreError(f"{self.checkpoints_path} cannot be written ({err.strerror or err}); set SVD_RESULTS "
                                 "to a folder you can write to.") from None
        usage.used(self.experiment, self.hash)  # `release add` carries the checkpoints of the runs a build used

    def checkpoints(self) -> dict[str, dict]:
        """The newest checkpoint of each unit the store does not hold finished, by key: the release's
        (`helpers.results.release.released_checkpoints`), overridden by the local file's, which are newer. Lines
        that are torn (a write cut off) or of another configuration are skipped; the local file is rewritten to its
        own lines that are still of use (removed when none is), so it holds only what a run may still go on from."""
        from helpers.results.release import released_checkpoints

        path = self.checkpoints_path
        released = {k: v for k, v in checkpoint_states(released_checkpoints(self.experiment, self.hash),
                                                       self.hash).items() if k not in self._records}
        if not path.is_file():
            return released
        with self.locked():
            local = {k: v for k, v in checkpoint_states(path.read_bytes().split(b"\n"), self.hash).items()
                     if k not in self._records}
            try:
                if local:
                    tmp = path.with_name(f"{path.name}.tmp{os.getpid()}")
                    with tmp.open("wb") as fh:
                        fh.writelines(checkpoint_line(k, self.hash, state) for k, state in local.items())
                        fh.flush()
                        os.fsync(fh.fileno())
                    os.replace(tmp, path)
                else:
                    path.unlink(missing_ok=True)
            except OSError as err:
                raise StoreError(f"{path} cannot be rewritten ({err.strerror or err}); make its folder writable."
                                 ) from None
        return {**released, **local}

    def refuse_work(self, keys: Iterable[str]) -> None:
        """Where the build reads the release as complete, stop before computing `keys` and say which records are
        missing and why (none of this run released, records refused, or keys the release lacks); else nothing."""
        keys = list(keys)
        if not keys or not released_only():
            return
        model = self.config.get("model") or (self.config.get("full") or {}).get("model")
        if self._refused:
            why = (f"{counted(self._refused, 'released record')} of this run cannot be used here (unreadable, or of "
                   "another shape than the code now stores)")
        elif not self._released:
            why = ("the release holds no record under this key: a setting or the computation's version differs from "
                   "what was released (python -m helpers release status lists what it holds)")
        else:
            why = f"the release holds {counted(len(self._released), 'record')} of this run, not these"
        pulse.outcome(NOT_RELEASED)
        raise NotReleased(
            f"{counted(len(keys), 'record')} of {self.experiment} for {model} ({self.experiment}/{self.hash}, e.g. "
            f"{keys[0]!r}) would be computed, but this build reads the release as complete: {why}. Nothing was "
            "computed. Run with --recompute to compute them (for a published profile, hours), or restore the release "
            "(git checkout release/).")

    def compute(self, key: str, fn: Callable[[], Any], seed: int | None = None) -> Any:
        """Stored result of `key`, computing and storing it first if missing.

        The computation holds the run's lock: a second process on the same run waits for the unit under way,
        then finds it stored (the lock reloads what another process wrote) instead of computing it again.
        """
        if key not in self._records:
            self.refuse_work([key])
            with self.locked():
                if key not in self._records:
                    start = time.perf_counter()
                    result = fn()
                    self.add(key, result, time.perf_counter() - start, seed)
                    return self._records[key]["result"]
        usage.note("reused", self.experiment, self.hash, [key], self._released)
        return self._records[key]["result"]
