"""The package as `pip install .` installs it: whole (helpers.chapters included), and honest about what needs a
checkout."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> Path:
    """A regular (non-editable) install of a wheel built from this checkout, into a folder of its own."""
    root = tmp_path_factory.mktemp("installed")
    wheels, target = root / "wheels", root / "site"
    quiet = ["--quiet", "--no-deps", "--disable-pip-version-check"]
    subprocess.run([sys.executable, "-m", "pip", "wheel", *quiet, "-w", str(wheels), str(REPO)], check=True)
    (wheel,) = wheels.glob("search_versus_depth-*.whl")
    subprocess.run([sys.executable, "-m", "pip", "install", *quiet, "--target", str(target), str(wheel)], check=True)
    return target


def _python(installed: Path, code_or_args: list[str], cwd: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(installed)}
    return subprocess.run([sys.executable, *code_or_args], cwd=cwd, env=env, capture_output=True, text=True)


@pytest.mark.once
def test_a_regular_install_holds_every_module(installed, tmp_path):
    done = _python(installed, ["-c", "import helpers, helpers.chapters.power_sampling, helpers.chapters.precision; "
                                     "print(helpers.__file__)"], tmp_path)
    assert done.returncode == 0, done.stderr
    assert Path(done.stdout.strip()).is_relative_to(installed)  # not this checkout's copy


@pytest.mark.once
def test_the_runner_outside_a_checkout_says_what_it_needs(installed, tmp_path):
    done = _python(installed, ["-m", "helpers", "run", "--profile", "smoke"], tmp_path)
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
    assert "runs from a checkout of the repository" in done.stderr and "make book" in done.stderr
    assert not (tmp_path / "results").exists() and not list(installed.glob("results"))


def test_importing_the_library_leaves_its_host_alone():
    """Importing every layer (the models, the engines, the graders, the chapters) changes no warning filter, no
    logger's level and no environment variable beyond what the libraries it uses set when they are imported; the
    book's entry points quiet their own process (`quiet_host`)."""
    code = """
import logging, os, warnings
import math_verify, matplotlib.pyplot, numpy, papermill, sympy, torch, transformers  # their own filters, first
names = ("transformers", "transformers.modeling_utils", "accelerate", "huggingface_hub", "math_verify")
before = (list(warnings.filters), {n: logging.getLogger(n).level for n in names}, dict(os.environ))
import helpers, helpers.models.loading, helpers.engines.slot, helpers.engines.vllm, helpers.evaluation.grading
import helpers.chapters.power_sampling, helpers.runner.run, helpers.cli
from helpers.evaluation.grading import is_equivalent
assert is_equivalent("\\\\frac{1}{2}", "0.5")
after = (list(warnings.filters), {n: logging.getLogger(n).level for n in names}, dict(os.environ))
assert after == before, [a for a, b in zip(after, before) if a != b]
from helpers.core.quiet import quiet_host
quiet_host()
assert os.environ["TOKENIZERS_PARALLELISM"] == "false" and logging.getLogger("transformers").level == logging.ERROR
print("alone")
"""
    env = {k: v for k, v in os.environ.items() if k != "TOKENIZERS_PARALLELISM"}
    done = subprocess.run([sys.executable, "-c", code], cwd=REPO, env=env, capture_output=True, text=True)
    assert done.returncode == 0 and done.stdout.strip() == "alone", done.stderr[-2000:]
