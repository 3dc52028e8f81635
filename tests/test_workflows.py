"""The publishing workflows cannot run here; actionlint checks them, and a broken one fails this test."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

WORKFLOWS = Path(__file__).resolve().parents[1] / ".github" / "workflows"


def _actionlint() -> str:
    found = shutil.which("actionlint") or shutil.which("actionlint", path=str(Path(sys.executable).parent))
    if not found:
        pytest.skip("actionlint is not installed (the dev extra installs it on Linux x86-64): WORKFLOWS NOT CHECKED")
    return found


def test_workflows_pass_actionlint():
    files = sorted(WORKFLOWS.glob("*.yml"))
    assert {f.name for f in files} >= {"tests.yml", "book.yml"}
    done = subprocess.run([_actionlint(), *map(str, files)], capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr


def test_a_broken_workflow_is_caught(tmp_path):
    broken = yaml.safe_load((WORKFLOWS / "tests.yml").read_text())
    broken["jobs"]["test"]["runs-on"] = "ubuntu-latest"
    broken["jobs"]["test"]["steps"].append({"uses": "actions/checkout@v4", "with": {"no-such-input": "${{ nope }}"}})
    path = tmp_path / "broken.yml"
    path.write_text(yaml.safe_dump(broken).replace("true:", "on:"))  # PyYAML reads the key `on` as True
    done = subprocess.run([_actionlint(), str(path)], capture_output=True, text=True)
    assert done.returncode != 0 and "nope" in done.stdout + done.stderr


def test_the_book_workflow_builds_the_full_book_and_deploys_it():
    book = yaml.safe_load((WORKFLOWS / "book.yml").read_text())
    steps = [s.get("run", "") + s.get("uses", "") for s in book["jobs"]["build"]["steps"]]
    assert "make check" in steps and "make book PROFILE=full" in steps and any("upload-pages-artifact" in s for s in steps)
    audit = [s.get("run", "") for s in book["jobs"]["audit"]["steps"]]
    assert any('helpers audit --all --since "$BEFORE"' in s for s in audit)  # a push's batches, re-derived
    assert any("helpers audit --all\n" in s for s in audit) and book[True]["schedule"]  # all of it, weekly
    assert book["jobs"]["build"]["if"] == book["jobs"]["deploy"]["if"] == "github.event_name != 'schedule'"
    assert set(book["jobs"]["deploy"]["needs"]) == {"build", "audit"}  # nothing is published unless the audit passes
    assert not any(s.startswith("actions/cache") for s in steps)  # the book builds from the release, not a cache
    assert book["jobs"]["deploy"]["steps"][0]["uses"].startswith("actions/deploy-pages")
    assert book[True]["push"]["branches"] == ["main"]  # PyYAML reads the key `on` as True


def test_workflows_grant_least_privilege_and_take_cpu_torch():
    book = yaml.safe_load((WORKFLOWS / "book.yml").read_text())
    tests = yaml.safe_load((WORKFLOWS / "tests.yml").read_text())
    assert book["permissions"] == tests["permissions"] == {"contents": "read"}
    assert book["jobs"]["deploy"]["permissions"] == {"pages": "write", "id-token": "write"}
    build = book["jobs"]["build"]
    assert build["permissions"] == {"contents": "read", "pages": "read"}  # it installs third-party wheels: no write
    assert book["jobs"]["audit"]["permissions"] == {"contents": "read"}
    make_book = next(s for s in build["steps"] if s.get("run", "").startswith("make book"))
    assert make_book["env"]["SVD_BASE_URL"] == "${{ steps.pages.outputs.base_url }}"  # the book's html_baseurl
    assert make_book["timeout-minutes"] <= 60 < build["timeout-minutes"] <= 360  # rendering, not computing
    for flow in (book, tests):
        assert "download.pytorch.org/whl/cpu" in flow["env"]["PIP_EXTRA_INDEX_URL"]
        job = flow["jobs"]["build" if flow is book else "test"]
        make_test = next(s for s in job["steps"] if s.get("run") == "make check")
        assert make_test["env"]["SVD_REQUIRE_BROWSER"] == "1"
        node20 = ("actions/checkout@v4", "actions/setup-python@v5", "actions/cache@v4", "actions/configure-pages@v5",
                  "actions/upload-pages-artifact@v3", "actions/deploy-pages@v4")
        uses = [s.get("uses", "") for j in flow["jobs"].values() for s in j["steps"]]
        assert not any(u.startswith(node20) for u in uses)
