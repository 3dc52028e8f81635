"""Numbers typed into the book's prose, and those of them that a build computes.

A number a build computes belongs in the page as a glued value: typed, it stays as it was when a later build moves
it, and two pages that type it drift apart. This module lists every number typed into the prose of the chapters'
markdown cells and of the book's own pages (code, math, glued values, cross-references and links left out), marks
those in a sentence that cites a paper or the report (its figures are the paper's, not the build's), and finds the
uncited ones that equal a number the build glued (`collisions`), to the precision they are typed with. Only numbers
precise enough not to match a glued value by chance are checked: three significant digits or more, or a whole
number of 1,000 or more; small counts and two-digit shares are listed but not checked. The performance and
reproducibility pages are measurement logs, each number with the command and machine that measured it: listed, not
checked.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

_CODE = re.compile(r"^(`{3,})(?:\w*|\{code-cell\}.*)$\n.*?^\1\s*$", re.S | re.M)  # code blocks (not directives)
_DROPPED = [
    re.compile(r"^`{3,}.*$", re.M),  # the fence lines of directives: glued figures and tables, exercises
    re.compile(r"\{[a-z:-]+\}`[^`]*`"),  # roles: glued values, citations, references, downloads
    re.compile(r"`[^`]*`"),  # inline code and commands
    re.compile(r"\$\$.*?\$\$", re.S), re.compile(r"\$[^$\n]*\$"),  # mathematics
    re.compile(r"\]\([^)]*\)"), re.compile(r"https?://\S+"), re.compile(r"<[^>]+>"),  # link targets and HTML
    re.compile(r"^\s*:[a-z-]+:.*$", re.M),  # directive options
    re.compile(r"\b(?:19|20)\d\d\b"),  # years
    re.compile(r"\b[A-Za-z][\w.-]*\d[\w.-]*\b"),  # names with digits: Qwen2.5-Coder-0.5B, SmolLM2, arXiv ids, §4.2
]
NUMBER = re.compile(r"(?<![\w.])(\d{1,3}(?:,\d{3})+|\d+)(\.\d+)?\s?(%|×)?")
# What a build measures of itself (its run configuration: each chapter's time, peak memory and rates): a number typed
# with one of these units, outside the measurement logs and uncited, is a measurement that will drift
MEASURED = re.compile(r"\s?(?:minutes?|min|seconds?|s|hours?|h|tokens/s|tokens per second)\b")
MEMORY = re.compile(r"\s?(?:GiB|MiB|GB|MB)\b")  # a memory is measured where the sentence says it is a peak; else it
PEAK = re.compile(r"\bpeak\b")  # is a machine's size (Binder's 2 GiB, a laptop's 8 GiB), a fact of the machine
LOGS = ("performance", "reproducibility")  # pages of measurements, each with its command: listed, not checked
CONVENTIONS = {"95%", "100%", "0%"}  # an interval's level and a share's bounds: the book's conventions, not results
CITED = re.compile(r"\{cite|\breport\b|\bpaper\b|\bnotes\b|et al\.|§")
SENTENCE = re.compile(r"(?<=[.!?])\s+(?=[A-Z*(])|\n\s*\n")


@dataclass(frozen=True)
class Typed:
    """One number typed into a page: where, as typed, its value, the sentence it stands in, and whether that
    sentence cites a paper or the report."""

    page: str
    text: str
    value: float
    decimals: int
    percent: bool
    sentence: str
    cited: bool
    measured: bool = False  # typed with a unit of what a build measures of itself (`MEASURED`)

    @property
    def checked(self) -> bool:
        """Whether a build's value could be the source of this one: not cited, not on a measurement log (`LOGS`), not
        a convention (`CONVENTIONS`), and precise enough not to match a glued value by chance."""
        digits = len(self.text.replace(",", "").replace(".", "").rstrip("%×").strip().lstrip("0"))
        return (not self.cited and self.page not in LOGS and self.text.replace(" ", "") not in CONVENTIONS
                and (digits >= 3 if self.decimals > 0 or self.percent else self.value >= 1000))


def prose(text: str) -> str:
    """The words a reader reads as prose: `text` without code, math, glued values, references and link targets."""
    for pattern in _DROPPED:
        text = pattern.sub(" ", text)
    return text


def typed_numbers(page: str, text: str) -> list[Typed]:
    """Every number typed into the prose of `text` (one page's markdown), sentence by sentence."""
    found = []
    units = []  # sentences, and each table row on its own: a row is read as a unit, not with the whole table
    for block in re.split(r"((?:^\|.*\n?)+)", _CODE.sub(" ", text), flags=re.M):
        units += block.splitlines() if block.startswith("|") else SENTENCE.split(block)
    for sentence in units:
        cited = bool(CITED.search(sentence))
        words = prose(sentence)
        for m in NUMBER.finditer(words):
            whole, fraction, unit = m.group(1), m.group(2) or "", m.group(3)
            found.append(Typed(page, m.group(0).strip(), float(whole.replace(",", "") + fraction),
                               max(len(fraction) - 1, 0), unit == "%", " ".join(sentence.split())[:200], cited,
                               bool(MEASURED.match(words, m.end()) or (MEMORY.match(words, m.end())
                                                                     and PEAK.search(words, m.end(), m.end() + 40)))))
    return found


def _numbers(rows: Iterable[dict]) -> list[tuple[str, float]]:
    """(chapter/name, value) of every glued number (not a flag, not text)."""
    return [(f"{r['chapter']}/{r['name']}", float(r["value"])) for r in rows
            if isinstance(r.get("value"), int | float) and not isinstance(r["value"], bool)
            and math.isfinite(r["value"])]


def _matches(t: Typed, value: float) -> bool:
    """Whether `value`, as a page would print it at `t`'s precision (a share as a percentage where `t` is one),
    reads as `t`."""
    candidates = [value, 100 * value] if t.percent and abs(value) <= 1 else [value]
    return any(round(abs(c), t.decimals) == t.value for c in candidates)


def collisions(typed: Sequence[Typed], glued: Iterable[dict]) -> list[tuple[Typed, list[str]]]:
    """The typed numbers a build computes, each with what it is: the checked ones (`Typed.checked`) that equal a
    number the build glued (with the glued names they equal), and, outside the measurement logs and uncited, those
    typed with a unit of what the build measures of itself (its times, memory and rates: `MEASURED`), which will
    drift from the build's own measurement. Numbers that should be glued or referred to, not typed."""
    numbers = _numbers(glued)
    out = []
    for t in typed:
        if t.checked and (names := [name for name, v in numbers if _matches(t, v)]):
            out.append((t, names))
        elif t.measured and not t.cited and t.page not in LOGS:
            out.append((t, ["a measurement of the build itself (its run configuration)"]))
    return out


def book_pages(chapters: dict[str, str], pages: dict[str, str]) -> list[Typed]:
    """The typed numbers of a build: its chapters' markdown cells (`chapters`: stem -> the cells' text joined) and the
    book's own pages (`pages`: name -> text)."""
    return [t for name, text in {**chapters, **pages}.items() for t in typed_numbers(name, text)]


def report(typed: Sequence[Typed], found: Sequence[tuple[Typed, list[str]]]) -> str:
    """The list in Markdown: how many numbers each page types, how many of them are cited or checked, and every
    checked number that equals a glued value."""
    pages: dict[str, list[Typed]] = {}
    for t in typed:
        pages.setdefault(t.page, []).append(t)
    lines = ["| page | typed | in a citing sentence | checked against the build |", "|---|---|---|---|"]
    lines += [f"| {page} | {len(ts)} | {sum(t.cited for t in ts)} | {sum(t.checked for t in ts)} |"
              for page, ts in pages.items()]
    if found:
        lines += ["", "Typed numbers that equal a value this build computes (glue them instead):", ""]
        lines += [f"- {t.page}: {t.text} ({', '.join(names[:3])}): “{t.sentence}”" for t, names in found]
    return "\n".join(lines) + "\n"


def pages_of(notebooks: Path, book: Path) -> tuple[dict[str, str], dict[str, str]]:
    """(chapters, pages) for `book_pages`: each notebook's markdown cells in `notebooks`, each Markdown page in `book`."""
    chapters = {}
    for path in sorted(Path(notebooks).glob("*.ipynb")):
        cells = json.loads(path.read_text(encoding="utf-8")).get("cells", [])
        chapters[path.stem] = "\n\n".join("".join(c.get("source", "")) for c in cells if c.get("cell_type") == "markdown")
    return chapters, {path.stem: path.read_text(encoding="utf-8") for path in sorted(Path(book).glob("*.md"))}


def check_build(chapters_dir: Path, book: Path, glued: Sequence[dict]) -> list[tuple[Typed, list[str]]]:
    """A build's typed numbers against its glued values: the list written beside them (typed_numbers.md), and the
    collisions returned."""
    typed = book_pages(*pages_of(chapters_dir, book))
    found = collisions(typed, glued)
    (Path(chapters_dir) / "typed_numbers.md").write_text(report(typed, found), encoding="utf-8")
    return found
