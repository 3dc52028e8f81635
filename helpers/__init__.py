"""Helpers for the executable book *Search versus Depth*.

Modules: models, data, grading, residual, lens, sampling, store, plots, widgets, run.
Import the submodules you need; importing `helpers` itself is cheap.
"""

from helpers._quiet import silence_known_warnings

__version__ = "0.1.0"

silence_known_warnings()
