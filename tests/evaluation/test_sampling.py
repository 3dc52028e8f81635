"""Stored decodes: keys come from the model and the settings, and one decode serves every chapter."""

from __future__ import annotations

import dataclasses

import pytest

import helpers.evaluation.decodes as sampling
from helpers.data.problems import Problem
from helpers.evaluation.decodes import DecodeSettings, decode_run, sample, sample_at_depths, solve
from helpers.samplers.power import PowerConfig
from helpers.samplers.settings import Searches
from helpers.samplers.target import Target

PROBLEMS = [Problem(id=f"p{i}", question=q, answer=a, level=lvl)
            for i, (q, a, lvl) in enumerate([("Ada has 3 apples .", "3", 1), ("0 1 2 3 + 4", "7", 2),
                                              ("How many apples does Ada have now ?", "7", 3)])]
POWER = PowerConfig(block_size=4, mcmc_steps=1)


def _hash(model, method="temperature", **kw):
    args = {"max_new_tokens": 8, "shots": 0, "seed": 0, **kw}
    if method == "power":
        args.setdefault("power", POWER)
    if method in ("power", "low_temperature"):
        args.setdefault("target", Target(2.0))
    return decode_run(model, DecodeSettings(method, **args)).hash


def test_every_setting_that_changes_numbers_changes_the_key(tiny):
    model = tiny
    base = {"power": _hash(model, "power"), "low_temperature": _hash(model, "low_temperature"),
            "temperature": _hash(model)}
    assert len(set(base.values())) == 3 and _hash(model, "greedy") not in base.values()
    changed = [
        _hash(model, "power", target=Target(3.0)),
        _hash(model, "power", power=dataclasses.replace(POWER, block_size=2)),
        _hash(model, "power", power=dataclasses.replace(POWER, mcmc_steps=2)),
        _hash(model, "power", power=dataclasses.replace(POWER, mode="reference")),
        _hash(model, "power", power=dataclasses.replace(POWER, mode="reference", top_k=5)),
        _hash(model, "power", seed=1), _hash(model, "power", shots=1), _hash(model, "power", max_new_tokens=12),
        _hash(model.truncated(3, "stitch"), "power"), _hash(model.truncated(3, "naive"), "power"),
        _hash(model.truncated(2, "stitch"), "power"),
    ]
    assert base["power"] not in changed and len(set(changed)) == len(changed)
    assert _hash(model, "low_temperature", target=Target(4.0)) != base["low_temperature"]
    assert _hash(model, "low_temperature", top_k=5) != base["low_temperature"]
    assert _hash(model, seed=3) != base["temperature"] and _hash(model, top_k=5) != base["temperature"]
    # Greedy decoding depends on no seed; a full-depth "truncation" is the original model.
    assert _hash(model, "greedy", seed=5) == _hash(model, "greedy")
    assert _hash(model.truncated(model.config.num_hidden_layers, "stitch"), "greedy") == _hash(model, "greedy")
    assert model.truncated(3, "stitch").identity()["depth"] == 3


def test_problem_content_and_selection_name_the_units(tiny, tmp_path):
    model = tiny
    solve(model, PROBLEMS[:2], max_new_tokens=6, root=tmp_path, progress=False)
    run = decode_run(model, DecodeSettings("greedy", max_new_tokens=6), root=tmp_path)
    assert len(run) == 2
    edited = dataclasses.replace(PROBLEMS[0], question="Ada has 4 apples .")
    solve(model, [edited, PROBLEMS[2]], max_new_tokens=6, root=tmp_path, progress=False)
    assert len(decode_run(model, DecodeSettings("greedy", max_new_tokens=6), root=tmp_path)) == 4


