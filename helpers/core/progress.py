"""Whether to draw tqdm progress bars: yes in Jupyter and terminals, no while the runner builds the book.

A bar drawn in a notebook is a widget that the executed notebook keeps, so a built page would show a stale
bar. The runner sets SVD_PROGRESS=0 for the kernels it starts (it prints each chapter's progress itself).
"""

from __future__ import annotations

import os
from collections.abc import Iterable

from helpers.core import env


def show_bars(progress: bool = True) -> bool:
    """`progress`, unless the environment turns bars off (SVD_PROGRESS=0)."""
    return bool(progress) and os.environ.get(env.PROGRESS, "1").strip() not in ("0", "false", "no")


def bar(iterable: Iterable | None = None, *, desc: str, progress: bool = True, **kwargs):
    """A `tqdm.auto` bar (a widget in Jupyter, text in a terminal) that vanishes when done, drawn only where
    `show_bars(progress)` allows."""
    from tqdm.auto import tqdm

    return tqdm(iterable, desc=desc, disable=not show_bars(progress), leave=False, **kwargs)
