"""The library's import structure: no module imports, even lazily, a module that imports it back; environment
names and the repository root have one home (helpers.env)."""

from __future__ import annotations

import ast
import re
from pathlib import Path

HELPERS = Path(__file__).resolve().parent.parent / "helpers"


def _modules() -> dict[str, ast.Module]:
    found = {}
    for path in sorted(HELPERS.rglob("*.py")):
        name = ".".join(path.relative_to(HELPERS.parent).with_suffix("").parts).removesuffix(".__init__")
        found[name] = ast.parse(path.read_text(encoding="utf-8"))
    return found


def import_graph() -> dict[str, set[str]]:
    """module -> the project's modules it imports anywhere in its body (function-level imports included)."""
    modules = _modules()
    graph: dict[str, set[str]] = {name: set() for name in modules}
    for name, tree in modules.items():
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                targets = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
            elif isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            else:
                continue
            graph[name] |= {t for t in targets if t in modules and t != name and t != "helpers"}
    return graph


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected groups of more than one module (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for nxt in sorted(graph[node]):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            group = []
            while True:
                member = stack.pop()
                group.append(member)
                if member == node:
                    break
            if len(group) > 1:
                found.append(sorted(group))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def test_the_circle_finder_finds_a_circle():
    assert circles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert circles({"a": {"b"}, "b": set()}) == []


def test_no_module_imports_a_module_that_imports_it_back():
    assert circles(import_graph()) == []


def test_the_decode_protocol_imports_no_engine_and_env_imports_nothing():
    graph = import_graph()
    assert graph["helpers.env"] == set()
    assert not graph["helpers.decoding"] & {"helpers.slot_engine", "helpers.vllm_engine", "helpers.plain"}


def test_environment_names_and_the_repository_root_have_one_home():
    homes: dict[str, list[str]] = {}
    for name, tree in _modules().items():
        for node in ast.walk(tree):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and re.fullmatch(r"SVD_[A-Z_]+",
                                                                                                 node.value):
                homes.setdefault(node.value, []).append(name)
        if name != "helpers.env":
            assert "Path(__file__).resolve().parent.parent" not in ast.unparse(tree), name
    assert homes and all(where == ["helpers.env"] for where in homes.values()), homes
