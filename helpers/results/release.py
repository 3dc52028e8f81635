"""The results release: the published profiles' records, shipped in the repository and checked before use.

A build's expensive part is its records; rendering them is cheap. So the records of the published profiles live in
a tracked folder, `release/`, in the store's own line format (gzip-compressed JSONL), beside a manifest:

    release/manifest.json
    release/records/<experiment>/<config hash>.<batch>.jsonl.gz
    release/checkpoints/<experiment>/<config hash>.<digest>.jsonl.gz

The manifest lists every file with its sha256 and record count, and every batch (one `release add`) with the commit
and machine that computed it, the library versions, the weights fingerprints and number formats, and the compute
seconds and record counts per chapter. The store (`helpers.results.store.Run`) reads a run's released records before
its local ones; a file whose bytes do not match the manifest is refused with a message, never read. A released
record is never rewritten: a batch only adds files, and a changed configuration is a new key. The checkpoints of
MH chains still under way when a batch was added travel beside the records (listed under the manifest's
`checkpoints`, checked alike), so that the next budgeted step goes on from them on any machine; each add replaces
them with the newest, and drops those of chains now released.

`SVD_RELEASE` points at another release folder, or `off` to compute everything from the local store alone.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import os
import re
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from helpers.core import env
from helpers.core.jsonfile import JSONFileError, read_json
from helpers.results.checkpoints import checkpoint_line, checkpoint_states
from helpers.results.identity import config_hash
from helpers.results.origin import machine

MANIFEST = "manifest.json"
RECORDS = "records"
CHECKPOINTS = "checkpoints"
FORMAT = 1


class ReleaseError(RuntimeError):
    """The release cannot be used or extended as asked; the message names the file and says what to do."""


def release_off() -> bool:
    """Whether $SVD_RELEASE turns the release off (`off`, `none`, `0`, `no`)."""
    return os.environ.get(env.RELEASE, "").strip().lower() in ("off", "none", "0", "no")


def release_folder() -> Path:
    """Where the release is looked for: $SVD_RELEASE, else `release/` at the top of the checkout."""
    given = os.environ.get(env.RELEASE, "").strip()
    return Path(given) if given else env.REPO / "release"


def release_root() -> Path | None:
    """The release folder (`release_folder`) where it holds a manifest and is not turned off (`release_off`), else
    None."""
    if release_off():
        return None
    root = release_folder()
    return root if (root / MANIFEST).is_file() else None


# --------------------------------------------------------------------------------------------------
# Reading: the manifest, checked, and a run's released lines, each file checked against its sha256
# --------------------------------------------------------------------------------------------------


@dataclass
class Manifest:
    """The release's manifest: files (relative path → entry) and batches (name → what computed it)."""

    root: Path
    files: dict[str, dict] = field(default_factory=dict)
    batches: dict[str, dict] = field(default_factory=dict)
    checkpoints: dict[str, dict] = field(default_factory=dict)  # relative path → entry: chains under way

    def runs(self) -> dict[tuple[str, str], list[str]]:
        """(experiment, config hash) → its files, in batch order."""
        index: dict[tuple[str, str], list[str]] = defaultdict(list)
        for rel, entry in sorted(self.files.items(), key=lambda kv: (kv[1]["batch"], kv[0])):
            index[(entry["experiment"], entry["config_hash"])].append(rel)
        return dict(index)

    def records(self) -> int:
        return sum(entry["records"] for entry in self.files.values())

    def as_json(self) -> dict:
        data = {"format": FORMAT, "files": dict(sorted(self.files.items())), "batches": self.batches}
        if self.checkpoints:
            data["checkpoints"] = dict(sorted(self.checkpoints.items()))
        return data


FILE_ENTRY = {"sha256": str, "records": int, "experiment": str, "config_hash": str, "batch": str}
CHECKPOINT_ENTRY = {"sha256": str, "chains": int, "experiment": str, "config_hash": str}


