"""The glued values of a build as data: every scalar a chapter's prose glues, per chapter, in one JSON file.

A refactor that should not move the book's results is checked by comparing two such files
(`python -m helpers glued-diff BEFORE.json AFTER.json`); the reproducibility page lists the values.
"""

from __future__ import annotations

import ast
import json
import math
from pathlib import Path

from helpers.core.jsonfile import JSONFileError, read_json


class GluedError(ValueError):
    """An executed chapter or a glued_values.json file that cannot be read as the book's glued values."""


GLUE_PREFIX = "application/papermill.record/"


def _parse(text: str):
    """The Python value behind a text/plain repr where it is a literal (numbers, strings), else the text."""
    try:
        value = ast.literal_eval(text)
    except (ValueError, SyntaxError, MemoryError, RecursionError):
        return text
    return value if isinstance(value, int | float | str | bool | type(None)) else text


def glued_values(notebook: Path) -> dict[str, object]:
    """name → value of every glued scalar or text of an executed notebook (figures are left out)."""
    try:
        nb = read_json(notebook)
    except JSONFileError as err:
        raise GluedError(f"{err}; execute the chapter again (python -m helpers run --only ...)") from None
    cells = nb.get("cells") if isinstance(nb, dict) else None
    if not isinstance(cells, list) or not all(isinstance(c, dict) and isinstance(c.get("outputs", []), list)
                                              for c in cells):
        raise GluedError(f"{notebook} is not a notebook (a JSON object with a list of cells); execute the chapter "
                         "again.")
    found: dict[str, object] = {}
    for cell in cells:
        for out in cell.get("outputs", []):
            meta = out.get("metadata", {}).get("scrapbook") if isinstance(out, dict) and isinstance(
                out.get("metadata", {}), dict) else None
            if not isinstance(meta, dict) or not isinstance(meta.get("name"), str) \
                    or not isinstance(out.get("data", {}), dict):
                continue
            data = {k.removeprefix(GLUE_PREFIX): v for k, v in out.get("data", {}).items()}
            if any(k.startswith("image/") for k in data):
                continue
            if "text/markdown" in data:
                value = data["text/markdown"]
                found[meta["name"]] = "".join(value) if isinstance(value, list) else value
            elif "text/plain" in data:
                text = data["text/plain"]
                found[meta["name"]] = _parse("".join(text) if isinstance(text, list) else text)
    return found


def collect(chapters_dir: Path, stems: list[str]) -> list[dict]:
    """[{chapter, name, value}] for the executed chapters under `chapters_dir`, in toc order."""
    rows = []
    for stem in stems:
        path = Path(chapters_dir) / f"{stem}.ipynb"
        if path.is_file():
            rows += [{"chapter": stem, "name": k, "value": v} for k, v in glued_values(path).items()]
    return rows


def write(chapters_dir: Path, stems: list[str]) -> list[dict]:
    """Write glued_values.json and the Markdown table the reproducibility page includes."""
    rows = collect(chapters_dir, stems)
    folder = Path(chapters_dir)
    (folder / "glued_values.json").write_text(json.dumps(rows, indent=1, ensure_ascii=False), encoding="utf-8")
    lines = ["| chapter | name | value |", "|---|---|---|"]
    for r in rows:
        value = r["value"]
        shown = (f"{value:,.0f}" if abs(value) >= 1e6 else f"{value:.6g}") if isinstance(value, float) else str(value)
        shown = " ".join(shown.split()).replace("|", "∣")
        lines.append(f"| {r['chapter']} | `{r['name']}` | {shown[:200] + ('…' if len(shown) > 200 else '')} |")
    (folder / "glued_values.md").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return rows


def _same(a, b, rel: float) -> bool:
    if isinstance(a, int | float) and isinstance(b, int | float) and not isinstance(a, bool):
        try:
            return math.isclose(a, b, rel_tol=rel, abs_tol=rel) or (math.isnan(a) and math.isnan(b))
        except OverflowError:  # an integer past float's range: only an exact match is the same value
            return a == b
    return a == b


def diff(before: list[dict], after: list[dict], rel: float = 1e-9) -> dict[str, list]:
    """What moved between two builds: {'changed': [(chapter, name, before, after)], 'added', 'removed'}."""
    old = {(r["chapter"], r["name"]): r["value"] for r in before}
    new = {(r["chapter"], r["name"]): r["value"] for r in after}
    return {"changed": [(*k, old[k], new[k]) for k in old if k in new and not _same(old[k], new[k], rel)],
            "added": [(*k, new[k]) for k in new if k not in old],
            "removed": [(*k, old[k]) for k in old if k not in new]}


def glue_all(values: dict, markdown: tuple[str, ...] = ()) -> None:
    """Glue every value for the chapter's prose (no display); names in `markdown` are glued as Markdown."""
    from IPython.display import Markdown
    from myst_nb import glue

    for name, value in values.items():
        glue(name, Markdown(value) if name in markdown else value, display=False)


def markdown(text: str):
    """A Markdown cell output (tables render as tables: the book parses outputs as MyST)."""
    from IPython.display import Markdown

    return Markdown(text)


def read_rows(where: str) -> list[dict]:
    """The glued values of a build, from a folder of executed chapters or a glued_values.json file, each row checked
    (chapter, name, value); a GluedError that says what `where` is instead."""
    from helpers.runner.profiles import toc_chapters

    path = Path(where)
    if path.is_dir():
        rows = collect(path, toc_chapters())
        if not rows:
            raise GluedError(f"{where} holds no executed chapter with glued values (book/chapters after "
                             "`python -m helpers run`)")
        return rows
    if path.is_file():
        try:
            rows = read_json(path)
        except JSONFileError as err:
            raise GluedError(f"{where} is not a glued_values.json file: {err}") from None
        if not isinstance(rows, list) or not all(
                isinstance(r, dict) and {"chapter", "name", "value"} <= set(r) and isinstance(r["chapter"], str)
                and isinstance(r["name"], str) and isinstance(r["value"], str | int | float | bool | type(None))
                for r in rows):
            raise GluedError(f"{where} is not a glued_values.json file: it must be a list of objects with chapter "
                             "and name (text) and value (a number, text or null)")
        return rows
    raise GluedError(f"{where} is neither a glued_values.json file nor a folder of executed chapters "
                     "(book/chapters after `python -m helpers run`)")
