"""The JSON-lines logs a chapter's kernel writes for the runner (its pulse, its use of the store): one writer and
one reader, so both logs follow the same two rules.

A log is an account of the work, never a condition of it: a line that cannot be written is dropped, not raised
(`append`). A kernel stopped mid-write leaves a line cut off: the reader skips it, and any line that is not a JSON
object, instead of failing on it (`read`).
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable


def append(path: str | os.PathLike | None, lines: Iterable[dict]) -> None:
    """Append `lines` to the log at `path`, one compact JSON object a line, in one write (None: nothing written).
    An `OSError` (a full disk, a removed folder) is dropped: the work goes on without its account."""
    if not path:
        return
    text = "".join(json.dumps(line, separators=(",", ":")) + "\n" for line in lines)
    if not text:
        return
    try:
        with open(path, "a", encoding="utf-8") as fh:
            fh.write(text)
    except OSError:
        pass


def read(path: str | os.PathLike) -> list[dict] | None:
    """The JSON objects the log at `path` holds, in order, less the lines that are not one (cut off, damaged);
    None where there is no readable log."""
    try:
        with open(path, encoding="utf-8") as fh:
            raw_lines = fh.read().splitlines()
    except (OSError, UnicodeDecodeError):
        return None
    lines = []
    for raw in raw_lines:
        try:
            line = json.loads(raw)
        except (ValueError, RecursionError):
            continue
        if isinstance(line, dict):
            lines.append(line)
    return lines
