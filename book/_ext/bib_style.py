"""The bibliography's labels in the citations' own style: "Csordás et al., 2025", as the text cites it, where the
default alpha labels ("[CMP25]") matched nothing a reader sees in the prose.

Registers a pybtex formatting style, `authoryear` (the plain style with author–year labels, sorted by author, year
and title), which `_config.yml` names as `bibtex_default_style`.
"""

from __future__ import annotations

import string

from pybtex.plugin import register_plugin
from pybtex.style.formatting.plain import Style as Plain
from pybtex.style.labels import BaseLabelStyle


def _surname(person) -> str:
    return " ".join(part.render_as("text") for part in person.rich_prelast_names + person.rich_last_names)


class AuthorYearLabels(BaseLabelStyle):
    """'Surname, year', 'Surname and Surname, year', or 'Surname et al., year'; a, b, ... where two would clash."""

    def format_labels(self, sorted_entries):
        labels = [self._label(entry) for entry in sorted_entries]
        counts = {label: labels.count(label) for label in labels}
        seen: dict[str, int] = {}
        for label in labels:
            if counts[label] > 1:
                seen[label] = seen.get(label, 0) + 1
                yield label + string.ascii_lowercase[seen[label] - 1]
            else:
                yield label

    @staticmethod
    def _label(entry) -> str:
        people = entry.persons.get("author") or entry.persons.get("editor") or []
        names = [_surname(p) for p in people if _surname(p) != "others"]
        if not names:
            who = entry.fields.get("key", entry.key)
        elif len(names) == 1 and len(people) == 1:
            who = names[0]
        elif len(names) == 2 and len(people) == 2:
            who = f"{names[0]} and {names[1]}"
        else:
            who = f"{names[0]} et al."
        return f"{who}, {entry.fields.get('year', 'n.d.')}"


class AuthorYearStyle(Plain):
    default_label_style = AuthorYearLabels


def setup(app):
    register_plugin("pybtex.style.formatting", "authoryear", AuthorYearStyle)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
