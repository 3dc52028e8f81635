"""Where problems come from: the generated arithmetic benchmark, MATH500 and GSM8K from the hub, and local files,
each record checked before it becomes a `Problem`.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterable, Sequence
from pathlib import Path

from helpers.core.checks import is_count
from helpers.data.arithmetic import LEVELS, arithmetic_problems
from helpers.data.problems import DataError, Problem

HUB_SETS: dict[str, dict] = {
    "math500": {"repo": "HuggingFaceH4/MATH-500", "config": None, "split": "test",
                "fields": {"question": "problem", "answer": "answer", "level": "level", "id": "unique_id",
                           "solution": "solution"}},
    "gsm8k": {"repo": "openai/gsm8k", "config": "main", "split": "test",
              "fields": {"question": "question", "answer": "answer"}},
}


def _gsm8k_final(answer: str) -> tuple[str, str]:
    """GSM8K answers end with '#### 42'; return (final answer, worked solution)."""
    solution, _, final = answer.rpartition("####")
    return final.strip().replace(",", ""), solution.strip()


def _level(value) -> int | None:
    """A record's level as an integer: 3, 3.0, '3' and 'Level 3' all read as 3; anything else as None."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        return int(value) if float(value).is_integer() else None
    if isinstance(value, str):
        match = re.fullmatch(r"\s*(?:level\s*)?(\d+)\s*", value, flags=re.IGNORECASE)
        return int(match.group(1)) if match else None
    return None


def _records_to_problems(records: Iterable[dict], fields: dict[str, str], source: str) -> list[Problem]:
    problems = []
    for i, rec in enumerate(records):
        if not isinstance(rec, dict):
            raise DataError(f"Record {i} of {source} is a {type(rec).__name__} ({str(rec)[:40]!r}), not a mapping: "
                            "each problem must be an object with a question and an answer field.")
        try:
            question, answer = rec[fields["question"]], rec[fields["answer"]]
        except KeyError as exc:
            raise DataError(f"Record {i} of {source} has no field {exc.args[0]!r}; its fields are "
                            f"{sorted(rec)}. Pass fields={{'question': ..., 'answer': ...}}.") from None
        solution = rec.get(fields["solution"]) if "solution" in fields else None
        for name, value in (("question", question), ("answer", answer)):
            if not _scalar(value):
                raise DataError(f"Record {i + 1} of {source}: its {name} ({fields[name]!r}) is {str(value)[:40]!r}; "
                                "it must be text or a finite number.")
        if not str(question).strip():
            raise DataError(f"Record {i + 1} of {source} has an empty question.")
        answer = str(answer)
        if source == "gsm8k" and "####" in answer:
            answer, solution = _gsm8k_final(answer)
        problems.append(Problem(id=str(rec.get(fields.get("id", "id"), f"{source}-{i}")), question=str(question),
                                answer=answer, level=_level(rec.get(fields.get("level", "level"))),
                                source=source, solution=solution))
    if not problems:
        raise DataError(f"{source} holds no problems: give a JSON list or JSON lines of records with a question "
                        "and an answer.")
    seen: dict[str, int] = {}
    for i, p in enumerate(problems):
        if p.id in seen:
            raise DataError(f"Records {seen[p.id] + 1} and {i + 1} of {source} share the id {p.id!r}; ids must be "
                            "unique (results are stored by id).")
        seen[p.id] = i
    return problems


def _scalar(value) -> bool:
    """Text, or a finite number that is not a boolean: what a question or an answer can be."""
    if isinstance(value, str):
        return True
    if isinstance(value, bool) or not isinstance(value, int | float):
        return False
    return math.isfinite(value)


