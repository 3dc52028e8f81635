"""Adding the local store's records to the results release, each checked first, and auditing what is released.

`helpers.results.release` knows the release's files and manifest; this module knows what a record of each experiment
must look like (the shapes the computing code stores) and which weights an embedded model has here, so it is the one
that can check a record before it is released, and load the released records for an audit.
"""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

from helpers.core import env
from helpers.core.jsonfile import JSONFileError, read_json
from helpers.core.numbers import counted
from helpers.results.kinds import KINDS
from helpers.results.release import (
    Batch,
    ReleaseError,
    add_batch,
    file_lines,
    read_manifest,
    release_root,
    unlisted,
)
from helpers.results.shapes import conforms, shape_sizes
from helpers.results.store import results_root


def record_shape(experiment: str, config: dict) -> Any:
    """The shape (`helpers.results.shapes.conforms`) a stored result of `experiment` has, as the code that computes it
    checks it when reading (where `helpers.results.kinds` says it is declared); a ReleaseError for an experiment no
    code of the book stores."""
    kind = KINDS.get(experiment)
    if kind is None:
        raise ReleaseError(f"no code of the book stores {experiment!r} records; only {sorted(KINDS)} are released")
    return kind.shape_for(config)


class RecordCheck:
    """Checks one record before it is released: its shape, and that the embedded weights it names are the ones this
    machine has (a fingerprint from other weights would tie the release to numbers no one can reproduce)."""

    def __init__(self) -> None:
        self.fingerprints: dict[str, str | None] = {}

    def weights(self, name: str) -> str | None:
        if name not in self.fingerprints:
            from helpers.models.loading import embedded_fingerprint
            from helpers.models.registry import ModelLoadError

            try:
                self.fingerprints[name] = embedded_fingerprint(name)
            except ModelLoadError:
                self.fingerprints[name] = None
        return self.fingerprints[name]

    def __call__(self, experiment: str, record: dict) -> str | None:
        try:
            shape = record_shape(experiment, record["config"])
        except ReleaseError as err:
            return str(err)
        if not conforms(record["result"], shape, shape_sizes(record["config"])):
            return f"its result does not have the shape and lengths of a {experiment} record"
        configs = [record["config"]] if experiment != "agreement" else [record["config"].get("full", {}),
                                                                        record["config"].get("truncated", {})]
        for config in configs:
            source = str(config.get("source", ""))
            if source.startswith("embedded:"):
                here = self.weights(str(config.get("model")))
                if here is None:
                    return (f"its model {config.get('model')!r} is not installed here to check its weights "
                            f"(python -m helpers install-models --profile ...)")
                if config.get("weights") != here:
                    return f"its weights {config.get('weights')} are not {config.get('model')}'s here ({here})"
        return None


def build_chapters(build: Path) -> dict[str, set[tuple[str, str]]]:
    """The runs each chapter of a build used (its run_config.json, written by the runner), for the manifest."""
    path = build / "book" / "chapters" / "run_config.json"
    if not path.is_file():
        return {}
    try:
        chapters = read_json(path).get("chapters", {})
    except (JSONFileError, AttributeError):
        return {}
    return {stem: {tuple(run.split("/", 1)) for run in (c.get("runs") or []) if isinstance(run, str) and "/" in run}
            for stem, c in chapters.items() if isinstance(c, dict)}


def add(store: Path | None = None, root: Path | None = None, build: Path | None = None, commit: str | None = None,
        dry_run: bool = False, chapter: str | None = None) -> Batch:
    """Release the local store's records that the release lacks (see `helpers.results.release.add_batch`): those of
    the runs the build's chapters used (its run configuration; every run of the store where it names none), counted
    per chapter, or every run's under `chapter` (a step that ran one chapter and was stopped before it could say
    which runs it used)."""
    from helpers.runner.run_config import git_commit

    root = root or env.REPO / "release"
    root.mkdir(parents=True, exist_ok=True)
    store = store or results_root()
    if chapter:
        chapters, runs = {chapter: {(p.parent.name, p.stem) for p in store.glob("*/*.jsonl")}}, None
    else:  # the runs the build's chapters used, and only those: the store may hold other profiles' records
        chapters = build_chapters(build or env.REPO)
        runs = set().union(*chapters.values()) if any(chapters.values()) else None
    return add_batch(store, root, commit=commit or git_commit(), check=RecordCheck(), chapters=chapters, runs=runs,
                     dry_run=dry_run)


