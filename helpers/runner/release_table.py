"""The results release as a reader sees it: a table of its batches, read from the manifest by the build that made
the page, never typed. The runner writes `release_batches.md` beside the executed chapters; the reproducibility page
includes it, so the batch names, record counts, machines and engine hours it prints are the release's own."""

from __future__ import annotations

from pathlib import Path

from helpers.core.numbers import counted
from helpers.results.release import Manifest, ReleaseError, read_manifest, release_root

RELEASE_BATCHES = "release_batches.md"


def _chapter(stem: str) -> str:
    """'04_power_sampling' → '04'."""
    return stem.split("_", 1)[0]


def _checked(name: str, batch: object) -> tuple[int, dict[str, int], dict[str, float], list[dict], list[str], str]:
    """A batch's records, records and engine seconds by chapter, the machines that computed it (where the manifest
    names them, else the one that added it), models and date, each checked for its type: a ReleaseError that names
    the batch where the manifest holds something else."""
    def bad(what: str) -> ReleaseError:
        return ReleaseError(f"release/manifest.json: batch {name!r} has {what}. Restore the manifest (git checkout "
                            "release/) or set SVD_RELEASE=off to build without the release.")

    if not isinstance(batch, dict):
        raise bad("no entry of its own (not a mapping)")
    records, by_chapter = batch.get("records"), batch.get("records_by_chapter")
    seconds, machines = batch.get("compute_seconds_by_chapter", {}), batch.get("computed_on") or [batch.get("machine", {})]
    weights, added = batch.get("weights", []), batch.get("added", "")
    if not isinstance(records, int) or records < 0:
        raise bad(f"a record count that is not a count ({records!r})")
    if not isinstance(by_chapter, dict) or not all(isinstance(k, str) and isinstance(v, int) and v >= 0
                                                   for k, v in by_chapter.items()):
        raise bad("records by chapter that are not counts by chapter")
    if sum(by_chapter.values()) != records:
        raise bad(f"records by chapter that add up to {sum(by_chapter.values())}, not its {records}")
    if not isinstance(seconds, dict) or not all(isinstance(v, (int, float)) and v >= 0 for v in seconds.values()):
        raise bad("engine seconds by chapter that are not seconds")
    if not isinstance(machines, list) or not all(isinstance(m, dict) for m in machines) \
            or not isinstance(weights, list) or not isinstance(added, str):
        raise bad("a machine, weights or date of the wrong type")
    models = sorted({str(w).split(":", 1)[0] for w in weights})
    return records, by_chapter, seconds, machines, models, added[:10]


def _machine(machine: dict) -> str:
    """'AMD EPYC, AVX-512 (bfloat16)', from the machine the batch was computed on."""
    flags = machine.get("flags") or []
    if "avx512f" in flags:
        kind = "AVX-512 (bfloat16)" if "avx512_bf16" in flags else "AVX-512"
    else:
        kind = "AVX2" if "avx2" in flags else "neither AVX2 nor AVX-512"
    cpu = str(machine.get("cpu") or "").replace("(R)", "").replace(" Processor", "").strip()
    return f"{cpu}, {kind}" if cpu else kind


def batches_markdown(manifest: Manifest | None) -> str:
    """A row per batch of `manifest` in the order it was added (name, date, machines, models, records and engine
    hours by chapter), and a total row; a sentence where the build read no release. '—' where the batch's records
    name no model's weights."""
    if manifest is None or not manifest.batches:
        return "This build read no results release: every record it shows was computed by the build itself.\n"
    rows, total, hours = [], 0, 0.0
    for name, batch in manifest.batches.items():
        records, by_chapter, seconds, machines, models, added = _checked(name, batch)
        total += records
        hours += sum(seconds.values()) / 3600
        chapters = ", ".join(f"{_chapter(c)}: {n:,}" for c, n in sorted(by_chapter.items()))
        engine = ", ".join(f"{_chapter(c)}: {s / 3600:.2f}" for c, s in sorted(seconds.items()))
        rows.append(f"| `{name}` | {added} | {'; '.join(dict.fromkeys(map(_machine, machines)))} | {', '.join(models) or '—'} | {chapters} | "
                    f"{engine} |")
    head = ("| batch | added | computed on | models | records, by chapter | engine hours, by chapter |\n"
            "|---|---|---|---|---|---|")
    foot = f"| all {counted(len(rows), 'batch', 'batches')} | | | | {total:,} | {hours:.1f} |"
    return (head + "\n" + "\n".join(rows) + "\n" + foot + "\n\nRead from the release's manifest by the build that "
            "made this page. A decode's engine seconds are its share of the engine passes it rode in, so they count "
            "neither the prompts' encoding before it nor a step's time between passes: a step's wall time is longer. A "
            "dash: the batch's records name no model's weights.\n")


def write(chapters_dir: Path) -> Path:
    """Write `release_batches.md` beside the executed chapters, from the release this build read (if any)."""
    root = release_root()
    path = Path(chapters_dir) / RELEASE_BATCHES
    path.write_text(batches_markdown(read_manifest(root) if root else None), encoding="utf-8")
    return path