def read_manifest(root: Path) -> Manifest:
    """The manifest of the release at `root`, its shape checked (an empty one where there is none yet)."""
    path = root / MANIFEST
    if not path.is_file():
        return Manifest(root)
    try:
        data = read_json(path)
    except JSONFileError as err:
        raise ReleaseError(f"The release's manifest cannot be read: {err}. Restore it (git checkout release/) or set "
                           f"{env.RELEASE}=off to compute without the release.") from None
    problem = _manifest_problem(data)
    if problem:
        raise ReleaseError(f"{path} is not a release manifest ({problem}). Restore it (git checkout release/) or set "
                           f"{env.RELEASE}=off to compute without the release.")
    return Manifest(root, data["files"], data["batches"], data.get("checkpoints", {}))


def _manifest_problem(data: Any) -> str | None:
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        return f"expected a mapping with format {FORMAT}"
    if not isinstance(data.get("files"), dict) or not isinstance(data.get("batches"), dict):
        return "'files' and 'batches' must be mappings"
    for rel, entry in data["files"].items():
        if not isinstance(entry, dict) or any(not isinstance(entry.get(k), t) for k, t in FILE_ENTRY.items()):
            return f"the entry of {rel!r} lacks one of {sorted(FILE_ENTRY)}"
        if Path(rel).is_absolute() or ".." in Path(rel).parts or not rel.startswith(RECORDS + "/"):
            return f"{rel!r} is not a path under {RECORDS}/"
        if entry["batch"] not in data["batches"]:
            return f"{rel!r} names batch {entry['batch']!r}, which the manifest does not list"
    per_batch: Counter = Counter()
    for entry in data["files"].values():
        per_batch[entry["batch"]] += entry["records"]
    for name, batch in data["batches"].items():
        if problem := _batch_problem(batch, per_batch[name]):
            return f"batch {name!r} has {problem}"
    if not isinstance(data.get("checkpoints", {}), dict):
        return "'checkpoints' must be a mapping"
    for rel, entry in data.get("checkpoints", {}).items():
        if not isinstance(entry, dict) or any(not isinstance(entry.get(k), t) for k, t in CHECKPOINT_ENTRY.items()):
            return f"the entry of {rel!r} lacks one of {sorted(CHECKPOINT_ENTRY)}"
        if Path(rel).is_absolute() or ".." in Path(rel).parts or not rel.startswith(CHECKPOINTS + "/"):
            return f"{rel!r} is not a path under {CHECKPOINTS}/"
    return None


BATCH_ENTRY = {"added": str, "machine": dict, "records": int, "records_by_chapter": dict,
               "compute_seconds_by_chapter": dict, "weights": list}  # what every batch says of itself
_DATE = re.compile(r"^\d{4}-\d{2}-\d{2}T")


