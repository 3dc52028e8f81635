"""How much code the chapter notebooks hold: the measure behind "notebooks stay thin".

A line of code is a non-blank line of a code cell that is not a comment. The parameters cell is reported
on its own: it declares the values a profile may override and holds no logic.
"""

from __future__ import annotations

import ast
import json
from dataclasses import dataclass, field
from pathlib import Path


@dataclass
class NotebookCode:
    """Code size of one notebook: lines per code cell, definitions (functions, classes, lambdas) and loop statements."""

    path: str
    cells: list[int] = field(default_factory=list)
    parameters_cell: int | None = None  # index into `cells` of the cell tagged "parameters"
    definitions: int = 0
    loops: int = 0

    @property
    def lines(self) -> int:
        return sum(self.cells)

    @property
    def largest_logic_cell(self) -> int:
        """The longest code cell other than the parameters cell."""
        return max((n for i, n in enumerate(self.cells) if i != self.parameters_cell), default=0)


def code_lines(source: str) -> int:
    """Non-blank lines that are not comments."""
    return sum(1 for line in source.splitlines() if line.strip() and not line.strip().startswith("#"))


def measure(path: Path) -> NotebookCode:
    """Lines, definitions and loops in the code cells of one notebook (IPython magics are skipped)."""
    result = NotebookCode(str(path))
    for cell in json.loads(Path(path).read_text(encoding="utf-8"))["cells"]:
        if cell["cell_type"] != "code":
            continue
        source = "".join(cell["source"])
        if "parameters" in cell.get("metadata", {}).get("tags", []):
            result.parameters_cell = len(result.cells)
        result.cells.append(code_lines(source))
        python = "\n".join(line for line in source.splitlines() if not line.lstrip().startswith(("%", "!")))
        for node in ast.walk(ast.parse(python)):
            result.definitions += isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda))
            result.loops += isinstance(node, (ast.For, ast.AsyncFor, ast.While))
    return result


def measure_all(folder: Path) -> dict:
    """Every notebook of `folder`, with the totals the book's aim is stated in."""
    notebooks = [measure(p) for p in sorted(Path(folder).glob("*.ipynb"))]
    return {
        "notebooks": {Path(n.path).name: {"lines": n.lines, "cells": " ".join(map(str, n.cells)), "parameters_cell": n.parameters_cell,
                                          "largest_logic_cell": n.largest_logic_cell, "definitions": n.definitions,
                                          "loops": n.loops} for n in notebooks},
        "total_lines": sum(n.lines for n in notebooks),
        "definitions": sum(n.definitions for n in notebooks),
        "loops": sum(n.loops for n in notebooks),
        "largest_logic_cell": max((n.largest_logic_cell for n in notebooks), default=0),
    }