def test_a_later_chapter_reuses_an_earlier_chapters_greedy_decode(tiny, tmp_path, monkeypatch):
    model = tiny
    # Chapter 03: the stitched model decodes the whole set greedily.
    first = solve(model.truncated(3, "stitch"), PROBLEMS, max_new_tokens=6, batch_size=2, root=tmp_path,
                  progress=False)

    def no_decoding(*args, **kwargs):
        raise AssertionError("the greedy decode was computed twice")

    monkeypatch.setattr(sampling, "decode_work", no_decoding)
    # Chapter 04: a fresh truncation of the same depth, another batch size and a subset of the problems.
    again = sample(model.truncated(3, "stitch"), PROBLEMS[1:], method="greedy", max_new_tokens=6,
                   batch_size=16, seed=7, root=tmp_path, progress=False)
    assert [r[0]["tokens"] for r in again] == [r["tokens"] for r in first[1:]]


def test_more_samples_extend_the_same_record_set(tiny, tmp_path):
    model = tiny
    two = sample(model, PROBLEMS[:1], method="temperature", n_seeds=2, max_new_tokens=6, root=tmp_path,
                 progress=False)
    three = sample(model, PROBLEMS[:1], method="temperature", n_seeds=3, max_new_tokens=6, batch_size=1,
                   root=tmp_path, progress=False)
    assert [r["tokens"] for r in three[0][:2]] == [r["tokens"] for r in two[0]]


def test_power_sampling_settings_have_one_home(tiny, tmp_path):
    model = tiny
    with pytest.raises(ValueError, match="no longer targets p\\^alpha"):
        sample(model, PROBLEMS, method="power", max_new_tokens=8, target=Target(2.0),
               power=PowerConfig(block_size=4, top_k=5), root=tmp_path)
    with pytest.raises(ValueError, match="needs power=PowerConfig"):
        sample(model, PROBLEMS, method="power", max_new_tokens=8, target=Target(2.0), root=tmp_path)
    with pytest.raises(ValueError, match="differs from max_new_tokens"):
        sample(model, PROBLEMS, method="power", max_new_tokens=8, target=Target(2.0, 12), power=POWER,
               root=tmp_path)
    with pytest.raises(ValueError, match="alpha must be a positive, finite number"):
        sample(model, PROBLEMS, method="low_temperature", target=Target(0), max_new_tokens=8,
               root=tmp_path)
    records = sample(model, PROBLEMS[:1], method="power", max_new_tokens=8, target=Target(2.0), power=POWER,
                     root=tmp_path, progress=False)
    assert records[0][0]["decoded_tokens"] >= records[0][0]["n_tokens"] >= 1


def test_sample_methods_limits_are_checked_before_any_decode(tiny):
    from helpers.evaluation.decodes import DecodeSettings, sample_methods

    model = tiny
    settings = {"greedy": DecodeSettings("greedy", 8)}
    with pytest.raises(ValueError, match="not asked for"):
        sample_methods(model, PROBLEMS, settings, n_seeds=1, batch_size=2, limits={"power": 2})
    with pytest.raises(ValueError, match="at least 1"):
        sample_methods(model, PROBLEMS, settings, n_seeds=1, batch_size=2, limits={"greedy": 0})


def test_every_decode_of_one_call_runs_in_one_engine_run_as_it_would_alone(tiny, tmp_path, monkeypatch):
    from helpers.evaluation.decodes import sample_methods
    from helpers.samplers.settings import chapter_settings
    from helpers.samplers.smc import SMCConfig

    model = tiny
    settings = chapter_settings(Searches(Target(2.0), POWER, SMCConfig(particles=2, block_size=4)), max_new_tokens=8, shots=0,
                                seed=0)
    runs, original = [], sampling.run_together
    monkeypatch.setattr(sampling, "run_together", lambda engine, works, *a, **k: runs.append(
        sorted(len(w.tasks) for w in works)) or original(engine, works, *a, **k))
    together = sample_methods(model, PROBLEMS, settings, n_seeds=2, batch_size=5, root=tmp_path / "one",
                              limits={"smc": 2}, progress=False)
    assert runs == [[1 * 3, 2 * 3, 2 * 3, 2 * 3, 2 * 2 * 2]]  # one run: greedy, three sampled decodes, SMC's particles
    for name, s in settings.items():
        alone = sample(model, PROBLEMS[:2] if name == "smc" else PROBLEMS, s, n_seeds=2, batch_size=5,
                       root=tmp_path / name, progress=False)
        assert [[r["tokens"] for r in p] for p in together[name]] == [[r["tokens"] for r in p] for p in alone], name
    del runs[:]
    again = sample_methods(model, PROBLEMS, settings, n_seeds=2, batch_size=5, root=tmp_path / "one",
                           limits={"smc": 2}, progress=False)
    assert runs == [] and again == together  # everything stored: read back, nothing decoded


