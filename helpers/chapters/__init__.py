"""One module per chapter: each section of a chapter is one call that returns arrays and the numbers its prose
glues. Notebooks hold parameters, these calls, a figure from their chapter's module of `helpers.plots` and prose.

May import: core, results, data, models, interp, engines, samplers, evaluation, plots.
"""

from __future__ import annotations


def start(seed: int) -> None:
    """A chapter's first call: its kernel quieted (`quiet_host`), the book's figure style, and python/numpy/torch
    seeded with `seed`. The number format models load in is no process setting: each call that loads a model takes
    the notebook's `dtype` parameter."""
    from helpers.core.quiet import quiet_host
    from helpers.plots import style
    from helpers.results import origin, usage

    quiet_host()  # the notebook's kernel: no stray stderr in the executed page
    usage.report_at_exit()  # run by the book's runner: this kernel's peak memory, written as it exits
    origin.read_now()  # the records this kernel stores name the code it started with
    style.setup(seed)
