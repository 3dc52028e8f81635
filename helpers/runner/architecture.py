"""The library's map for the book's architecture page: its packages in layers, drawn from `helpers.LAYERS` and the
modules on disk at build time (so it cannot drift), with the path one glued number takes from a profile.
"""

from __future__ import annotations

from html import escape
from pathlib import Path

import helpers

HELPERS = Path(helpers.__file__).resolve().parent

# The path of a glued number, as (package, what happens there), in order: down from the runner to the model and
# the store, and back up to the page.
FLOW: tuple[tuple[str, str], ...] = (
    ("runner", "a profile's parameters are checked by the samplers' own constructors; papermill writes them in"),
    ("chapters", "the notebook makes one call per section to its chapter module"),
    ("evaluation", "decodes are asked for per model, depth and method, and read back from the store when there"),
    ("samplers", "each method is a program: greedy, Metropolis–Hastings towards p^α, SMC"),
    ("engines", "one driver runs the programs on the transformers slot engine or on vLLM"),
    ("models", "the model, truncated by stitch-and-preserve, computes the logits"),
    ("results", "each finished answer is written to the store at once, keyed by what produced it"),
    ("evaluation", "answers are graded; accuracies get Wilson intervals and paired tests"),
    ("plots", "a figure is drawn from the same results"),
    ("runner", "the chapter's numbers are glued into its prose and into glued_values.json"),
)


def modules(package: str) -> list[str]:
    """The modules of one package, as on disk (its __init__ left out)."""
    return sorted(p.stem for p in (HELPERS / package).glob("*.py") if p.stem != "__init__")


def layer_map_svg(width: int = 760, row: int = 64) -> str:
    """An SVG of the layers, bottom row at the bottom, each package a box naming its modules, and the numbered
    path of `FLOW` through them."""
    rows = helpers.LAYERS
    top, left, boxes_right = 26, 6, 560
    height = top + row * len(rows) + 10
    place: dict[str, tuple[float, float, float]] = {}  # package -> (left, right, middle height)
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {width} {height}" role="img" '
             f'aria-label="The packages of helpers in layers" font-family="sans-serif" font-size="13">']
    for r, packages in enumerate(rows):
        y = top + row * (len(rows) - 1 - r)
        span = (boxes_right - left) / len(packages)
        for i, package in enumerate(packages):
            x0, x1 = left + i * span, left + (i + 1) * span - 8
            place[package] = (x0, x1, y + (row - 8) / 2)
            lines = _wrap(modules(package), (x1 - x0 - 16) / 5.0)  # about 4.7 px a character at 11 px
            parts.append(f'<rect x="{x0:.0f}" y="{y}" width="{x1 - x0:.0f}" height="{row - 8}" rx="5" '
                         f'fill="#eef3f8" stroke="#1f5f8b"/>')
            parts.append(f'<text x="{x0 + 8:.0f}" y="{y + 15}" font-weight="bold" fill="#1f5f8b">'
                         f'{escape(package)}/</text>')
            for k, line in enumerate(lines):
                parts.append(f'<text x="{x0 + 8:.0f}" y="{y + 29 + 12 * k}" font-size="11" '
                             f'fill="#333">{escape(line)}</text>')
    points = []
    for step, (package, _) in enumerate(FLOW, start=1):
        x = boxes_right + 14 + 17 * step
        points.append((x, place[package][2]))
    parts.append(f'<text x="{width - 4}" y="14" text-anchor="end" font-size="11" fill="#d1495b">'
                 'the path of one glued number (steps below)</text>')
    parts.append('<polyline fill="none" stroke="#d1495b" stroke-width="1.5" points="'
                 + " ".join(f"{x:.0f},{y:.0f}" for x, y in points) + '"/>')
    for step, (x, y) in enumerate(points, start=1):
        parts.append(f'<circle cx="{x:.0f}" cy="{y:.0f}" r="8" fill="#d1495b"/>')
        parts.append(f'<text x="{x:.0f}" y="{y + 4:.0f}" text-anchor="middle" fill="white" font-size="10">'
                     f'{step}</text>')
    parts.append("</svg>")
    return "\n".join(parts)


def _wrap(names: list[str], chars: float, most: int = 3) -> list[str]:
    """Module names joined by ' · ' in lines of about `chars` characters, at most `most` lines (the last one
    ending in '…' when names are left over)."""
    lines: list[str] = []
    for name in names:
        if lines and len(lines[-1]) + 3 + len(name) <= chars:
            lines[-1] += " · " + name
        elif len(lines) < most:
            lines.append(name)
        else:
            lines[-1] = lines[-1].rstrip(" …") + " …"
    return lines


def flow_steps() -> list[str]:
    """The numbered steps of the figure, as sentences: 'runner: ...'."""
    return [f"{package}: {what}" for package, what in FLOW]
