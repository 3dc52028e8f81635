"""Every kind of stored record is described once (helpers/results/kinds.py), and everything that keys, checks,
versions or audits records reads that description."""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

from helpers.evaluation import audit_studies
from helpers.results import kinds
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


def test_every_study_kind_says_how_the_audit_computes_it_again_and_within_what():
    assert audit_studies.STUDIES == kinds.STUDIES and "decode" not in kinds.STUDIES
    for name in kinds.STUDIES:
        assert isinstance(audit_studies.recompute(name), audit_studies.Recompute), name
        assert kinds.KINDS[name].tolerance_in("float32") is not None, name
    assert kinds.LOGIT_LENS.tolerance_in("bfloat16") == kinds.LOGIT_LENS.bfloat16_tolerance
    assert kinds.AGREEMENT.tolerance_in("bfloat16") is None and kinds.AGREEMENT.tolerance_in("float16") is None


def test_a_run_opened_by_its_kind_takes_the_kinds_name_version_and_shape(tmp_path, monkeypatch):
    from dataclasses import replace

    import pytest

    from helpers.results.store import Run

    config = {"model": "m", "k": 5, "direction": "forward"}
    run = Run(kinds.LOGIT_LENS, config, root=tmp_path)
    assert run.experiment == "logit_lens" and run.shape == record_shape("logit_lens", config)
    assert run.hash == Run("logit_lens", config, root=tmp_path).hash  # the same key as by its name
    assert Run(kinds.DECODE, {"method": "smc"}, root=tmp_path).shape == record_shape("decode", {"method": "smc"})
    with pytest.raises(ValueError, match="takes its shape from its kind"):
        Run(kinds.LOGIT_LENS, config, root=tmp_path, shape={"kl": float})
    monkeypatch.setitem(kinds.KINDS, "logit_lens", replace(kinds.LOGIT_LENS, version=2))
    assert Run(kinds.LOGIT_LENS, config, root=tmp_path).config["computation_version"] == 2


def test_the_audit_loads_the_model_each_study_names_and_none_where_it_needs_none():
    c = {"model": "m", "dtype": "float32"}
    pair = {"full": {"model": "f"}, "truncated": {"model": "t"}}
    again = audit_studies.recompute
    assert again("logit_lens").models(c) == [c]
    assert [m["model"] for m in again("agreement").models(pair)] == ["f", "t"]
    assert again("critical_depth").models(c) == [c]  # checked, never loaded: counted from decodes
    assert not again("critical_depth").loads and again("logit_lens").loads
    assert again("toy_convergence").models(c) == []


def test_no_storing_site_names_its_kind_by_a_literal():
    """`Run("decode", ..., shape=...)` beside the table would be a second description of the kind: every Run the
    book opens is opened by its Kind, which gives its name and shape, so renaming or adding a kind happens in one
    place."""
    described = []
    for path in HELPERS.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "Run" and (
                    (node.args and isinstance(node.args[0], ast.Constant))
                    or any(k.arg == "shape" for k in node.keywords)):
                described.append(f"{path.relative_to(HELPERS)}:{node.lineno}")
    assert described == []


def test_a_revision_bumped_in_the_kinds_entry_moves_exactly_the_keys_that_name_it(tiny, monkeypatch):
    """The decode kind's entry is the one owner of its samplers' revisions: bumping the draw moves every sampled
    decode's key and no greedy one; bumping the reference schedule moves reference MH only, SMC's resampling SMC
    only, and bfloat16's attention bfloat16 decodes on a CPU only. The toy study's key names its own revisions."""
    from dataclasses import replace

    from helpers.evaluation import toy_study
    from helpers.evaluation.decodes import DecodeSettings, decode_run
    from helpers.samplers import power, settings, smc
    from helpers.samplers.power import PowerConfig
    from helpers.samplers.smc import SMCConfig
    from helpers.samplers.target import Target

    model = tiny
    decodes = {"greedy": DecodeSettings("greedy", max_new_tokens=8),
               "temperature": DecodeSettings("temperature", max_new_tokens=8),
               "power": DecodeSettings("power", max_new_tokens=8, target=Target(2.0),
                                       power=PowerConfig(block_size=4, mcmc_steps=1, mode="reference")),
               "exact": DecodeSettings("power", max_new_tokens=8, target=Target(2.0),
                                       power=PowerConfig(block_size=4, mcmc_steps=1, mode="exact")),
               "smc": DecodeSettings("smc", max_new_tokens=8, target=Target(2.0), smc=SMCConfig(particles=2, block_size=4))}

    def keys() -> dict:
        return {name: decode_run(model, s).hash for name, s in decodes.items()}

    before = keys()
    assert settings.engine_key("slot", True, "float32") == {"draw": kinds.DECODE.revision("draw")}
    for name, moved in (("draw", {"temperature", "power", "exact", "smc"}), ("schedule", {"power"}),
                        ("resampling", {"smc"}), ("attention", set())):
        bumped = replace(kinds.DECODE, revisions={**kinds.DECODE.revisions, name: "next"} if name != "attention"
                         else {**kinds.DECODE.revisions, "attention": {"bfloat16": 3}})
        for module in (settings, power, smc):
            monkeypatch.setattr(module, "DECODE", bumped)
        after = keys()
        assert {k for k in before if after[k] != before[k]} == moved, name
        monkeypatch.undo()
    bumped = replace(kinds.DECODE, revisions={**kinds.DECODE.revisions, "attention": {"bfloat16": 3}})
    monkeypatch.setattr(settings, "DECODE", bumped)
    assert settings.engine_key("slot", False, "bfloat16") == {"attention": 3}
    assert settings.engine_key("slot", False, "bfloat16", "cuda:0") == {}
    monkeypatch.undo()
    toy = toy_study.toy_run(2.0, [0, 1], 4, 0, [2]).config
    assert {k: toy[k] for k in kinds.TOY_CONVERGENCE.revisions} == dict(kinds.TOY_CONVERGENCE.revisions)
    assert "acceptance" not in toy  # the curves' key is as it was; those that keep the moves accepted say so
    assert toy_study.toy_run(1.0, [4], 4, 0, [], acceptance=True).config["acceptance"] is True
    import pytest

    with pytest.raises(KeyError, match="names no revision 'dither'"):
        kinds.DECODE.revision("dither")
