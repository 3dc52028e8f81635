"""The notebooks stay thin: the measure itself, and the book's aim held against the committed notebooks."""

import json
from pathlib import Path

from helpers.runner.notebook_code import code_lines, measure, measure_all

NOTEBOOKS = Path(__file__).resolve().parents[2] / "notebooks"


def _notebook(tmp_path, *cells):
    nb = {"cells": [{"cell_type": kind, "metadata": {"tags": tags}, "source": src} for kind, tags, src in cells],
          "metadata": {}, "nbformat": 4, "nbformat_minor": 5}
    path = tmp_path / "nb.ipynb"
    path.write_text(json.dumps(nb))
    return path


def test_code_lines_skip_blanks_and_comments():
    assert code_lines("# a comment\n\nx = 1  # trailing\n   # indented comment\ny = 2\n") == 2


def test_measure_counts_definitions_loops_and_the_parameters_cell(tmp_path):
    path = _notebook(tmp_path, ("markdown", [], "# Title\nfor x in y: prose"),
                     ("code", ["parameters"], "a = 1\nb = 2\n"),
                     ("code", [], "%matplotlib inline\ndef f(x):\n    return x\nfor i in range(3):\n    f(i)\n"),
                     ("code", [], "g = lambda x: x\nsquares = [i * i for i in range(3)]\n"))
    m = measure(path)
    assert m.cells == [2, 5, 2] and m.lines == 9 and m.parameters_cell == 0
    assert m.definitions == 2 and m.loops == 1  # a comprehension is not a loop statement
    assert m.largest_logic_cell == 5


def test_committed_notebooks_meet_the_aim():
    """At most 345 lines of code in all notebooks (300 for the chapters, a line each for their exercises' values, the
    two sections that set two sizes of one family side by side, the report's Figures 1 and 2, chapter 03's floor
    sweep, naive depths, lens problems and length study: four parameters and a three-line section; chapters 04 and
    05's `seeds_at`, a depth searched on fewer seeds, and `mh_blocks`, the published loop's block count, chapter 04's settings glued for its comparison with the
    report's, and its Figure 2 across depth, two lines; chapter 04's longer cap, the cut's cost read again where the
    answers fit, three; Figure 4.5's marks of the terms the cap or the grader limits, one; its decomposition beside another setting's,
    a parameter, an import and two lines), no definitions,
    no loop statements, logic cells of 15 lines."""
    totals = measure_all(NOTEBOOKS)
    assert len(totals["notebooks"]) >= 4
    assert totals["total_lines"] <= 345, totals
    assert totals["definitions"] == 0 and totals["loops"] == 0, totals
    assert totals["largest_logic_cell"] <= 15, totals