def add_report(batch: Batch, dry_run: bool) -> tuple[list[str], bool]:
    """What `release add` says of a batch, line by line, and whether it released (False: records were refused and
    nothing was released)."""
    out = [f"refused {line}" for line in batch.refused[:20]]
    if batch.refused:
        return [*out, f"{len(batch.refused)} records refused: nothing was released (fix or remove them, then add "
                      "again)"], False
    total = sum(batch.added.values())
    if not total:
        out.append(f"nothing new to release: no record the release lacks ({batch.already} already released)")
    else:
        verb = "would release" if dry_run else f"released as batch {batch.name}"
        out.append(f"{verb}: {total} records ({dict(batch.added)}); {batch.already} already released"
                   + ("" if dry_run else f"; {len(batch.files)} new files"))
    if batch.checkpoints_moved and not batch.checkpoints:
        out.append(f"the checkpoints of the MH chains under way {'would be' if dry_run else 'are'} dropped: "
                   "every chain has finished")
    elif batch.checkpoints:
        if not batch.checkpoints_moved:
            state = "unchanged: no chain under way crossed a block since the last add"
        else:
            state = "would be updated" if dry_run else "updated"
        out.append(f"the checkpoints of {batch.checkpoints} MH chains under way: {state}; the next budgeted step goes "
                   "on from them")
    return out, True


def released_records(root: Path | None = None, batches: set[str] | None = None) -> list[dict]:
    """Every released record (whole store lines), or those of the named `batches`, each file checked against the
    manifest; an unknown batch name is an error that lists the known ones."""
    root = root or release_root()
    if root is None:
        raise ReleaseError(f"there is no release here (release/manifest.json), or {env.RELEASE} turns it off")
    manifest = read_manifest(root)
    unknown = sorted((batches or set()) - set(manifest.batches))
    if unknown:
        raise ReleaseError(f"the release has no batch {', '.join(unknown)}; it has {', '.join(manifest.batches)}")
    return [json.loads(line) for rel, entry in sorted(manifest.files.items())
            if batches is None or entry["batch"] in batches for line in file_lines(root, rel, entry)]


def batches_since(ref: str, root: Path | None = None) -> set[str] | None:
    """The batches the release's manifest lists now and did not at git commit `ref` (what a push added); None where
    `ref` is not a commit this checkout has (a first push: every batch is new)."""
    import subprocess

    root = root or release_root()
    if root is None:
        raise ReleaseError(f"there is no release here (release/manifest.json), or {env.RELEASE} turns it off")
    if set(ref) <= {"0"}:  # GitHub's "before" of a new branch
        return None
    known = subprocess.run(["git", "cat-file", "-e", f"{ref}^{{commit}}"], cwd=env.REPO, capture_output=True)
    if known.returncode != 0:
        return None
    try:
        rel = (root / "manifest.json").resolve().relative_to(env.REPO.resolve())
    except ValueError:
        raise ReleaseError(f"the release at {root} is outside this checkout ({env.REPO}), so git cannot say which "
                           "batches a commit added: choose them with --batch instead of --since") from None
    done = subprocess.run(["git", "show", f"{ref}:{rel.as_posix()}"], cwd=env.REPO, capture_output=True, text=True)
    if done.returncode != 0:  # that commit had no release: every batch is new
        return set(read_manifest(root).batches)
    try:
        before = set(json.loads(done.stdout).get("batches", {}))
    except (json.JSONDecodeError, AttributeError):
        before = set()
    return set(read_manifest(root).batches) - before


