"""The library's import structure: no module imports, even lazily, a module that imports it back; environment
names and the repository root have one home (helpers.core.env)."""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from pathlib import Path

import pytest

import helpers

HELPERS = Path(__file__).resolve().parent.parent / "helpers"

# The package's own structure, the same on every transformers version: one run (the lowest-transformers run skips it).
pytestmark = pytest.mark.once


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


def test_no_chapter_imports_another_chapter():
    """What two chapters share lives below them (a chapter's module is its notebook's code, and its `_text` module
    the chapter's prose, which reads its own chapter's numbers and nothing else; `exercises` holds the exercises'
    checkers, which every chapter may use, and `common_text` the prose they share, problem sets and a critical depth
    in words, which every chapter's prose may use). A chapter's numbers never import its prose."""
    graph = import_graph()
    shared = ("helpers.chapters.exercises", "helpers.chapters.common_text")
    chapters = {m for m in graph if m.startswith("helpers.chapters.") and m not in shared}
    assert len(chapters) >= 6

    def chapter_of(module: str) -> str:
        return module.removesuffix("_text")

    crossing = {m: sorted(t for t in graph[m] & chapters - {m} if chapter_of(t) != chapter_of(m) or t.endswith("_text"))
                for m in chapters}
    assert {m: ts for m, ts in crossing.items() if ts} == {}


def test_every_chapter_keeps_its_prose_beside_its_numbers():
    """Each chapter module with sentences to write has a `_text` module for them, and its own functions return numbers:
    no function of a chapter's numbers module is named as prose (`*_sentence`, `*_table`, `*_text`)."""
    prose = re.compile(r"^def \w*(_sentence|_table|_text|_clause)\(", re.M)
    for path in sorted((HELPERS / "chapters").glob("*.py")):
        if path.stem.endswith("_text") or path.stem in ("__init__", "exercises"):
            continue
        assert not prose.findall(path.read_text(encoding="utf-8")), path.name


WORDING = {"PairedDifference", "percent_with_interval", "half_width", "format_p"}  # what prose may take from the
# statistics


