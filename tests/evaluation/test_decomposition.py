"""The answer taken apart: each term a paired difference over the same problems, their identities exact, and a term
paired over a subset said to be one."""

from __future__ import annotations

import pytest

from helpers.evaluation.decomposition import TERMS, decompose


def _scores(solved: set[int], n: int = 20) -> list[float]:
    return [1.0 if i in solved else 0.0 for i in range(n)]


def test_the_terms_add_up_problem_by_problem():
    """headline = cut cost + recovery, and mechanism = recovery − gain at full depth, exactly, where every method ran
    on every problem; each term is the difference of its two methods' accuracies."""
    g_full, g_cut = _scores(set(range(12))), _scores(set(range(5)))
    s_full, s_cut = _scores(set(range(10))), _scores(set(range(3, 11)))
    dec = decompose(g_full, g_cut, s_full, s_cut, search="power")
    t = {k: d.mean for k, d in dec.terms.items()}
    assert set(dec.terms) == set(TERMS)
    assert t["cut_cost"] == pytest.approx(5 / 20 - 12 / 20) and t["recovery"] == pytest.approx(8 / 20 - 5 / 20)
    assert t["full_gain"] == pytest.approx(10 / 20 - 12 / 20) and t["headline"] == pytest.approx(8 / 20 - 12 / 20)
    assert t["headline"] == pytest.approx(t["cut_cost"] + t["recovery"])
    assert t["mechanism"] == pytest.approx(t["recovery"] - t["full_gain"])
    assert all(d.n == 20 and d.low <= d.mean <= d.high for d in dec.terms.values())
    assert not any(dec.on_subset(term) for term in TERMS)


def test_a_search_run_on_the_first_problems_only_pairs_there_and_says_so():
    """MH at the full depth on the first 8 of 20 problems: the terms that use it pair over those 8 and are marked;
    the others keep all 20."""
    g_full, g_cut, s_cut = _scores(set(range(12))), _scores(set(range(5))), _scores(set(range(3, 11)))
    s_full = _scores(set(range(6)), n=8)
    dec = decompose(g_full, g_cut, s_full, s_cut, search="power", n_problems=20)
    assert {k: d.n for k, d in dec.terms.items()} == {"cut_cost": 20, "recovery": 20, "full_gain": 8,
                                                       "mechanism": 8, "headline": 20}
    assert [t for t in TERMS if dec.on_subset(t)] == ["full_gain", "mechanism"]
    assert dec.terms["full_gain"].mean == pytest.approx(6 / 8 - 8 / 8)


def test_no_scores_is_refused():
    with pytest.raises(ValueError, match="at least one problem"):
        decompose([], [1.0], [1.0], [1.0], search="power")