def _count(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _machine_problem(machine: Any) -> str | None:
    if not isinstance(machine, dict) or not isinstance(machine.get("cpu", ""), str) \
            or not isinstance(machine.get("flags", []), list) or not all(isinstance(f, str) for f in machine.get("flags", [])):
        return f"a machine that is not a cpu and its flags ({machine!r})"
    return None


def _batch_problem(batch: Any, records_in_files: int) -> str | None:
    """What is wrong with one batch's entry of the manifest (None: nothing): its fields and their types, its counts
    against each other and against the records its files hold."""
    if not isinstance(batch, dict) or any(not isinstance(batch.get(k), t) for k, t in BATCH_ENTRY.items()):
        return f"an entry without one of {sorted(BATCH_ENTRY)} of its type"
    if not _DATE.match(batch["added"]):
        return f"a date added that is not a date ({batch['added']!r})"
    by_chapter, seconds = batch["records_by_chapter"], batch["compute_seconds_by_chapter"]
    if not _count(batch["records"]) or not all(isinstance(k, str) and _count(v) for k, v in by_chapter.items()):
        return "record counts that are not counts"
    if sum(by_chapter.values()) != batch["records"] or batch["records"] != records_in_files:
        return (f"{batch['records']} records, {sum(by_chapter.values())} by chapter and {records_in_files} in its "
                "files, which must agree")
    if not all(isinstance(v, int | float) and not isinstance(v, bool) and v >= 0 for v in seconds.values()):
        return "compute seconds that are not seconds"
    if not all(isinstance(w, str) for w in batch["weights"]):
        return "weights that are not text"
    computed_on = batch.get("computed_on", [])
    if not isinstance(computed_on, list):
        return "machines it was computed on that are not a list"
    return next(filter(None, map(_machine_problem, [batch["machine"], *computed_on])), None)


_MANIFESTS: dict[tuple[Path, int], tuple[Manifest, dict[tuple[str, str], list[str]]]] = {}


def _manifest(root: Path) -> tuple[Manifest, dict[tuple[str, str], list[str]]]:
    """The manifest and its index of runs, read once per process (again if the file changed)."""
    path = root / MANIFEST
    stamp = (root.resolve(), path.stat().st_mtime_ns)
    if stamp not in _MANIFESTS:
        manifest = read_manifest(root)
        _MANIFESTS[stamp] = (manifest, manifest.runs())
    return _MANIFESTS[stamp]


def file_lines(root: Path, rel: str, entry: dict) -> list[bytes]:
    """The lines of one released file, after checking its bytes against the manifest's sha256."""
    path = root / rel
    try:
        blob = path.read_bytes()
    except OSError as err:
        raise ReleaseError(f"The released file {path} cannot be read ({err.strerror or err}). Restore it "
                           f"(git checkout release/) or set {env.RELEASE}=off.") from None
    if hashlib.sha256(blob).hexdigest() != entry["sha256"]:
        raise ReleaseError(f"The released file {path} does not match its sha256 in the manifest: it was changed or "
                           f"damaged. Restore it (git checkout release/) or set {env.RELEASE}=off.")
    try:
        text = gzip.decompress(blob)
    except (OSError, EOFError) as err:
        raise ReleaseError(f"The released file {path} is not gzip data ({err}).") from None
    return [line + b"\n" for line in text.split(b"\n") if line.strip()]


def released_lines(experiment: str, config_hash: str) -> list[bytes]:
    """Every released line of one run (none where there is no release or it holds no such run)."""
    root = release_root()
    if root is None:
        return []
    manifest, index = _manifest(root)
    return [line for rel in index.get((experiment, config_hash), []) for line in _lines(root, rel, manifest.files[rel])]


def released_checkpoints(experiment: str, config_hash: str) -> list[bytes]:
    """The release's checkpoint lines of one run's chains under way (none where there is no release or none are)."""
    root = release_root()
    if root is None:
        return []
    manifest, _ = _manifest(root)
    return [line for rel, entry in manifest.checkpoints.items()
            if (entry["experiment"], entry["config_hash"]) == (experiment, config_hash)
            for line in _lines(root, rel, entry)]


_LINES: dict[tuple, list[bytes]] = {}


def _lines(root: Path, rel: str, entry: dict) -> list[bytes]:
    """`file_lines`, read and checked once per process (again if the file changed on disk): a chapter builds many
    runs over the same released files."""
    try:
        stat = (root / rel).stat()
        stamp = (str((root / rel).resolve()), entry["sha256"], stat.st_mtime_ns, stat.st_size)
    except OSError:
        return file_lines(root, rel, entry)  # which says what is wrong
    if stamp not in _LINES:
        _LINES[stamp] = file_lines(root, rel, entry)
    return _LINES[stamp]


# --------------------------------------------------------------------------------------------------
# Writing: a batch of the local store's records, each checked, as new files and a manifest entry
# --------------------------------------------------------------------------------------------------


def record_problem(record: Any, path: Path) -> str | None:
    """What is wrong with one stored record read from `path` (`<experiment>/<hash>.jsonl`), or None."""
    if not isinstance(record, dict) or not isinstance(record.get("key"), str) or "result" not in record:
        return "not a store record (a mapping with 'key' and 'result')"
    if not isinstance(record.get("config"), dict):
        return "its 'config' is not a mapping"
    if record.get("experiment") != path.parent.name:
        return f"its experiment {record.get('experiment')!r} is not its folder's, {path.parent.name!r}"
    if record.get("config_hash") != path.stem or config_hash(record["config"]) != path.stem:
        return f"its configuration does not hash to its file's name {path.stem} (a key that lies about its settings)"
    if not isinstance(record.get("seconds"), int | float) or isinstance(record.get("seconds"), bool):
        return "its 'seconds' is not a number"
    return None


@dataclass
class Batch:
    """What `add_batch` released (or, dry, would release), and what it refused, with reasons."""

    name: str  # "" where nothing new was released: no batch was written
    added: Counter = field(default_factory=Counter)  # experiment → records
    already: int = 0
    refused: list[str] = field(default_factory=list)
    files: list[str] = field(default_factory=list)
    checkpoints: int = 0  # chains under way whose checkpoints the release carries after this add
    checkpoints_moved: bool = False  # whether those checkpoints differ from the release's before this add


Check = Callable[[str, dict], str | None]  # (experiment, record) → what is wrong with it, or None


def add_batch(store: Path, root: Path, *, commit: str, check: Check, chapters: dict[str, set[tuple[str, str]]]
              | None = None, experiments: Iterable[str] | None = None, runs: set[tuple[str, str]] | None = None,
              dry_run: bool = False) -> Batch:
    """Release the records of the local store at `store` that the release at `root` lacks, as one new batch.

    Every record is checked first (`record_problem`: its key hashes its configuration; `check`: its shape and the
    weights it names, by the caller that knows them); a refused record is listed with its reason and not released,
    and with any refused the batch is not written at all. `chapters` maps a chapter to the (experiment, hash) runs
    it used, for the manifest's counts and seconds per chapter; `runs`, the (experiment, hash) runs to release (None:
    every run of the store). Existing files are never rewritten.
    """
    manifest = read_manifest(root) if (root / MANIFEST).is_file() else Manifest(root)
    released = {(e, h): {json.loads(line)["key"] for rel in rels for line in file_lines(root, rel, manifest.files[rel])}
                for (e, h), rels in manifest.runs().items()}
    batch = Batch("")
    wanted = set(experiments) if experiments is not None else None
    new: dict[tuple[str, str], list[dict]] = defaultdict(list)
    for path in sorted(store.glob("*/*.jsonl")):
        experiment, run_hash = path.parent.name, path.stem
        if (wanted is not None and experiment not in wanted) or (runs is not None and (experiment, run_hash) not in runs):
            continue
        have = released.get((experiment, run_hash), set())
        seen: set[str] = set()
        for n, raw in enumerate(path.read_bytes().split(b"\n"), 1):
            if not raw.strip():
                continue
            try:
                record = json.loads(raw)
            except (UnicodeDecodeError, json.JSONDecodeError, RecursionError):
                batch.refused.append(f"{path}:{n}: not JSON")
                continue
            problem = record_problem(record, path) or check(experiment, record)
            if problem:
                batch.refused.append(f"{path}:{n}: {problem}")
                continue
            if record["key"] in have or record["key"] in seen:
                batch.already += 1
                continue
            seen.add(record["key"])
            new[(experiment, run_hash)].append(record)
            batch.added[experiment] += 1
    batch.name = name = batch_name(new) if new else ""
    current = _current(manifest)
    pending = _pending(store, current, released, new, wanted, runs)
    batch.checkpoints = sum(len(lines) for lines in pending.values())
    batch.checkpoints_moved = pending != current
    if batch.refused or dry_run or (not new and pending == current):
        return batch
    if name in manifest.batches and new:
        raise ReleaseError(f"batch {name} is in the manifest already: these records were released before")
    seconds: Counter = Counter()
    counts: Counter = Counter()
    staged: list[tuple[Path, Path]] = []
    for (experiment, run_hash), records in sorted(new.items()):
        rel = f"{RECORDS}/{experiment}/{run_hash}.{name}.jsonl.gz"
        if rel in manifest.files:
            raise ReleaseError(f"{root / rel} is released already; a released file is never rewritten")
        text = "".join(json.dumps(r, separators=(",", ":")) + "\n" for r in records).encode()
        blob = gzip.compress(text, mtime=0)
        target = root / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        part = target.with_name(target.name + f".part{os.getpid()}")
        part.write_bytes(blob)
        staged.append((part, target))
        manifest.files[rel] = {"sha256": hashlib.sha256(blob).hexdigest(), "records": len(records),
                               "experiment": experiment, "config_hash": run_hash, "batch": name,
                               "bytes": len(blob)}
        batch.files.append(rel)
        # a record names the chapter that computed it (its origin); one stored before records did belongs to the
        # first chapter in book order that used its run, since later chapters read earlier ones' records
        run_owner = next((c for c, runs in sorted((chapters or {}).items()) if (experiment, run_hash) in runs),
                         "unattributed")
        for r in records:
            said = r["origin"].get("chapter") if isinstance(r.get("origin"), dict) else None
            owner = said if isinstance(said, str) and said else run_owner
            counts[owner] += 1
            seconds[owner] += float(r["seconds"])
    old_checkpoints = [root / rel for rel in manifest.checkpoints]
    manifest.checkpoints = {}
    for (experiment, run_hash), lines in sorted(pending.items()):
        blob = gzip.compress(b"".join(lines), mtime=0)
        digest = hashlib.sha256(blob).hexdigest()
        rel = f"{CHECKPOINTS}/{experiment}/{run_hash}.{digest[:12]}.jsonl.gz"
        target = root / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        part = target.with_name(target.name + f".part{os.getpid()}")
        part.write_bytes(blob)
        staged.append((part, target))
        manifest.checkpoints[rel] = {"sha256": digest, "chains": len(lines), "experiment": experiment,
                                     "config_hash": run_hash, "bytes": len(blob)}
    if not new:  # only the chains under way moved on: no batch, new checkpoints
        _commit(root, manifest, staged, old_checkpoints)
        return batch
    records_all = [r for rs in new.values() for r in rs]
    origins = [r["origin"] for r in records_all
               if isinstance(r.get("origin"), dict) and isinstance(r["origin"].get("machine"), dict)]
    without = len(records_all) - len(origins)  # stored before records carried their origin: the adder's stands in
    here = machine()
    commits = {str(o.get("commit")) + ("+changes" if o.get("dirty") else "") for o in origins} | ({commit} if without
                                                                                                 else set())
    machines = [json.loads(m) for m in sorted({json.dumps(o.get("machine"), sort_keys=True) for o in origins}
                                              | ({json.dumps(here, sort_keys=True)} if without else set()))]
    manifest.batches[name] = {
        "commit": min(commits) if len(commits) == 1 else commit, "computed_at": sorted(commits),
        "computed_on": machines, "records_without_origin": without,
        "added": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "added_on": here,
        "machine": machines[0] if len(machines) == 1 else here,
        "records": sum(counts.values()), "records_by_chapter": dict(sorted(counts.items())),
        "compute_seconds_by_chapter": {c: round(s, 1) for c, s in sorted(seconds.items())},
        "versions": [json.loads(v) for v in sorted({json.dumps(r.get("versions"), sort_keys=True) for r in records_all})],
        "weights": sorted({f"{r['config'].get('model')}: {r['config'].get('weights')}" for r in records_all
                           if r["config"].get("weights")}),
        "dtypes": dict(Counter(str(r["config"].get("dtype")) for r in records_all)),
        "experiments": dict(sorted(batch.added.items())),
    }
    _commit(root, manifest, staged, old_checkpoints)
    return batch


def _commit(root: Path, manifest: Manifest, staged: list[tuple[Path, Path]], old_checkpoints: list[Path]) -> None:
    """All or nothing: every file is written whole under a part name first, then moved into place, and the manifest,
    replaced in one step, comes last. Readers follow the manifest alone, so until it names them the new files are
    not released; an interrupted add leaves the release as it was (and at most unlisted files, which the next add
    of the same records replaces, as `unlisted` reports them). The checkpoints it no longer lists go last. A
    manifest that its own reading would refuse is never written: nothing is added."""
    if problem := _manifest_problem(manifest.as_json()):
        for part, _target in staged:
            part.unlink(missing_ok=True)
        raise ReleaseError(f"The release's new manifest would not read back ({problem}); nothing was added.")
    for part, target in staged:
        os.replace(part, target)
    tmp = root / (MANIFEST + f".tmp{os.getpid()}")
    tmp.write_text(json.dumps(manifest.as_json(), indent=1, sort_keys=False) + "\n")
    os.replace(tmp, root / MANIFEST)
    listed = {root / rel for rel in manifest.checkpoints}
    for path in old_checkpoints:
        if path not in listed:
            path.unlink(missing_ok=True)


def drop_checkpoints(root: Path, runs: Iterable[tuple[str, str]]) -> int:
    """Take the checkpoints of `runs` ((experiment, config hash) pairs) out of the release at `root`, and return how
    many chains they held: the chains of a configuration that no profile computes any more, which no budgeted step
    will resume, and which `add_batch` would otherwise carry on (it keeps every checkpoint it is given). Records
    are never touched. A run the release holds no checkpoints of is refused before anything changes."""
    manifest = read_manifest(root)
    wanted = set(runs)
    held = {(e["experiment"], e["config_hash"]) for e in manifest.checkpoints.values()}
    if missing := sorted(wanted - held):
        raise ReleaseError(f"The release holds no checkpoints of {', '.join(f'{e}/{h}' for e, h in missing)}; "
                           "`python -m helpers release status` lists the runs it holds checkpoints of.")
    old = [root / rel for rel in manifest.checkpoints]
    dropped = {rel: e for rel, e in manifest.checkpoints.items() if (e["experiment"], e["config_hash"]) in wanted}
    manifest.checkpoints = {rel: e for rel, e in manifest.checkpoints.items() if rel not in dropped}
    _commit(root, manifest, [], old)
    return sum(e["chains"] for e in dropped.values())


def _current(manifest: Manifest) -> dict[tuple[str, str], list[bytes]]:
    """The release's checkpoint lines by run, as `_pending` gives them."""
    out: dict[tuple[str, str], list[bytes]] = {}
    for rel, entry in sorted(manifest.checkpoints.items()):
        out[(entry["experiment"], entry["config_hash"])] = file_lines(manifest.root, rel, entry)
    return out


def _pending(store: Path, current: dict[tuple[str, str], list[bytes]], released: dict[tuple[str, str], set[str]],
             new: dict[tuple[str, str], list[dict]], wanted: set[str] | None, runs: set[tuple[str, str]] | None
             ) -> dict[tuple[str, str], list[bytes]]:
    """The checkpoints the release carries after this add, by run: the release's (`current`), then the local store's
    newer ones (of the runs this add covers), the newest per unit, less those of units now released. A line that is
    not a checkpoint of its run (torn, another configuration's) is left out."""
    by_run: dict[tuple[str, str], dict[str, bytes]] = defaultdict(dict)
    sources = list(current.items())
    for path in sorted(store.glob("*/*.jsonl.checkpoints")):
        experiment, run_hash = path.parent.name, path.name.split(".")[0]
        if (wanted is None or experiment in wanted) and (runs is None or (experiment, run_hash) in runs):
            sources.append(((experiment, run_hash), path.read_bytes().split(b"\n")))
    for (experiment, run_hash), lines in sources:
        for key, state in checkpoint_states(lines, run_hash).items():
            by_run[(experiment, run_hash)][key] = checkpoint_line(key, run_hash, state)
    out = {}
    for run, units in sorted(by_run.items()):
        done = released.get(run, set()) | {r["key"] for r in new.get(run, [])}
        kept = [line for key, line in sorted(units.items()) if key not in done]
        if kept:
            out[run] = kept
    return out


def batch_name(new: dict[tuple[str, str], list[dict]]) -> str:
    """A batch's name from its content: the day and a digest of its runs and record keys, so that two branches that
    each add a batch name them apart (a counter would give both the same name), and adding the same records again
    after an interruption gives the same name."""
    digest = hashlib.sha256()
    for (experiment, run_hash), records in sorted(new.items()):
        for key in sorted(r["key"] for r in records):
            digest.update(f"{experiment}/{run_hash}/{key}\n".encode())
    return f"b{time.strftime('%Y%m%d')}-{digest.hexdigest()[:8]}"


def unlisted(root: Path) -> list[str]:
    """Files under the release's records/ and checkpoints/ that its manifest does not list: what an interrupted add left behind.
    They are never read (the manifest is the release)."""
    manifest = read_manifest(root)
    listed = set(manifest.files) | set(manifest.checkpoints)
    return sorted(str(p.relative_to(root)) for folder in (RECORDS, CHECKPOINTS) for p in (root / folder).rglob("*")
                  if p.is_file() and str(p.relative_to(root)) not in listed)
