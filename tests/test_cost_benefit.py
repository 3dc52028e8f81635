"""Chapter 05: it prices chapter 04's stored decodes instead of recomputing them, and its front is right."""

from __future__ import annotations

import pytest

import helpers.sampling as sampling
from helpers.chapters import cost_benefit as ch
from helpers.chapters.power_sampling import compare_methods
from helpers.power import PowerConfig
from tests.test_sampling import PROBLEMS

POWER = PowerConfig(alpha=2.0, block_size=4, mcmc_steps=2)
SETTINGS = dict(n_seeds=2, max_new_tokens=8, shots=0, seed=0, batch_size=4)


def test_chapter_05_reads_chapter_04s_decodes(tiny_dir, tmp_path, monkeypatch):
    monkeypatch.setenv("SVD_RESULTS", str(tmp_path))
    rows = compare_methods([str(tiny_dir)], PROBLEMS, [3], POWER, **SETTINGS)
    calls = []
    plain = sampling.decode

    def watched(model, prompts, max_new_tokens, stops, temperature, *args, **kwargs):
        calls.append(temperature)
        return plain(model, prompts, max_new_tokens, stops, temperature, *args, **kwargs)

    def no_chains(*args, **kwargs):
        raise AssertionError("chapter 05 re-ran power sampling instead of reading chapter 04's chains")

    monkeypatch.setattr(sampling, "decode", watched)
    monkeypatch.setattr(sampling, "run_chains", no_chains)
    m = ch.measure(str(tiny_dir), PROBLEMS, [3], POWER, matched=True, **SETTINGS)
    # only new temperature-1 samples (the compute-matched baselines) and greedy at the break-even depth
    assert set(calls) <= {1.0, 0.0}
    assert calls.count(0.0) <= 1
    by = {(p.depth, p.method): p for p in m.points}
    for r in rows:
        assert by[(r.depth, "power")].accuracy == pytest.approx(r.accuracy["power"])
        assert by[(r.depth, "greedy")].accuracy == pytest.approx(r.accuracy["greedy"])
        k = m.matched_k[r.depth]
        if k > 1:
            matched = by[(r.depth, f"majority-of-{k}")]
            assert matched.matched and matched.samples == k
            single = by[(r.depth, "T=1")]
            assert matched.tokens == pytest.approx(k * single.tokens, rel=0.5)  # k samples' worth of tokens
            assert k * single.tokens >= by[(r.depth, "power")].tokens * 0.5
    assert all(p.seconds >= 0 and p.flops > 0 for p in m.points)


def _point(method: str, flops: float, accuracy: float, depth: int = 4) -> ch.Point:
    scores = [1.0] * round(accuracy * 10) + [0.0] * (10 - round(accuracy * 10))
    return ch.Point("m", depth, 4, method, accuracy, scores, 1, flops, 0.0, 0.0, flops)


def test_pareto_front_keeps_only_points_better_than_every_cheaper_one():
    points = [_point("greedy", 1.0, 0.5), _point("T=1", 1.0, 0.3), _point("power", 3.0, 0.4),
              _point("majority-of-3", 3.0, 0.6), _point("best-of-3", 4.0, 0.6), _point("big", 9.0, 0.8)]
    front = ch.pareto_front(points)
    assert [p.method for p in front] == ["greedy", "majority-of-3", "big"]
    assert "No power-sampled point is on this front" in ch.front_sentence(points)
    assert "Power sampling is on this front" in ch.front_sentence([_point("power", 1.0, 0.9), *points])


def test_report_arithmetic_is_glued_with_both_counts():
    values = ch.report_arithmetic().glue_values()
    assert values["report_formula"] == pytest.approx(8.84, abs=0.005)
    assert values["report_exact"] == pytest.approx(13.5, abs=0.05)
    assert values["report_blocks"] == "192, 384, 576, 679"
