"""What a run records of itself: the closing table of chapter times and records, and the run configuration page
(`run_config.md` and its JSON twin) that the reproducibility page includes and `release add` reads.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import platform
import subprocess
from pathlib import Path

from helpers.core import env
from helpers.runner.execute import DOWNLOADS, write_student_notebook
from helpers.runner.profiles import CHAPTERS, NOTEBOOKS, Job


def time_table(jobs: list[Job]) -> str:
    """The closing table of a run: each chapter's time and the stored records it reused and computed."""
    lines = ["[run] chapter                  time   records reused   computed   peak memory"]
    for job in jobs:
        r = job.records or {}
        memory = f"{r['peak_mib'] / 1024:.1f} GiB" if "peak_mib" in r else "?"
        lines.append(f"[run] {job.stem:<22} {job.seconds:6.0f} s {r.get('reused', '?'):>15} {r.get('computed', '?'):>10}"
                     f" {memory:>13}")
    lines.append(f"[run] {'total':<22} {sum(j.seconds for j in jobs):6.0f} s")
    return "\n".join(lines)


def git_commit() -> str:
    try:
        return subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=env.REPO, capture_output=True, text=True,
                              check=True).stdout.strip()
    except Exception:
        return "unknown"


def previous_chapters(json_path: Path, say: bool = False) -> dict:
    """The chapters an earlier run recorded in `json_path` (run_config.json), each entry checked; an unreadable file
    or entry is left out (and, with `say`, a note says so), never a KeyError after the chapters' work is done."""
    from helpers.core.jsonfile import JSONFileError, read_json

    if not json_path.is_file():
        return {}
    try:
        chapters = read_json(json_path).get("chapters", {})
    except (JSONFileError, AttributeError):
        chapters = None
    if not isinstance(chapters, dict):
        if say:
            print(f"[run] note: {json_path} is not a run configuration this runner wrote; it will be replaced",
                  flush=True)
        return {}
    kept = {stem: c for stem, c in chapters.items() if isinstance(c, dict) and isinstance(c.get("parameters"), dict)
            and isinstance(c.get("seconds"), int | float) and not isinstance(c.get("seconds"), bool)}
    if say and len(kept) < len(chapters):
        print(f"[run] note: {len(chapters) - len(kept)} chapter entries of {json_path} come from an older runner; "
              "they are dropped from the run configuration", flush=True)
    return kept


def write_run_config(out_root: Path, profile: str, jobs: list[Job]) -> dict:
    """The run configuration page included by book/reproducibility.md (and its JSON twin)."""
    from helpers.models.loading import default_device
    from helpers.models.precision import describe
    from helpers.results.store import versions

    info = {"profile": profile, "commit": git_commit(), "date": dt.datetime.now().isoformat(timespec="seconds"),
            "machine": f"{platform.system()} {platform.machine()}, {os.cpu_count()} CPU cores, "
                       f"{describe(default_device())}",
            "versions": versions(), "chapters": {j.stem: {"parameters": j.parameters, "seconds": round(j.seconds, 1),
                                                          "peak_mib": (j.records or {}).get("peak_mib"),
                                                          "computed": (j.records or {}).get("computed"),
                                                          "reused": (j.records or {}).get("reused"),
                                                          "released": (j.records or {}).get("released"),
                                                          "runs": (j.records or {}).get("runs")}
                                                 for j in jobs}}
    folder = out_root / CHAPTERS
    folder.mkdir(parents=True, exist_ok=True)
    json_path = folder / "run_config.json"
    previous = previous_chapters(json_path)  # keep the record of chapters this run did not re-execute (--only)
    info["chapters"] = {**previous, **info["chapters"]}
    json_path.write_text(json.dumps(info, indent=2))
    for stem, c in info["chapters"].items():  # chapters executed by an earlier run, before downloads existed
        if not (folder / DOWNLOADS / f"{stem}.ipynb").is_file() and (NOTEBOOKS / f"{stem}.ipynb").is_file():
            write_student_notebook(Job(stem, c["parameters"]), out_root)
    lines = [f"Profile **{profile}**, commit `{info['commit']}`, built {info['date']} on {info['machine']}.", "",
             "Versions: " + ", ".join(f"{k} {v}" for k, v in info["versions"].items()) + ".", "",
             "A chapter's time is its time from an empty results store where it reused no stored record (the "
             "records column: computed / reused by this build); otherwise it is the time of what was left to compute.",
             "", "| chapter | time (s) | records computed / reused | peak memory (GiB) | parameters |",
             "|---|---|---|---|---|"]
    for stem, c in info["chapters"].items():
        params = ", ".join(f"`{k}={json.dumps(v)}`" for k, v in c["parameters"].items())
        memory = "—" if c.get("peak_mib") is None else f"{c['peak_mib'] / 1024:.1f}"
        records = "—" if c.get("computed") is None else f"{c['computed']} / {c.get('reused', 0)}" + (
            " (from empty)" if not c.get("reused") else f", {c['released']} from the release" if c.get("released")
            else "")
        lines.append(f"| {stem} | {c['seconds']} | {records} | {memory} | {params} |")
    (folder / "run_config.md").write_text("\n".join(lines) + "\n")
    return info
