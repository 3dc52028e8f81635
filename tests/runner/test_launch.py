"""The first cell of a notebook opened by hand: what it installs and what it says about memory."""

from __future__ import annotations

import json

import pytest

from helpers.core import env
from helpers.runner import launch
from helpers.runner.profiles import NOTEBOOKS, RunError, toc_chapters


def test_each_profiles_memory_is_its_largest_model_decoding_plus_the_kernel():
    for profile, model in (("smoke", "smollm2-135m"), ("default", "qwen2.5-coder-0.5b")):
        assert launch.profile_memory(profile) == pytest.approx(launch.PEAK_GIB[model] + launch.DECODE_GIB[model]
                                                               + launch.KERNEL_GIB)
    assert launch.profile_memory("paper") is None  # hub models: not sized here


def test_binder_is_told_that_smoke_fits_and_default_does_not():
    lines = launch.advice(launch.BINDER_GIB, ["smoke", "default", "paper"])
    assert lines[0].startswith("  smoke: about 1.9 GiB, fits")
    assert lines[1].startswith("  default: about 5.3 GiB, does not fit")
    assert "hub models" in lines[2]


def test_outside_a_checkout_the_cell_says_how_to_get_one(monkeypatch):
    monkeypatch.delenv(env.BOOK_RUN, raising=False)
    monkeypatch.setattr("helpers.runner.planning.in_checkout", lambda root=None: False)
    with pytest.raises(RunError, match="git clone"):
        launch.check_setup("smoke")


def test_in_a_book_run_the_cell_does_nothing(monkeypatch, capsys):
    monkeypatch.setenv(env.BOOK_RUN, "1")
    monkeypatch.setattr("helpers.runner.installs.install_models", lambda profile: pytest.fail("a book run installs nothing here"))
    launch.check_setup("smoke")
    assert capsys.readouterr().out == ""


def test_the_cell_installs_only_what_is_missing_and_names_the_profile(monkeypatch, capsys):
    monkeypatch.delenv(env.BOOK_RUN, raising=False)
    asked = []
    monkeypatch.setattr("helpers.runner.installs.install_models", lambda profile: asked.append(profile) or [])
    launch.check_setup("smoke")
    out = capsys.readouterr().out
    assert asked == ["smoke"] and "Set up for the 'smoke' profile." in out and "smoke: about 1.9 GiB" in out


@pytest.mark.parametrize("stem", toc_chapters())
def test_every_chapter_opens_with_the_launch_cell_after_its_parameters(stem):
    cells = json.loads((NOTEBOOKS / f"{stem}.ipynb").read_text())["cells"]
    code = [c for c in cells if c["cell_type"] == "code"]
    assert "parameters" in code[0]["metadata"]["tags"]
    assert code[1]["metadata"]["tags"] == ["remove-cell"] and "check_setup(profile)" in "".join(code[1]["source"])
