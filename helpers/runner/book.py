"""Building the book with jupyter-book: the static files copied beside a separate output root, the repository its
buttons link to, and the build itself, which fails with its warnings.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

from helpers.core import env
from helpers.runner.installs import install_mathjax
from helpers.runner.profiles import BOOK_FILES, RunError
from helpers.runner.source_links import Repository, SourceLinkError, repository


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
    jupyter_book(out_root, repo, "html")
    return out_root / "_build" / "html" / "index.html"


def jupyter_book(out_root: Path, repo: Repository | None, builder: str) -> None:
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
