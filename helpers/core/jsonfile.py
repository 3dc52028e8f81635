"""Reading a JSON file that may be damaged or hostile: one reader, whose every failure is one clear error."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any


class JSONFileError(ValueError):
    """A JSON file cannot be read as JSON; the message names the file and says why."""


def read_json(path: str | Path) -> Any:
    """The value a JSON file holds. Unreadable, not UTF-8, not JSON, or nested deeper than Python's parser
    follows (its recursion limit): a `JSONFileError`, never a traceback from inside `json`."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise JSONFileError(f"{path} is not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    except OSError as exc:
        raise JSONFileError(f"{path} cannot be read ({exc.strerror or exc})") from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise JSONFileError(f"{path} is not valid JSON ({exc})") from None
    except RecursionError:
        raise JSONFileError(f"{path} is nested too deeply to be read as JSON") from None
    except ValueError:  # Python's limit on the digits of an integer (sys.set_int_max_str_digits)
        raise JSONFileError(f"{path} holds a number too long to be a value of this book's files") from None
