"""The results release as a reader sees it: a table of its batches, read from the manifest by the build that made
the page, never typed. The runner writes `release_batches.md` beside the executed chapters; the reproducibility page
includes it, so the batch names, record counts, machines and compute times it prints are the release's own (its
manifest checked on reading, `helpers.results.release.read_manifest`)."""

from __future__ import annotations

from pathlib import Path

from helpers.core.numbers import counted
from helpers.results.release import Manifest, read_manifest, release_root

RELEASE_BATCHES = "release_batches.md"


def _chapter(stem: str) -> str:
    """'04_power_sampling' → '04'."""
    return stem.split("_", 1)[0]


def _machine(machine: dict) -> str:
    """'AMD EPYC, AVX-512 (BF16)': the CPU and its widest vector instructions (not the number format the batch
    computed in, which has a column of its own)."""
    flags = machine.get("flags") or []
    if "avx512f" in flags:
        kind = "AVX-512 (BF16)" if "avx512_bf16" in flags else "AVX-512"
    else:
        kind = "AVX2" if "avx2" in flags else "no AVX2"
    cpu = str(machine.get("cpu") or "").replace("(R)", "").replace(" Processor", "").strip()
    return f"{cpu}, {kind}" if cpu else kind


def _minutes(seconds: float) -> str:
    return "<1" if seconds < 60 else f"{seconds / 60:,.0f}"


def batches_markdown(manifest: Manifest | None) -> str:
    """A row per batch of `manifest` in the order it was added (name, date, machines, models, number formats,
    records and compute minutes by chapter), and a total row; a sentence where no release was present. '—' where
    the batch's records name no model's weights or number format."""
    if manifest is None or not manifest.batches:
        return ("No results release was present at this build: every record it shows was computed by the build or "
                "read from its local results store.\n")
    rows, total, seconds_all = [], 0, 0.0
    for name, batch in manifest.batches.items():
        machines = batch.get("computed_on") or [batch["machine"]]
        where = "; ".join(dict.fromkeys(map(_machine, machines)))
        if not batch.get("computed_on"):
            where += " *"
        elif batch.get("records_without_origin"):
            where += f" (* for {batch['records_without_origin']:,} of its records)"
        models = ", ".join(sorted({w.split(":", 1)[0] for w in batch["weights"]})) or "—"
        formats = ", ".join(k for k in sorted(batch.get("dtypes") or {}) if k != "None") or "—"
        chapters = ", ".join(f"{_chapter(c)}: {n:,}" for c, n in sorted(batch["records_by_chapter"].items()))
        seconds = batch["compute_seconds_by_chapter"]
        minutes = ", ".join(f"{_chapter(c)}: {_minutes(s)}" for c, s in sorted(seconds.items()))
        total += batch["records"]
        seconds_all += sum(seconds.values())
        rows.append(f"| `{name}` | {batch['added'][:10]} | {where} | {models} | {formats} | {chapters} | {minutes} |")
    head = ("| batch | added | computed on | models | number format | records, by chapter | compute minutes, by "
            "chapter |\n|---|---|---|---|---|---|---|")
    foot = f"| all {counted(len(rows), 'batch', 'batches')} | | | | | {total:,} | {seconds_all / 3600:,.1f} hours |"
    return (head + "\n" + "\n".join(rows) + "\n" + foot + "\n\nRead from the release's manifest by the build that "
            "made this page; `default`, `full` and `full-160` share the release, so it lists the batches of all "
            "three. BF16: the CPU has bfloat16 instructions (the number format is the column beside it). *: where the "
            "batch was added, its records carrying no origin of their own. A decode's compute time is its share of "
            "the engine calls it rode in, prompt encoding included; a chain that went on from a checkpoint carries "
            "the time of the steps before, so a batch can hold more than its own step's wall time. Other records "
            "hold the time their computation took.\n")


def write(chapters_dir: Path) -> Path:
    """Write `release_batches.md` beside the executed chapters, from the release present at build time (if any)."""
    root = release_root()
    path = Path(chapters_dir) / RELEASE_BATCHES
    path.write_text(batches_markdown(read_manifest(root) if root else None), encoding="utf-8")
    return path
