"""Checksums of model folders: a converted model is trusted only while its files are the ones written.

A folder's manifest (`svd-manifest.json`) lists every file with its size, modification time and sha256 when
the folder is written. `damage(folder)` compares the folder with it: a file missing or of another size is
damage at once; a file whose modification time moved is hashed again, and damage only if its content changed.
`weights_fingerprint` names the weights a model was loaded from, for the store keys of everything computed
with it, so numbers from other weights are never read back as these.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

MANIFEST = "svd-manifest.json"
WEIGHT_SUFFIXES = (".safetensors", ".bin")
_verified: dict[tuple[str, tuple], str] = {}  # (folder, stat of its files) -> fingerprint, per process


def file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        while chunk := fh.read(1 << 24):
            digest.update(chunk)
    return digest.hexdigest()


def _files(folder: Path) -> list[Path]:
    return sorted(p for p in folder.iterdir() if p.is_file() and p.name != MANIFEST)


def write_manifest(folder: Path) -> dict:
    """Record size, mtime and sha256 of every file in `folder` (written last, so a cut-off write has none)."""
    entries = {p.name: {"size": p.stat().st_size, "mtime_ns": p.stat().st_mtime_ns, "sha256": file_sha256(p)}
               for p in _files(folder)}
    manifest = {"version": 1, "files": entries}
    tmp = folder / (MANIFEST + ".tmp")
    tmp.write_text(json.dumps(manifest, indent=1, sort_keys=True))
    os.replace(tmp, folder / MANIFEST)
    return manifest


def _read_manifest(folder: Path) -> dict | None:
    try:
        manifest = json.loads((folder / MANIFEST).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError):
        return None
    files = manifest.get("files") if isinstance(manifest, dict) else None
    if not isinstance(files, dict) or not all(isinstance(v, dict) and {"size", "mtime_ns", "sha256"} <= set(v)
                                              for v in files.values()):
        return None
    return manifest


def damage(folder: Path) -> str | None:
    """None when every file of `folder` is as its manifest recorded; else what is wrong, in a phrase."""
    manifest = _read_manifest(folder)
    if manifest is None:
        return f"{folder / MANIFEST} is missing or unreadable"
    for name, entry in manifest["files"].items():
        path = folder / name
        if not path.is_file():
            return f"{path} is missing"
        stat = path.stat()
        if stat.st_size != entry["size"]:
            return f"{path} has {stat.st_size:,} bytes, not the {entry['size']:,} written"
        if stat.st_mtime_ns != entry["mtime_ns"] and file_sha256(path) != entry["sha256"]:
            return f"{path} changed since it was written (its sha256 differs)"
    return None


def weights_fingerprint(folder: Path) -> str:
    """A short digest of the weight files' sha256 in `folder`: from its manifest when it has a sound one, else
    hashed (once per process for unchanged files)."""
    folder = Path(folder)
    weights = [p for p in _files(folder) if p.name.endswith(WEIGHT_SUFFIXES)]
    stats = tuple((p.name, p.stat().st_size, p.stat().st_mtime_ns) for p in weights)
    key = (str(folder.resolve()), stats)
    if key in _verified:
        return _verified[key]
    manifest = _read_manifest(folder)
    recorded = manifest["files"] if manifest else {}
    sums = []
    for p, (_, size, mtime) in zip(weights, stats, strict=True):
        entry = recorded.get(p.name)
        if entry and entry["size"] == size and entry["mtime_ns"] == mtime:
            sums.append(f"{p.name}:{entry['sha256']}")
        else:
            sums.append(f"{p.name}:{file_sha256(p)}")
    fingerprint = hashlib.sha256("\n".join(sums).encode()).hexdigest()[:16]
    _verified[key] = fingerprint
    return fingerprint
