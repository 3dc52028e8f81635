"""Every kind of stored record is described once (helpers/results/kinds.py), and everything that keys, checks,
versions or audits records reads that description."""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

from helpers.evaluation import audit_studies
from helpers.results import kinds, versions
from helpers.runner.publish import record_shape

HELPERS = Path(__file__).resolve().parents[2] / "helpers"


def test_every_kind_names_code_that_exists_and_a_shape_its_storing_code_declares():
    for name, kind in kinds.KINDS.items():
        assert kind.name == name and kind.audit in ("decode", "study")
        for module in kind.stored_by:
            importlib.import_module(module)
        shape = record_shape(name, {"method": "greedy"})
        assert shape is not None, name
    assert record_shape("decode", {"method": "smc"}) != record_shape("decode", {"method": "greedy"})


def test_the_versions_the_fingerprints_and_the_audit_read_the_one_table():
    assert {n: k.version for n, k in kinds.KINDS.items()} == versions.VERSIONS
    assert {n: k.stored_by for n, k in kinds.KINDS.items()} == versions.ENTRY
    assert audit_studies.STUDIES == kinds.STUDIES and "decode" not in kinds.STUDIES
    assert {n: kinds.KINDS[n].tolerance for n in kinds.STUDIES} == audit_studies.TOLERANCE
    assert all(t is not None for t in audit_studies.TOLERANCE.values())
    assert set(audit_studies.RECOMPUTE) == set(kinds.STUDIES)  # every study kind is computed again one way


def test_the_audit_loads_the_model_each_study_names_and_none_where_it_needs_none():
    c = {"model": "m", "dtype": "float32"}
    pair = {"full": {"model": "f"}, "truncated": {"model": "t"}}
    assert audit_studies.RECOMPUTE["logit_lens"].models(c) == [c]
    assert [m["model"] for m in audit_studies.RECOMPUTE["agreement"].models(pair)] == ["f", "t"]
    assert audit_studies.RECOMPUTE["critical_depth"].models(c) == [c]  # checked, never loaded: counted from decodes
    assert not audit_studies.RECOMPUTE["critical_depth"].loads and audit_studies.RECOMPUTE["logit_lens"].loads
    assert audit_studies.RECOMPUTE["toy_convergence"].models(c) == []


def test_no_storing_site_names_its_kind_by_a_literal():
    """`Run("decode", ...)` beside the table would be a second description of the kind: every Run is named through
    a Kind (or a name passed in), so renaming or adding a kind happens in one place."""
    literals = []
    for path in HELPERS.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "Run" and node.args \
                    and isinstance(node.args[0], ast.Constant):
                literals.append(f"{path.relative_to(HELPERS)}:{node.lineno}")
    assert literals == []
