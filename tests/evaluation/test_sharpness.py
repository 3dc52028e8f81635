"""How sharp a model already is, from its stored decodes."""

from __future__ import annotations

import math

import pytest

from helpers.evaluation.sharpness import sharpness


def _rec(predicted, sum_logp=-2.0, n_tokens=4):
    return {"predicted": predicted, "sum_logp": sum_logp, "n_tokens": n_tokens}


def test_agreement_counts_t1_answers_equal_to_greedys_and_entropy_is_the_mean_nll_per_token():
    greedy = [[_rec("4")], [_rec("7")], [_rec(None)]]
    warm = [[_rec("4", -1.0, 2), _rec("5", -3.0, 2)], [_rec("7", -8.0, 4), _rec("7", 0.0, 2)],
            [_rec(None), _rec(None)]]  # no answer is never agreement, even with no greedy answer
    s = sharpness(greedy, warm)
    assert s.agreement == pytest.approx(3 / 6) and s.samples == 6
    assert s.entropy == pytest.approx(16.0 / 18) and s.tokens == 18


def test_the_entropy_estimate_is_unbiased_for_tokens_drawn_from_p():
    """A token drawn from p = (1/2, 1/4, 1/4) costs −log p on average = the entropy, 1.5 bits."""
    import numpy as np

    p = np.array([0.5, 0.25, 0.25])
    draws = np.random.default_rng(0).choice(3, size=40_000, p=p)
    warm = [[_rec("1", float(np.log(p[draws[i:i + 10]]).sum()), 10) for i in range(0, len(draws), 10)]]
    assert sharpness([[_rec("1")]], warm).entropy == pytest.approx(-(p * np.log(p)).sum(), rel=0.02)
    assert math.isclose(-(p * np.log(p)).sum(), 1.5 * math.log(2))


def test_no_pairs_is_refused():
    with pytest.raises(ValueError, match="at least one problem"):
        sharpness([], [[_rec("1")]])
