"""Checksums of model folders: a converted model is trusted only while its files are the ones written.

A folder's manifest (`svd-manifest.json`) lists every file with its size, modification time and sha256 when
the folder is written. `damage(folder)` compares the folder with it by content: each file is hashed at least once
per process (bit rot keeps a file's size and modification time), then again only when its size, modification
time or inode change; a model's weights are checked so before they are read. Each file whose bytes matched gets a
stamp in `svd-checked.json`: its device, inode, size, modification and change times at that moment. Any write
changes the change time (which no user call can set back), so while a weights file's stamp holds, its bytes are
the ones checked. Two callers take a stamp that holds in place of hashing, for weights files only (the small files,
tokenizer and configs, are hashed every time): `damage(folder, deep=False)`, and
`weights_fingerprint(folder, trust_stamps=True)`, which names an embedded model's weights for a build that only
looks its numbers up; a process that computes with the weights hashes them first (`damage(folder)`).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
from pathlib import Path

from helpers.core.jsonfile import JSONFileError, read_json

MANIFEST = "svd-manifest.json"
CHECKED = "svd-checked.json"  # per file: its stat when its bytes last matched the manifest
WEIGHT_SUFFIXES = (".safetensors", ".bin")
_hashed: dict[tuple, str] = {}  # (device, inode, size, mtime_ns, ctime_ns) -> sha256 hashed by this process


def file_sha256(path: Path) -> str:
    """The sha256 of a file's bytes, read now."""
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        while chunk := fh.read(1 << 24):
            digest.update(chunk)
    return digest.hexdigest()


def verified_sha256(path: Path) -> str:
    """The sha256 of `path` as this process last read it: hashed at the first call, and again whenever its size,
    modification or change time or inode differ from that reading's (a rename keeps them, so a folder written and then
    renamed into place is not hashed again)."""
    key = tuple(_stamp(path))
    if key not in _hashed:
        _hashed[key] = file_sha256(path)
    return _hashed[key]


def _files(folder: Path) -> list[Path]:
    return sorted(p for p in folder.iterdir() if p.is_file() and p.name not in (MANIFEST, CHECKED))


def _stamp(path: Path) -> list[int]:
    stat = path.stat()
    return [stat.st_dev, stat.st_ino, stat.st_size, stat.st_mtime_ns, stat.st_ctime_ns]


def _stamps(folder: Path) -> dict:
    """The folder's stamps, {} where there are none or the file is unreadable (then every file is hashed)."""
    try:
        stamps = read_json(folder / CHECKED)
    except JSONFileError:
        return {}
    return stamps if isinstance(stamps, dict) else {}


def _stamp_holds(stamps: dict, path: Path, stamp: list[int] | None = None) -> bool:
    """Whether `path` is a weights file whose bytes this machine checked against the manifest and nothing has written
    since (`stamp`: its stat taken already, else taken now)."""
    return path.name.endswith(WEIGHT_SUFFIXES) and stamps.get(path.name) == (stamp or _stamp(path))


def _stamp_checked(folder: Path, checked: dict[str, list[int]]) -> None:
    """Record that the files of `folder` named in `checked` held the bytes the manifest names while they had those
    stamps (taken before they were read). Written by rename; two processes stamping at once may lose one's stamps,
    which only costs a later hash."""
    stamps = _stamps(folder) | checked
    tmp = folder / f"{CHECKED}.tmp{os.getpid()}"
    try:
        tmp.write_text(json.dumps(stamps, sort_keys=True))
        os.replace(tmp, folder / CHECKED)
    except OSError:  # a read-only folder: nothing is stamped, every process hashes
        with contextlib.suppress(OSError):
            tmp.unlink(missing_ok=True)


def write_manifest(folder: Path) -> dict:
    """Record size, mtime and sha256 of every file in `folder` (written last, so a cut-off write has none)."""
    entries = {p.name: {"size": p.stat().st_size, "mtime_ns": p.stat().st_mtime_ns, "sha256": verified_sha256(p)}
               for p in _files(folder)}
    manifest = {"version": 1, "files": entries}
    tmp = folder / (MANIFEST + ".tmp")
    tmp.write_text(json.dumps(manifest, indent=1, sort_keys=True))
    os.replace(tmp, folder / MANIFEST)
    return manifest


def _read_manifest(folder: Path) -> dict | None:
    try:
        manifest = read_json(folder / MANIFEST)
    except JSONFileError:
        return None
    files = manifest.get("files") if isinstance(manifest, dict) else None
    if not isinstance(files, dict) or not all(isinstance(v, dict) and {"size", "mtime_ns", "sha256"} <= set(v)
                                              for v in files.values()):
        return None
    return manifest


def damage(folder: Path, deep: bool = True) -> str | None:
    """None when every file of `folder` is as its manifest recorded; else what is wrong, in a phrase. `deep`: every
    file hashed (once per process); else a file whose stamp holds is taken as checked."""
    manifest = _read_manifest(folder)
    if manifest is None:
        return f"{folder / MANIFEST} is missing or unreadable"
    stamps, hashed = ({} if deep else _stamps(folder)), {}
    for name, entry in manifest["files"].items():
        path = folder / name
        if not path.is_file():
            return f"{path} is missing"
        before = _stamp(path)
        if before[2] != entry["size"]:
            return f"{path} has {before[2]:,} bytes, not the {entry['size']:,} written"
        if _stamp_holds(stamps, path, before):
            continue  # the weights as checked
        if verified_sha256(path) != entry["sha256"]:
            return f"{path} changed since it was written (its sha256 differs: damaged on disk, or edited)"
        if _stamp(path) == before:  # not written while it was read
            hashed[name] = before
    if hashed:
        _stamp_checked(folder, hashed)
    return None


def _sha256(path: Path, stamps: dict, manifest: dict | None) -> str:
    """The sha256 of a file's bytes: the manifest's while the file's stamp holds, else hashed by this process."""
    entry = (manifest or {}).get("files", {}).get(path.name)
    if entry is not None and _stamp_holds(stamps, path):
        return entry["sha256"]
    return verified_sha256(path)


def weights_fingerprint(folder: Path, trust_stamps: bool = False) -> str:
    """A short digest of the weight files in `folder`, from the sha256 of their bytes as this process read them
    (`verified_sha256`: hashed once per process, again when a file changes); with `trust_stamps`, the manifest's
    where a stamp says this machine checked the file against it and it has not changed since (for naming weights a
    process will not compute with unless it checks them first)."""
    folder = Path(folder)
    weights = [p for p in _files(folder) if p.name.endswith(WEIGHT_SUFFIXES)]
    stamps, manifest = (_stamps(folder), _read_manifest(folder)) if trust_stamps else ({}, None)
    sums = [f"{p.name}:{_sha256(p, stamps, manifest)}" for p in weights]
    return hashlib.sha256("\n".join(sums).encode()).hexdigest()[:16]
