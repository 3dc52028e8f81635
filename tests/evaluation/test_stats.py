"""Paired comparisons of two methods on the same problems."""

from __future__ import annotations

import math

import pytest

from helpers.evaluation.stats import holm, paired_difference, sign_flip_test, sign_test


def test_sign_test_matches_the_binomial_tails():
    assert sign_test(0, 0) == 1.0
    assert sign_test(5, 5) == 1.0
    assert sign_test(6, 0) == pytest.approx(2 / 64)  # all six one way: 2 · 0.5^6
    assert sign_test(1, 7) == pytest.approx(2 * (1 + 8) / 256)
    assert sign_test(9, 1) == sign_test(1, 9)


def test_sign_flip_test_is_exact_on_small_samples():
    assert sign_flip_test([0, 0]) == 1.0
    assert sign_flip_test([1] * 6) == pytest.approx(2 / 64)  # all six one way, same magnitude: the sign test
    assert sign_flip_test([1, -1]) == 1.0
    # magnitudes count: one large loss against three small gains is no evidence of a gain
    assert sign_flip_test([0.5, 0.5, 0.5, -1.5]) == 1.0
    assert sign_flip_test([1.0, 1.0, 1.0, -0.5]) == pytest.approx(4 / 16)  # flips with |sum| >= 2.5: +++-,+++ +
    assert sign_flip_test([1] * 30) < 1e-4  # Monte Carlo beyond 16 non-zero differences


def test_identical_methods_differ_by_nothing():
    a = [1, 0, 1, 1, 0, 0.5]
    d = paired_difference(a, a)
    assert (d.mean, d.low, d.high, d.better, d.worse, d.p_value) == (0, 0, 0, 0, 0, 1.0)
    assert not d.clear


def test_a_consistent_gain_is_clear_and_a_noisy_one_is_not():
    clear = paired_difference([1] * 12 + [0] * 4, [0] * 12 + [0] * 4)
    assert clear.mean == pytest.approx(0.75) and clear.low > 0.4 and clear.clear
    assert clear.better == 12 and clear.worse == 0 and clear.p_value < 0.001
    noisy = paired_difference([1, 0, 1, 0, 1, 0, 1, 0], [0, 1, 0, 1, 0, 1, 1, 0])
    assert noisy.mean == 0 and noisy.low < 0 < noisy.high and not noisy.clear
    assert "better on 3, worse on 3 of 8" in noisy.describe()
    assert clear.standing() == "larger than its noise" and noisy.standing() == "within its noise"
    assert noisy.standing("within the noise: no answer") == "within the noise: no answer"


def test_an_interval_end_that_whole_points_would_round_to_zero_keeps_its_sign():
    """'[-0, +16]' would hide that the interval reaches below zero: such an end is printed to a tenth."""
    import dataclasses

    d = paired_difference([1] * 12 + [0] * 4, [0] * 12 + [0] * 4)
    assert dataclasses.replace(d, mean=0.08, low=-0.004, high=0.16).points() == "+8 points [-0.4, +16]"
    assert dataclasses.replace(d, mean=0.0, low=0.0, high=0.0).points() == "+0 points [+0, +0]"  # none: plain zero
    assert dataclasses.replace(d, mean=-0.07, low=-0.13, high=0.003).points(1, "") == "-7.0 [-13, +0.3]"


def test_holm_adjusts_several_tests_step_down_in_their_own_order():
    assert holm([0.048, 1.0, 0.00001]) == pytest.approx([0.096, 1.0, 0.00003])  # the front's three headline tests
    assert holm([0.01, 0.04, 0.03]) == pytest.approx([0.03, 0.06, 0.06])  # each at least the one ranked before it
    assert holm([0.5, 0.6]) == pytest.approx([1.0, 1.0]) and holm([0.02]) == [0.02] and holm([]) == []


def test_the_pairing_matters():
    """The same two accuracies, paired differently: pairing removes the problems' own difficulty."""
    easy_hard = [1] * 8 + [0] * 8
    paired = paired_difference([1] * 9 + [0] * 7, easy_hard)  # one extra problem solved, nothing lost
    assert paired.worse == 0 and paired.better == 1 and math.isclose(paired.mean, 1 / 16)


def test_bad_input_is_refused():
    with pytest.raises(ValueError, match="equally long"):
        paired_difference([1, 0], [1])
    with pytest.raises(ValueError, match="non-empty"):
        paired_difference([], [])


def test_paired_prefix_pairs_the_problems_both_methods_ran():
    from helpers.evaluation.stats import paired_difference, paired_prefix

    all_five, first_three = [1.0, 0.0, 1.0, 1.0, 0.0], [0.0, 0.0, 1.0]
    assert paired_prefix(all_five, first_three) == paired_difference(all_five[:3], first_three)
    assert paired_prefix(first_three, all_five).n == 3
    with pytest.raises(ValueError, match="non-empty"):
        paired_prefix([], all_five)


def test_a_p_value_below_what_the_draws_can_show_is_said_as_a_bound():
    from helpers.evaluation.stats import PairedDifference

    assert PairedDifference(0.3, 0.2, 0.4, 100, 30, 0, 0.0).p_text == "< 0.0001"
    assert PairedDifference(0.3, 0.2, 0.4, 100, 30, 0, 0.000015).p_text == "< 0.0001"
    assert PairedDifference(0.1, 0.0, 0.2, 100, 10, 4, 0.0312).p_text == "0.031"


def test_a_corrected_p_has_its_floor_raised_by_the_number_of_tests():
    from helpers.evaluation.stats import format_p

    assert format_p(0.0, tests=3) == "< 0.0003"  # Holm multiplies the smallest p by 3: so does what it can show
    assert format_p(0.0002, tests=3) == "< 0.0003" and format_p(0.0002) == "0.0002"
    assert format_p(0.097, tests=3) == "0.097"