def test_a_depth_sweep_decodes_in_one_run_what_each_truncation_decodes_alone(tiny, tmp_path, monkeypatch):
    model = tiny
    L = model.config.num_hidden_layers
    variants = [("stitch", L), ("stitch", L - 1), ("naive", L - 1), ("stitch", 2), ("naive", 1), ("naive", L)]
    settings = DecodeSettings("temperature", 8, seed=3)
    runs, original = [], sampling.run_together
    monkeypatch.setattr(sampling, "run_together", lambda engine, works, *a, **k: runs.append(
        [len(w.tasks) for w in works]) or original(engine, works, *a, **k))
    swept = {v: by_name["decode"] for v, by_name in sample_at_depths(
        model, PROBLEMS, {"decode": settings}, variants, n_seeds=2, batch_size=16, root=tmp_path,
        progress=False).items()}
    assert runs == [[3 * 2] * (len(variants) - 1)]  # one run holds every depth's rows; the full depth once
    del runs[:]
    for method, depth in variants:  # the same records under the same keys: `sample` on the truncation reads them
        m = model.at_depth(depth, method)
        stored = sample(m, PROBLEMS, settings, n_seeds=2, root=tmp_path, progress=False)
        assert stored == swept[(method, depth)]
        alone = sample(m, PROBLEMS, settings, n_seeds=2, root=tmp_path / "alone", progress=False)
        assert [[r["tokens"] for r in p] for p in alone] == [[r["tokens"] for r in p] for p in stored], (method, depth)
    assert len(runs) == len(variants) - 1  # only the separate decodes into the other store ran (full depth: once)


def test_every_depth_s_methods_decode_in_one_run_as_each_depth_decodes_alone(tiny, tmp_path, monkeypatch):
    from helpers.evaluation.decodes import sample_methods
    from helpers.samplers.settings import chapter_settings
    from helpers.samplers.smc import SMCConfig

    model = tiny
    L = model.config.num_hidden_layers
    settings = chapter_settings(Searches(Target(2.0), POWER, SMCConfig(particles=2, block_size=4)), max_new_tokens=8, shots=0,
                                seed=0)
    limits = {("stitch", L): {"power": 1, "smc": 1}, ("stitch", L - 1): {"smc": 2}}
    runs, original = [], sampling.run_together
    monkeypatch.setattr(sampling, "run_together", lambda engine, works, *a, **k: runs.append(
        len(works)) or original(engine, works, *a, **k))
    together = sample_at_depths(model, PROBLEMS, settings, list(limits), n_seeds=2, batch_size=6,
                                root=tmp_path / "one", limits=limits, progress=False)
    assert runs == [2 * len(settings)]  # one run: every method at both depths
    for variant in limits:
        alone = sample_methods(model.at_depth(variant[1]), PROBLEMS, settings, n_seeds=2, batch_size=6,
                               root=tmp_path / "alone", limits=limits[variant], progress=False)
        assert set(alone) == set(together[variant])
        for name in settings:
            assert len(together[variant][name]) == limits[variant].get(name, len(PROBLEMS))
            assert [[r["tokens"] for r in p] for p in together[variant][name]] == \
                [[r["tokens"] for r in p] for p in alone[name]], (variant, name)
