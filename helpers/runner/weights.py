"""The book's weights as they are: a table of each embedded model's GGUF file that a build ran, read from the files
(`helpers.models.gguf_file`), never typed. The runner writes `weights.md` beside the executed chapters; the front page
and the reproducibility page include it."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from helpers.models.gguf_file import describe_gguf
from helpers.models.registry import KNOWN_MODELS, post_training

WEIGHTS = "weights.md"


def weights_markdown(models: Sequence[str]) -> str:
    """A row per embedded model among `models` whose file is at hand: its kind, its file, the name its converter wrote
    into it, where that says the file was converted from another quantized checkpoint, and each tensor type's share
    of the elements; a sentence for a model whose file is not here."""
    rows, absent = [], []
    for model in dict.fromkeys(models):
        if model not in KNOWN_MODELS:
            continue
        f = describe_gguf(model)
        if f is None:
            absent.append(model)
            continue
        origin = "converted from the AWQ (4-bit) checkpoint" if f.from_awq else "converted from the published weights"
        rows.append(f"| {model} | {post_training(model)} | `{f.file}` | {f.name} ({origin}) | {f.types_text()} | "
                    f"{f.size / 1e6:,.0f} MB |")
    if not rows:
        return "This build ran no embedded model whose file is at hand.\n"
    head = ("| model | kind | GGUF file | its converter's name for it | tensor types, by share of the elements | "
            "size |\n|---|---|---|---|---|---|")
    note = (f"\n\nNot described, their files not being installed here: {', '.join(absent)}." if absent else "")
    return (head + "\n" + "\n".join(rows) + note + "\n\nRead from each file's metadata and tensor table by the build "
            "that made this page. Every tensor is dequantized to float32 when the model is first loaded, so the "
            "book computes on these rounded weights, not on the published checkpoints.\n")


def write(chapters_dir: Path, models: Sequence[str]) -> Path:
    """Write `weights.md` beside the executed chapters."""
    path = Path(chapters_dir) / WEIGHTS
    path.write_text(weights_markdown(models), encoding="utf-8")
    return path
