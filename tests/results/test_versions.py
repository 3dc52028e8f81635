"""A version per stored computation: in the key past version 1, and a fingerprint of the code that fails when the
code changes and the version does not."""

from __future__ import annotations

import shutil
from dataclasses import replace
from pathlib import Path

import pytest

import helpers.results.versions as versions
from helpers.results.kinds import KINDS, LOGIT_LENS
from helpers.results.store import Run

pytestmark = pytest.mark.once


def test_every_experiment_the_book_stores_has_a_version_and_a_current_fingerprint():
    from helpers.runner.publish import record_shape

    for experiment in KINDS:
        record_shape(experiment, {})  # a stored experiment: the release knows its shape
    assert not versions.stale(), "\n".join(versions.stale())


def test_version_one_keeps_todays_keys_and_a_bump_makes_new_ones(tmp_path, monkeypatch):
    config = {"model": "m", "k": 5}
    before = Run("logit_lens", config, root=tmp_path).hash
    assert before == Run("unversioned", config, root=tmp_path).hash  # version 1 adds nothing to a key
    monkeypatch.setitem(KINDS, "logit_lens", replace(LOGIT_LENS, version=2))
    after = Run("logit_lens", config, root=tmp_path)
    assert after.hash != before and after.config["computation_version"] == 2


@pytest.fixture
def copy_of_helpers(tmp_path, monkeypatch) -> Path:
    """The fingerprints read from a copy of the package, which a test may edit."""
    copy = tmp_path / "helpers"
    shutil.copytree(versions.PACKAGE, copy, ignore=shutil.ignore_patterns("__pycache__"))
    monkeypatch.setattr(versions, "PACKAGE", copy)
    return copy


def test_a_changed_lens_function_without_a_new_version_fails(copy_of_helpers, monkeypatch):
    lens = copy_of_helpers / "interp" / "lens.py"
    text = lens.read_text()
    assert "kl[:-1] < fraction * kl.max()" in text and '"""(ED + 1) / L, the share' in text
    lens.write_text(text.replace('    """First layer l in 0..L-2 whose KL', '    """The first layer l in 0..L-2 whose KL')
                    .replace("# the flags", "# flags")  # a docstring and a comment: not a change of the code
                    .replace('f"k must be at least 1, got {k}"', 'f"k counts tokens: at least 1, not {k}"'))  # a message
    assert not versions.stale()
    lens.write_text(text.replace('    """(ED + 1) / L, the share of the depth in use."""\n', ""))  # a docstring gone
    assert not versions.stale()
    lens.write_text(text.replace("kl[:-1] < fraction * kl.max()", "kl[:-1] <= fraction * kl.max()"))
    complaints = versions.stale()
    assert any(c.startswith("logit_lens: its code") and "bump the version of 'logit_lens'" in c for c in complaints)
    assert not any(c.startswith("decode:") for c in complaints)  # the decodes run no lens code
    monkeypatch.setitem(KINDS, "logit_lens", replace(LOGIT_LENS, version=2))
    assert any(c.startswith("logit_lens: version 2, but the fingerprint was recorded at version 1")
               for c in versions.stale())
