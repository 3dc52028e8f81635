"""Models as ordinary checkpoints on disk, truncated ones included, for engines that load a folder (vLLM).

A truncated model (`helpers.models.truncation`) is already a plain model of its family: its kept blocks are numbered
0..d-1 and its config says `num_hidden_layers = d`. Saved with `save_pretrained`, it is a Qwen2 or Llama
checkpoint any loader reads. Checkpoints are cached by the model's identity (name, weights fingerprint, depth,
truncation, dtype), written into a temporary folder renamed into place, and verified by their manifest
(`helpers.models.checksums`) before reuse: a damaged one is written again.
"""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

from helpers.models.checksums import MANIFEST, damage, write_manifest
from helpers.models.handle import ModelHandle
from helpers.results.identity import digest


def checkpoint_folder(model: ModelHandle, root: Path | None = None) -> Path:
    """Where `model`'s checkpoint lives in the cache (`SVD_CACHE`/checkpoints), named by its identity."""
    from helpers.models.registry import cache_dir

    ident = model.identity()
    name = "".join(c if c.isalnum() or c in "-_." else "-" for c in str(ident["model"]))[-60:]
    shape = f"d{ident['depth']}" + (f"-{ident['truncation']}" if ident["truncation"] else "")
    return (root or cache_dir() / "checkpoints") / f"{name}-{shape}-{ident['dtype']}-{digest(sorted(ident.items()))}"


def write_checkpoint(model, tokenizer, folder: Path) -> Path:
    """Save `model` (and `tokenizer`, when given) as a checkpoint in `folder`, atomically, with a manifest."""
    folder = Path(folder)
    tmp = folder.with_name(folder.name + f".tmp{os.getpid()}")
    shutil.rmtree(tmp, ignore_errors=True)
    try:
        model.save_pretrained(tmp, safe_serialization=True)
        if tokenizer is not None:
            tokenizer.save_pretrained(tmp)
        write_manifest(tmp)
        if folder.exists():
            shutil.rmtree(folder)
        tmp.rename(folder)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return folder


def checkpoint(model: ModelHandle, root: Path | None = None) -> Path:
    """`model` (with its tokenizer, where it has one) as a checkpoint folder: the cached one when it is whole, else
    written (again) now."""
    folder = checkpoint_folder(model, root)
    if folder.exists():
        reason = damage(folder)
        if reason is None:
            return folder
        if (folder / MANIFEST).exists():
            print(f"The checkpoint {folder} cannot be trusted ({reason}); writing it again.", file=sys.stderr)
    folder.parent.mkdir(parents=True, exist_ok=True)
    return write_checkpoint(model.module, model.tokenizer, folder)