def stored_records(store: Path) -> list[dict]:
    """Every readable record of a local results store (whole lines), for an audit before `add`."""
    records = []
    for path in sorted(store.glob("*/*.jsonl")):
        for raw in path.read_bytes().splitlines():
            try:
                record = json.loads(raw)
            except (UnicodeDecodeError, json.JSONDecodeError, RecursionError):
                continue
            if isinstance(record, dict) and isinstance(record.get("config"), dict) and "result" in record:
                records.append(record)
    return records


def sample_records(records: list[dict], k: int | None, seed: int = 0) -> list[dict]:
    """`k` records drawn at random (a fixed seed, so a run is repeatable), or all of them."""
    if k is None or k >= len(records):
        return records
    return random.Random(seed).sample(records, k)


def sample_each_kind(records: list[dict], k: int | None, seed: int = 0) -> list[dict]:
    """`sample_records` of each experiment's records: `k` of every kind (all of a kind that has fewer), so that a
    sample audits lens curves and critical depths as well as the far more numerous decodes."""
    kinds: dict[str, list[dict]] = {}
    for r in records:
        kinds.setdefault(str(r.get("experiment")), []).append(r)
    return [r for kind in sorted(kinds) for r in sample_records(kinds[kind], k, seed)]


def run_settings(root: Path, rel: str, entry: dict) -> str:
    """The settings that tell one run from another, read from its first released record (model, method, depth,
    seed, cap: what a reader needs to say whether any profile still computes it)."""
    config = json.loads(file_lines(root, rel, entry)[0])["config"]
    return ", ".join(f"{key} {config[key]}" for key in ("model", "method", "depth", "seed", "max_new_tokens", "mode")
                     if key in config)


def status(root: Path | None = None) -> str:
    """What the release holds: records by experiment and by batch, size, and the batches' provenance."""
    root = root or release_root()
    if root is None:
        return "no release here (release/manifest.json is absent, or SVD_RELEASE=off)"
    manifest = read_manifest(root)
    size = sum((root / rel).stat().st_size for rel in manifest.files if (root / rel).is_file())
    lines = [f"release {root}: {manifest.records()} records in {len(manifest.files)} files, {size / 1e6:.2f} MB"]
    for name, batch in manifest.batches.items():
        machine = batch.get("machine", {})
        commits = batch.get("computed_at") or [batch.get("commit")]
        lines.append(f"  batch {name}: {batch.get('records')} records, computed at {', '.join(map(str, commits))} on "
                     f"{machine.get('cpu')} ({', '.join(machine.get('flags', []))}), added {batch.get('added')}; "
                     f"by chapter {batch.get('records_by_chapter')}; compute seconds "
                     f"{batch.get('compute_seconds_by_chapter')}"
                     + (f"; {batch['records_without_origin']} stored before records carried their origin (commit and "
                        "machine as the adder gave them)" if batch.get("records_without_origin") else ""))
    if manifest.checkpoints:
        chains = sum(e["chains"] for e in manifest.checkpoints.values())
        lines.append(f"  checkpoints of {counted(chains, 'MH chain')} under way in "
                     f"{counted(len(manifest.checkpoints), 'run')}: the next budgeted step goes on from them (those "
                     "of a configuration no profile computes any more: `release drop-checkpoints --run RUN`)")
        runs = manifest.runs()
        for entry in sorted(manifest.checkpoints.values(), key=lambda e: (e["experiment"], e["config_hash"])):
            run = (entry["experiment"], entry["config_hash"])
            lines.append(f"    {'/'.join(run)}: {counted(entry['chains'], 'chain')}"
                         + (f" ({run_settings(root, runs[run][0], manifest.files[runs[run][0]])})" if run in runs else
                            " (none of its records is released yet)"))
    debris = unlisted(root)
    if debris:
        lines.append(f"  {counted(len(debris), 'file')} under records/ or checkpoints/ that the manifest does not "
                     "list (left by an interrupted add; never read, safe to delete): " + ", ".join(debris[:5])
                     + (", ..." if len(debris) > 5 else ""))
    return "\n".join(lines)
