"""A version per stored computation, part of its records' keys, and the fingerprint of the code that computes it.

A record is keyed by its inputs; the code that turns inputs into numbers is named by its kind's version
(`helpers.results.kinds`). Bump it when a change can move a number (a fixed lens, a new effective-depth rule): the key changes, so the book computes
again instead of reading the old records. Version 1 adds nothing to a key, so the records stored before versions
existed keep theirs.

`fingerprint(experiment)` hashes the code an experiment runs: the module that stores it and every `helpers` module
that module reaches through its imports, docstrings and comments left out. The words of its messages are
left out too (what a `raise` or a `print`, `warnings.warn` or `say` call says): rewording an error moves no number.
`FINGERPRINTS` (fingerprints.json beside this file) holds each experiment's fingerprint at its version; a test fails
when the code changes and the version does not, and says what to do: bump the version, or, for a change that cannot
move a number (a rename, a refactoring), record the new fingerprint with `python -m helpers.results.versions --update`.
"""

from __future__ import annotations

import ast
import hashlib
import json
import sys
from pathlib import Path

from helpers.core import env
from helpers.results.kinds import KINDS

# Modules that cannot move a stored number: progress and logging, the store's own mechanics, figures, the runner.
NO_NUMBERS = ("helpers.core.progress", "helpers.core.pulse", "helpers.core.budget", "helpers.core.quiet",
              "helpers.core.env", "helpers.core.jsonfile", "helpers.results", "helpers.plots", "helpers.runner",
              "helpers.bench")
FINGERPRINTS = env.REPO / "helpers" / "results" / "fingerprints.json"


def keyed(experiment: str, config: dict) -> dict:
    """`config` as the store keys it: with the computation's version where it is past 1."""
    version = KINDS[experiment].version if experiment in KINDS else 1
    return config if version == 1 else {**config, "computation_version": version}


PACKAGE = env.REPO / "helpers"  # the package's folder, in a checkout or installed


def _module_file(name: str) -> Path | None:
    """The source file of a `helpers` module, found by its path alone (nothing is imported)."""
    parts = name.split(".")[1:]
    for path in (PACKAGE.joinpath(*parts).with_suffix(".py"), PACKAGE.joinpath(*parts, "__init__.py")):
        if parts and path.is_file():
            return path
    return None


def _imports(name: str, tree: ast.AST) -> set[str]:
    """The `helpers` modules a module imports, at its top or inside functions (a lazy import runs all the same)."""
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            base = node.module if node.level == 0 else ".".join([*name.split(".")[:-node.level], node.module])
            found.add(base)
            found |= {f"{base}.{a.name}" for a in node.names}  # `from helpers.x import module`
    return {m for m in found if m.startswith("helpers.") and _module_file(m) is not None}


SAYING = ("print", "warn", "say", "note")  # calls whose text only tells a reader something: their words are not code


def _is_text(value: object) -> bool:
    return isinstance(value, ast.JoinedStr) or (isinstance(value, ast.Constant) and isinstance(value.value, str))


def _silenced(node: ast.AST) -> None:
    """Every text below `node` (a literal or an f-string) made empty, in place: what a message says cannot move a
    number."""
    for child in ast.walk(node):
        for name, value in ast.iter_fields(child):
            if _is_text(value):
                setattr(child, name, ast.Constant(""))
            elif isinstance(value, list):
                value[:] = [ast.Constant("") if _is_text(v) else v for v in value]


def _normalised(tree: ast.AST) -> str:
    """The module's code without its docstrings (comments are gone already) and without the words of its messages
    (what `raise` and `SAYING`'s calls say): what can change a number."""
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if isinstance(body, list) and body and isinstance(body[0], ast.Expr) \
                and isinstance(getattr(body[0], "value", None), ast.Constant) and isinstance(body[0].value.value, str):
            body[0:1] = [] if len(body) > 1 else [ast.Pass()]  # a docstring added or removed is no change
    for node in list(ast.walk(tree)):
        if isinstance(node, ast.Raise) and node.exc is not None:
            _silenced(node.exc)
        elif isinstance(node, ast.Call) and (getattr(node.func, "id", None) or getattr(node.func, "attr", None)) \
                in SAYING:
            _silenced(node)
    return ast.dump(tree, include_attributes=False)


def code_of(experiment: str) -> list[str]:
    """The modules an experiment runs: its storing module and what it reaches through imports, less `NO_NUMBERS`."""
    todo, seen = list(KINDS[experiment].stored_by), set()
    while todo:
        name = todo.pop()
        if name in seen or name.startswith(NO_NUMBERS):
            continue
        seen.add(name)
        path = _module_file(name)
        if path is not None:
            todo.extend(_imports(name, ast.parse(path.read_text(encoding="utf-8"))))
    return sorted(seen)


def fingerprint(experiment: str) -> str:
    """A sha256 of the code an experiment runs (`code_of`), docstrings and comments left out."""
    digest = hashlib.sha256()
    for name in code_of(experiment):
        path = _module_file(name)
        digest.update(name.encode() + b"\0")
        if path is not None:
            digest.update(_normalised(ast.parse(path.read_text(encoding="utf-8"))).encode())
    return digest.hexdigest()[:16]


def recorded() -> dict[str, dict]:
    """experiment -> {'version', 'fingerprint'} as last recorded."""
    return json.loads(FINGERPRINTS.read_text()) if FINGERPRINTS.is_file() else {}


def stale() -> list[str]:
    """What the recorded fingerprints say is wrong, one sentence per experiment (none: all current)."""
    out, known = [], recorded()
    for experiment, version in sorted((name, k.version) for name, k in KINDS.items()):
        now, then = fingerprint(experiment), known.get(experiment)
        if then is None:
            out.append(f"{experiment}: no fingerprint is recorded; run python -m helpers.results.versions --update")
        elif then["version"] != version:
            out.append(f"{experiment}: version {version}, but the fingerprint was recorded at version {then['version']}; "
                       "record the code of the new version with python -m helpers.results.versions --update")
        elif then["fingerprint"] != now:
            out.append(f"{experiment}: its code ({', '.join(code_of(experiment))}) changed at version {version}. If the "
                       f"change can move a number, bump the version of {experiment!r} in helpers/results/kinds.py (its "
                       "records are then computed anew); if it cannot (a rename, a message), record it with "
                       "python -m helpers.results.versions --update")
    return out


def update() -> None:
    """Record every experiment's fingerprint at its version."""
    FINGERPRINTS.write_text(json.dumps({e: {"version": v, "fingerprint": fingerprint(e)}
                                        for e, v in sorted((name, k.version) for name, k in KINDS.items())},
                                       indent=1) + "\n")


if __name__ == "__main__":
    if sys.argv[1:] == ["--update"]:
        update()
        print(f"recorded {FINGERPRINTS}")
    else:
        print("\n".join(stale()) or "every experiment's fingerprint is current")