def test_a_chapters_prose_computes_no_numbers():
    """A `_text` module words numbers its chapter computed: it imports no array or tensor library, and from the
    statistics only the difference type and the interval formatters (`WORDING`), so that every estimate, interval
    and test a page states is computed, and tested, in a numbers module."""
    for path in sorted((HELPERS / "chapters").glob("*_text.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                names = [a.name.split(".")[0] for a in node.names]
                assert not {"numpy", "torch", "scipy"} & set(names), (path.name, names)
            if isinstance(node, ast.ImportFrom) and node.module:
                assert node.module.split(".")[0] not in ("numpy", "torch", "scipy"), (path.name, node.module)
                if node.module == "helpers.evaluation.stats":
                    assert {a.name for a in node.names} <= WORDING, (path.name, [a.name for a in node.names])


ENGINE_CLASSES = {"Engine", "SlotEngine", "ReencodeEngine", "GenerateEngine", "VLLMEngine"}


def test_no_module_above_the_engines_names_a_concrete_engine_class():
    """Code above `engines/` asks for an engine by kind (`helpers.engines.registry.make_engine`) and types it by the
    interface (`Engine`); naming a class would tie a sampler or a chapter to one engine (docstrings may name them)."""
    named = {}
    for name, tree in _modules().items():
        if name.startswith("helpers.engines"):
            continue
        for node in ast.walk(tree):
            used = {node.id} if isinstance(node, ast.Name) else {node.attr} if isinstance(node, ast.Attribute) else \
                {a.name for a in node.names} if isinstance(node, ast.ImportFrom) else set()
            hits = used & (ENGINE_CLASSES - {"Engine"})
            if hits:
                named.setdefault(name, set()).update(hits)
    assert named == {}


def test_the_decode_protocol_imports_no_engine_and_env_imports_nothing():
    graph = import_graph()
    assert graph["helpers.core.env"] == set()
    assert not graph["helpers.engines.protocol"] & {"helpers.engines.slot", "helpers.engines.vllm", "helpers.samplers.plain"}


def test_environment_names_and_the_repository_root_have_one_home():
    homes: dict[str, list[str]] = {}
    for name, tree in _modules().items():
        for node in ast.walk(tree):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and re.fullmatch(r"SVD_[A-Z_]+",
                                                                                                 node.value):
                homes.setdefault(node.value, []).append(name)
        if name != "helpers.core.env":
            assert "Path(__file__)" not in ast.unparse(tree), name
    assert homes and all(where == ["helpers.core.env"] for where in homes.values()), homes


TOP = {"helpers", "helpers.cli", "helpers.__main__"}  # above every layer


def rank() -> dict[str, int]:
    """package name -> its row in helpers.LAYERS (0 = the bottom)."""
    return {package: row for row, packages in enumerate(helpers.LAYERS) for package in packages}


def package_of(module: str) -> str:
    return module.split(".")[1] if module not in TOP else "(top)"


def test_every_module_lives_in_a_layer():
    assert not [m for m in import_graph() if m not in TOP and package_of(m) not in rank()]


def test_every_import_goes_down_or_stays_in_its_package():
    """A package imports its own modules and those of lower rows: not its row's other package, nothing above."""
    rows = rank()
    wrong = [(m, t) for m, targets in import_graph().items() if m not in TOP for t in targets
             if package_of(t) != package_of(m) and (t in TOP or rows[package_of(t)] >= rows[package_of(m)])]
    assert wrong == []


def test_the_layer_check_finds_an_arrow_upwards(monkeypatch):
    graph = {"helpers.models.truncation": {"helpers.interp.metrics"}, "helpers.interp.metrics": set()}
    monkeypatch.setattr(sys.modules[__name__], "import_graph", lambda: graph)
    with pytest.raises(AssertionError):
        test_every_import_goes_down_or_stays_in_its_package()


STORE_USERS = {"helpers.interp.depth", "helpers.interp.studies"}  # the stored studies of the interp layer


def test_primitives_know_nothing_of_the_store():
    """Models, engines, samplers and the interp primitives compute; only stored studies and above keep records."""
    primitive = {"models", "interp", "engines", "samplers"}
    users = sorted(m for m, targets in import_graph().items()
                   if package_of(m) in primitive and "helpers.results.store" in targets)
    assert users == sorted(STORE_USERS)


def test_each_package_says_what_it_may_import():
    """The 'May import:' line of each package's docstring names exactly the packages of the rows below it."""
    rows = rank()
    for package, row in rows.items():
        doc = ast.get_docstring(ast.parse((HELPERS / package / "__init__.py").read_text(encoding="utf-8"))) or ""
        said = re.search(r"May import: (.*?)\.$", doc, re.M | re.S)
        assert said, f"helpers/{package}/__init__.py: no 'May import:' line"
        below = {p for p, r in rows.items() if r < row}
        named = set() if said.group(1) == "nothing of the library" else {n.strip() for n in said.group(1).split(",")}
        assert named == below, (package, named ^ below)


def test_each_package_imports_on_its_own_and_loads_nothing_above_it():
    """Every module of a package, imported in a fresh interpreter, works and loads no module of a higher row."""
    rows = rank()
    modules = import_graph()
    jobs = {}
    for package in rows:
        mine = sorted(m for m in modules if package_of(m) == package)
        code = (f"import importlib, sys\nfor m in {mine!r}:\n"
                "    try:\n        importlib.import_module(m)\n"
                "    except ModuleNotFoundError as err:  # vLLM's hooks need vLLM, which lives in its own environment\n"
                "        if not (err.name or '').startswith('vllm'): raise\n"
                "print('\\n'.join(sorted(m for m in sys.modules if m.startswith('helpers.'))))")
        jobs[package] = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                         text=True, cwd=HELPERS.parent)
    for package, job in jobs.items():
        out, err = job.communicate(timeout=300)
        assert job.returncode == 0, (package, err[-2000:])
        loaded = {package_of(m) for m in out.split() if m.count(".") >= 1 and m not in TOP} - {"(top)"}
        above = {p for p in loaded if rows.get(p, -1) > rows[package]}
        assert not above, (package, above)


def test_the_architecture_map_shows_every_package_and_module():
    """The book's layer map is drawn from LAYERS and the files on disk: a new module shows up in it unasked."""
    import xml.etree.ElementTree as ET

    from helpers.runner.architecture import FLOW, _wrap, layer_map_svg, modules

    svg = ET.fromstring(layer_map_svg())
    text = " ".join(t.text or "" for t in svg.iter("{http://www.w3.org/2000/svg}text"))
    for package in rank():
        assert f"{package}/" in text
        assert all(name in text for name in modules(package)), package
    assert {package for package, _ in FLOW} <= set(rank())
    assert len(svg.findall("{http://www.w3.org/2000/svg}circle")) == len(FLOW)
    assert _wrap(["a" * 5] * 9, 13, most=2) == ["aaaaa · aaaaa", "aaaaa · aaaaa …"]  # what does not fit is marked