def load_local(path: str | Path, fields: dict[str, str] | None = None, source: str | None = None) -> list[Problem]:
    """Problems from a JSON list or JSONL file; `fields` maps 'question'/'answer'/... to the file's keys."""
    path = Path(path)
    if not path.is_file():
        raise DataError(f"No such problem file: {path}")
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise DataError(f"{path} is not UTF-8 text ({exc.reason} at byte {exc.start}); save it as UTF-8.") from None
    try:
        records = json.loads(text) if text.lstrip().startswith("[") else [
            json.loads(line) for line in text.splitlines() if line.strip()]
    except json.JSONDecodeError as exc:
        raise DataError(f"{path} is neither a JSON list nor JSON lines: {exc}") from None
    except RecursionError:
        raise DataError(f"{path} is nested too deeply to be a problem file (records are flat objects).") from None
    except ValueError:  # an integer past Python's digit limit (sys.set_int_max_str_digits)
        raise DataError(f"{path} holds a number too long to read; write long answers as text (in quotes).") from None
    fields = {"question": "question", "answer": "answer", **(fields or {})}
    return _records_to_problems(records, fields, source or path.stem)


def load_hub(name: str, offline: bool | None = None) -> list[Problem]:
    """MATH500 or GSM8K from the Hugging Face hub (needs the `datasets` package and a network)."""
    spec = HUB_SETS[name]
    try:
        import datasets
    except ImportError:
        raise DataError(f"Loading {name} from the hub needs the `datasets` package: pip install datasets "
                        "(or `pip install -e .[hub]`). Alternatively pass a local JSON/JSONL file.") from None
    try:
        rows = datasets.load_dataset(spec["repo"], spec["config"], split=spec["split"])
    except Exception as exc:  # datasets raises many types for the same "cannot reach the hub" situation
        raise DataError(f"Could not load {spec['repo']} from the Hugging Face hub ({type(exc).__name__}). "
                        "Offline? Use the embedded 'arithmetic' set, or download the data elsewhere and pass "
                        "a local JSON/JSONL file with load_problems(path, fields=...).") from exc
    return _records_to_problems(rows, spec["fields"], name)


def load_problems(name: str, n: int | None = None, levels: Sequence[int] | None = None, seed: int = 0,
                  fields: dict[str, str] | None = None) -> list[Problem]:
    """A problem set by name: 'arithmetic', 'math500', 'gsm8k', or a path to a local JSON/JSONL file.

    For 'arithmetic', `n` is the number per level (None: 10); otherwise the first `n` problems (after level
    filtering; None: all of them).
    """
    if n is not None and not is_count(n, 1):
        raise DataError(f"n (problems{' per level' if name == 'arithmetic' else ''}) must be an integer of at least "
                        f"1, or None, got {n!r}.")
    if levels is not None:
        if isinstance(levels, int | str) or not all(isinstance(v, int) and not isinstance(v, bool) for v in levels):
            raise DataError(f"levels must be a list of integers such as [1, 2, 3], got {levels!r}.")
        if not levels:
            raise DataError("levels is an empty list: give the levels to use, or None for all of them.")
    if not isinstance(name, str):
        raise DataError(f"The problem set must be named by a string, got {name!r}.")
    if name == "arithmetic":
        outside = sorted(set(levels or ()) - set(LEVELS))
        if outside:
            raise DataError(f"Arithmetic levels are {sorted(LEVELS)}; levels {outside} do not exist.")
        return arithmetic_problems(n or 10, levels or tuple(LEVELS), seed)
    if name in HUB_SETS:
        problems = load_hub(name)
    elif Path(name).suffix in {".json", ".jsonl"} or Path(name).is_file():
        problems = load_local(name, fields)
    else:
        raise DataError(f"Unknown problem set {name!r}: use 'arithmetic', 'math500', 'gsm8k' or a JSON/JSONL path.")
    if levels:
        found = sorted({p.level for p in problems if p.level is not None})
        problems = [p for p in problems if p.level in set(levels)]
        if not problems:
            raise DataError(f"No problem of {name} has a level in {list(levels)}; its levels are {found or 'none'}.")
    return problems[:n] if n else problems
