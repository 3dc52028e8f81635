"""The repository holds the product: no work-log references (tracker numbers, session numbers) in its code, tests,
book or notebooks, and no folder of a review's working papers."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
PRODUCT = ("helpers", "tests", "book", "notebooks")
# Built from parts so that this file does not match itself; an upstream reference (owner/repo#123) is a citation.
WORK_LOG = re.compile(r"\b(?:" + "iss" + r"ues?\s*#?\s*\d+|" + "ses" + r"sions?\s+\d+|(?<![\w/])#\d{2,}\b)", re.IGNORECASE)

pytestmark = pytest.mark.once


def _tracked(*folders: str) -> list[Path]:
    out = subprocess.run(["git", "ls-files", "-z", *folders], cwd=REPO, capture_output=True, text=True, check=True)
    return [REPO / name for name in out.stdout.split("\0") if name]


def test_no_work_log_references_in_the_product():
    found = []
    for path in _tracked(*PRODUCT):
        if path.suffix not in {".py", ".md", ".ipynb", ".yaml", ".yml", ".txt", ".toml", ".bib"} or not path.is_file():
            continue
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if WORK_LOG.search(line):
                found.append(f"{path.relative_to(REPO)}:{number}: {line.strip()[:120]}")
    assert not found, "work-log references (say what and why instead):\n" + "\n".join(found)


def test_no_working_papers_in_the_repository():
    assert not _tracked("reviews"), "reviews/ holds a review's evidence; the browser test is the lasting check"


def test_the_readme_is_a_page_for_users():
    """At most 120 lines; it names the two set-up commands and the three test tiers, and every profile."""
    text = (REPO / "README.md").read_text(encoding="utf-8")
    assert len(text.splitlines()) <= 120
    assert all(f"make {t}" in text for t in ("book", "test", "unit", "check"))
    profiles = sorted(p.stem for p in (REPO / "notebooks" / "profiles").glob("*.yaml"))
    assert all(f"| `{p}` |" in text for p in profiles), profiles
