"""The whole book as one PDF: the single-page build printed by a headless Chromium (no LaTeX needed), with a title
page that names the build.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import tempfile
from pathlib import Path

from helpers.runner.book import jupyter_book
from helpers.runner.profiles import CHAPTERS, RunError
from helpers.runner.source_links import Repository

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
    jupyter_book(out_root, repo, "singlehtml")
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
