"""The chapter pipelines' arithmetic and prose, on hand-made results (no model needed)."""

from __future__ import annotations

import dataclasses
import json
import math
import re

import numpy as np
import pytest

from helpers.chapters import (
    logit_lens,
    logit_lens_text,
    power_sampling,
    power_sampling_text,
    stitch,
    stitch_text,
)
from helpers.data.problems import Problem
from helpers.evaluation.cost import ModelCost
from helpers.evaluation.decodes import ended, outcome_shares
from helpers.evaluation.lengths import looping
from helpers.evaluation.stats import percent_with_interval, wilson
from helpers.results.identity import problem_key
from helpers.runner import glued


def _cost(depth: int) -> ModelCost:
    return ModelCost(depth, 10 * depth, 100, 0, 100 + 10 * depth, 20.0 * depth, 50.0, 50.0 + 20.0 * depth)


def _sweep(acc_stitch: dict[int, float], acc_naive: dict[int, float], n: int = 10) -> stitch.Sweep:
    depths = sorted(acc_stitch)
    agreement = {m: {d: {"kl": 0.0 if d == 6 else 1.0 / d, "nll": 1.0 + (6 - d) * k, "nll_full": 1.0} for d in depths}
                 for m, k in (("stitch", 0.1), ("naive", 0.5))}
    def records(a: float) -> list[dict]:  # as many correct answers as the accuracy says
        return [{"text": f"answer {i}\n", "correct": i < round(a * n)} for i in range(n)]

    accuracy = {"stitch": acc_stitch, "naive": acc_naive}
    return stitch.Sweep("toy", 6, [3], depths, accuracy, agreement,
                        {m: {d: records(accuracy[m][d]) for d in depths} for m in accuracy},
                        records(acc_stitch[6]), {d: _cost(d) for d in depths})


def test_wilson_interval_matches_known_values():
    lo, hi = wilson(5, 10)
    assert lo == pytest.approx(0.2366, abs=1e-4) and hi == pytest.approx(0.7634, abs=1e-4)
    assert wilson(0, 10)[0] == 0.0 and wilson(0, 10)[1] == pytest.approx(0.2775, abs=1e-4)
    assert wilson(0, 0) == (0.0, 1.0)
    assert percent_with_interval(0.5, 10) == "50% [24–76]"


def test_sweep_depths_start_at_the_earliest_cut_and_always_include_the_full_depth():
    assert stitch.sweep_depths([5, 3], 10, None, 3) == [3, 6, 9, 10]
    assert stitch.sweep_depths([], 4, None, 1) == [2, 3, 4]
    assert stitch.sweep_depths([1], 4, None, 1) == [2, 3, 4]  # stitching needs two blocks
    assert stitch.sweep_depths([3], 10, [8, 4, 8], 1) == [4, 8, 10]  # the full depth is the reference
    assert stitch.sweep_depths([3], 10, None, 1, span=3) == [7, 8, 9, 10]
    assert stitch.sweep_depths([3], 4, None, 1, span=5) == [2, 3, 4]
    with pytest.raises(ValueError, match=r"outside 2\.\.10"):
        stitch.sweep_depths([3], 10, [12], 1)
    with pytest.raises(ValueError, match="span"):
        stitch.sweep_depths([3], 10, None, 1, span=0)


def test_critical_depth_sentence_states_where_accuracy_holds():
    s = _sweep({3: 0.0, 4: 0.1, 5: 0.35, 6: 0.5}, {3: 0.0, 4: 0.0, 5: 0.1, 6: 0.5})
    values = stitch_text.critical_values(s, 0.5, 10)
    assert values["critical"] == {"stitch": 5, "naive": 6}
    assert values["critical_depth_stitch"] == 5 and values["full_accuracy"] == 50
    assert "from depth **5** of 6 on" in values["critical_sentence"]
    assert "best any depth tested reaches is 10%" in values["critical_sentence"]
    assert "Naive truncation does not hold it" in values["critical_sentence"]
    assert values["flops_kept_at_cut"] == pytest.approx(100 * 110 / 170)
    collapsed = stitch_text.critical_values(_sweep({3: 0.0, 6: 0.5}, {3: 0.0, 6: 0.5}), 0.5, 10)
    assert "critical depth is the full depth **6**" in collapsed["critical_sentence"]
    assert "No truncated model below full depth solves a single problem" in collapsed["critical_sentence"]
    assert "puts the critical depth at 6 in at least 95% of resamples" in collapsed["critical_sentence"]
    naive_best = stitch_text.critical_values(_sweep({4: 0.1, 5: 0.3, 6: 0.5}, {4: 0.0, 5: 0.4, 6: 0.5}), 0.5, 10)
    assert "The most accurate truncated model is naively truncated at depth 5, with 40%" in \
        naive_best["critical_sentence"]  # the best of either cut, not the stitched one's by choice
    edge = stitch_text.critical_values(_sweep({4: 0.0, 5: 0.3, 6: 0.6}, {4: 0.0, 5: 0.0, 6: 0.6}), 0.5, 10)
    assert "95% interval spans depths 5 to 6" in edge["critical_sentence"]  # 3 of 10 against a line at 3
    nothing = stitch_text.critical_values(_sweep({3: 0.0, 6: 0.0}, {3: 0.0, 6: 0.0}), 0.5, 10)
    assert nothing["critical_depth_stitch"] .startswith("not defined")


def test_two_models_side_by_side():
    a = _sweep({3: 0.0, 4: 0.1, 5: 0.35, 6: 0.5}, {3: 0.0, 4: 0.0, 5: 0.1, 6: 0.5})
    b = _sweep({3: 0.0, 5: 0.1, 6: 0.4}, {3: 0.0, 5: 0.0, 6: 0.4})
    b.model = "brittle"
    values = stitch_text.models_values({"toy": a, "brittle": b}, 0.5)
    assert values["critical_by_model"] == {"toy": 5, "brittle": 6}
    table = values["models_table"].splitlines()
    assert len(table) == 4 and table[2] == "| toy | 6 | 50% [24–76] | 5 [4–6] | 1 | 6 | 35% [14–65] at 5 | 3: 0% [0–28] |"
    assert "| brittle | 6 | 40% [17–69] | 6 (too few solved to resample) | 0 |" in table[3]  # 4 of 10 at full
    assert table[3].endswith("| 3: 0% [0–28] |")  # the lens's cut at 3, which the sweep decoded
    b.cuts = [2, 4]  # below the sweep's lowest depth (3), and between its depths (3, 5)
    assert stitch_text.lens_cuts(b) == "2: below the sweep, 4: not swept"
    assert "toy can lose 1 of its 6 blocks" in values["models_sentence"]
    assert "brittle cannot lose a single block of its 6" in values["models_sentence"]
    plt = pytest.importorskip("matplotlib.pyplot")
    from helpers.plots import truncation as plots
    fig = plots.accuracy_by_model({"toy": a, "brittle": b}, values["critical_by_model"])
    assert plt.get_fignums() == []  # finished figures are closed, so they show once
    marks = [line for line in fig.axes[0].lines if line.get_marker() == "^"]
    assert [(tuple(m.get_xdata()), tuple(m.get_ydata()), m.get_markerfacecolor() == "white") for m in marks] == [
        ((3,), (0.0,), False), ((4,), (3,), True), ((2,), (3,), True)]  # toy's cut at 3 decoded; brittle's 2 and 4
    # not, on the floor a step above the first model's


def test_stitch_against_naive_is_paired_per_depth():
    s = _sweep({4: 0.8, 5: 0.4, 6: 0.8}, {4: 0.0, 5: 0.4, 6: 0.8})
    right = [{"correct": i < 8, "text": ""} for i in range(10)]
    wrong = [{"correct": False, "text": ""} for _ in range(10)]
    shuffled = [{"correct": i % 5 < 2, "text": ""} for i in range(10)]
    same = [{"correct": i < 4, "text": ""} for i in range(10)]
    s.outputs = {"stitch": {4: right, 5: same, 6: right}, "naive": {4: wrong, 5: shuffled, 6: right}}
    diffs = stitch.method_differences(s)
    assert list(diffs) == [5, 4]  # truncated depths only, deepest first
    assert diffs[4].clear and diffs[4].mean == pytest.approx(0.8)
    assert diffs[5].mean == 0 and not diffs[5].clear and diffs[5].better == 2 and diffs[5].worse == 2
    values = stitch_text.methods_values([s])
    table = values["methods_table"].splitlines()
    assert len(table) == 4 and table[3].startswith("| 4/6 | 80% [49–94] | 0% [0–28] | +80 [+50, +100]")
    assert "clearly more accurate than naive truncation at 1 of the 2 truncated depths (4)" in values["methods_sentence"]
    assert "clearly less accurate at 0," in values["methods_sentence"]
    other = dataclasses.replace(s, model="other")  # every model's two cuts, each row named, each model a sentence
    both = stitch_text.methods_values([s, other])
    assert [line.split(" | ")[0] for line in both["methods_table"].splitlines()[2:]] == ["| toy"] * 2 + ["| other"] * 2
    assert both["methods_sentence"].count("clearly more accurate") == 2 and "On other's 10 problems" in both["methods_sentence"]
    s.outputs = {"stitch": s.outputs["stitch"]}
    assert stitch_text.methods_values([s])["methods_sentence"] == ""


def test_a_critical_depth_the_sweep_never_got_below_is_printed_as_a_bound():
    """Both cuts still keep half the full model's accuracy at the shallowest depth the sweep ran: each critical depth
    is that depth or shallower, and every sentence and cell that names it says so."""
    s = _sweep({4: 0.3, 5: 0.35, 6: 0.5}, {4: 0.3, 5: 0.4, 6: 0.5})
    sentence = stitch_text.critical_values(s, 0.5, 10)["critical_sentence"]
    assert "at every depth the sweep ran, down to **4** of 6, the shallowest: the critical depth is 4 or shallower" in sentence
    assert "Naive truncation holds that level at every depth it ran, down to **4**, the shallowest" in sentence
    values = stitch_text.models_values({"toy": s}, 0.5)
    assert values["models_table"].splitlines()[2].startswith("| toy | 6 | 50% [24–76] | ≤ 4 | ≥ 2 | ≤ 4 |")
    assert "toy can lose at least 2 of its 6 blocks (33% of its depth; critical depth 4 or shallower: the sweep went " \
           "no lower)" in values["models_sentence"]
    assert "down to 4 of 6 blocks, the shallowest the sweep ran, 2 blocks removed." in stitch_text.summary_sentence(s, 0.5)
    assert "can lose at least 2 of 6 blocks (33% of its depth, the most the sweep removed)" in \
        stitch_text.report_sentence(s, 0.5)
    measured = _sweep({3: 0.0, 4: 0.3, 5: 0.35, 6: 0.5}, {3: 0.0, 4: 0.3, 5: 0.4, 6: 0.5})  # 3 was run and fails
    assert "or shallower" not in stitch_text.critical_values(measured, 0.5, 10)["critical_sentence"]
    few = _sweep({4: 0.0, 5: 0.3, 6: 0.4}, {4: 0.0, 5: 0.3, 6: 0.4})  # 4 of 10 solved at full depth
    assert "toy gives no critical depth worth reading (it solves 4 of 10 problems at full depth, too few to read a " \
           "cut by; the rule returns 5)" in stitch_text.models_values({"toy": few}, 0.5)["models_sentence"]


def test_the_summary_and_the_report_comparison_say_which_cut_is_the_more_accurate():
    """The report found naive truncation incoherent: the chapter says in which direction its accuracy differs from
    stitch-and-preserve's where the paired interval and test tell them apart, and what that means for the search."""
    s = _sweep({4: 0.8, 5: 0.4, 6: 0.8}, {4: 0.0, 5: 0.4, 6: 0.8})
    right = [{"correct": i < 8, "text": ""} for i in range(10)]
    wrong = [{"correct": False, "text": ""} for _ in range(10)]
    same = [{"correct": i < 4, "text": ""} for i in range(10)]
    s.outputs = {"stitch": {4: right, 5: same, 6: right}, "naive": {4: wrong, 5: same, 6: right}}
    assert stitch_text.summary_sentence(s, 0.5).endswith(
        "Naive truncation scores below it at 4 blocks, by more than the noise, and is not told apart from it at the "
        "other 1.")
    holds = stitch_text.naive_report_sentence([s])
    assert holds == ("In accuracy the claim holds here: stitch-and-preserve scores above naive truncation by more than "
                     "the noise at toy at 4, and below it at none of the 2 depths where both cuts ran, over every model "
                     "(naive truncation's accuracy is the higher at 0 of the 2).")
    flipped = dataclasses.replace(s, accuracy={"stitch": s.accuracy["naive"], "naive": s.accuracy["stitch"]},
                                  outputs={"stitch": s.outputs["naive"], "naive": s.outputs["stitch"]})
    assert "Naive truncation scores above it at 4 blocks, by more than the noise" in stitch_text.summary_sentence(flipped, 0.5)
    fails = stitch_text.naive_report_sentence([flipped])
    assert fails.startswith("In accuracy the claim does not hold here: naive truncation scores above stitch-and-preserve")
    assert fails.endswith("the search starts from the weaker of the two cuts.")
    both = stitch_text.naive_report_sentence([s, dataclasses.replace(flipped, model="other")])
    assert "holds on some models and depths and fails on others" in both and "below it at other at 4" in both
    s.outputs = {"stitch": s.outputs["stitch"], "naive": {4: same, 5: same, 6: right}}
    s.accuracy = {"stitch": s.accuracy["stitch"], "naive": {4: 0.4, 5: 0.4, 6: 0.8}}
    assert stitch_text.naive_report_sentence([s]).startswith("In accuracy the two cuts are not told apart by more than "
                                                             "the noise at any of the 2 depths")
    s.outputs = {"stitch": s.outputs["stitch"]}  # one method ran
    assert "is not put to accuracy" in stitch_text.naive_report_sentence([s])


def test_the_lens_cut_points_are_set_against_the_critical_depth_read_from_accuracy():
    """The report cut where the logit lens said; the chapter says where the lens's cut points fall against the
    critical depth, and leaves out a model whose critical depth is only a bound."""
    s = _sweep({3: 0.0, 4: 0.1, 5: 0.35, 6: 0.5}, {3: 0.0, 4: 0.0, 5: 0.1, 6: 0.5})  # critical depth 5, lens cut at 3
    deep = stitch_text.lens_report_sentence([s], 0.5)
    assert deep.startswith("The report chose where to cut from the logit lens. On these problems the lens's cut points "
                           "(chapter 02's rules, as blocks kept) would cut toy at 3 of 6 blocks (critical depth 5): each "
                           "lies below its model's critical depth")
    assert stitch_text.lens_report_sentence([dataclasses.replace(s, cuts=[5, 6])], 0.5).endswith(
        "none lies below its model's critical depth, so here the lens's cut keeps 50% of the full model's accuracy.")
    mixed = [s, dataclasses.replace(s, model="other", cuts=[5])]
    assert stitch_text.lens_report_sentence(mixed, 0.5).endswith("on some models the lens would cut below the "
                                                                 "critical depth, on others not.")
    held = _sweep({4: 0.3, 5: 0.35, 6: 0.5}, {4: 0.3, 5: 0.4, 6: 0.5})  # critical depth 4 or shallower
    assert stitch_text.lens_report_sentence([held], 0.5) == ""
    assert stitch_text.lens_report_sentence([dataclasses.replace(s, cuts=[])], 0.5) == ""


def test_where_no_depth_separates_the_methods_the_sentence_says_so_in_words():
    s = _sweep({4: 0.4, 5: 0.4, 6: 0.8}, {4: 0.4, 5: 0.4, 6: 0.8})
    same = [{"correct": i < 4, "text": ""} for i in range(10)]
    s.outputs = {"stitch": {4: same, 5: same, 6: same}, "naive": {4: same, 5: same, 6: same}}
    sentence = stitch_text.methods_values([s])["methods_sentence"]
    assert "no truncated depth of the 2 separates" in sentence and "at 0 of" not in sentence


def test_report_sentence_sets_the_removable_share_against_the_report():
    one = stitch_text.report_sentence(_sweep({4: 0.1, 5: 0.3, 6: 0.5}, {4: 0.0, 5: 0.1, 6: 0.5}), 0.5)
    assert ("can lose 1 of 6 blocks (17% of its depth), a larger share of its depth than the report's models lose "
            "before their power-sampled accuracy recovers (7–11%)") in one
    assert one.startswith("By this book's criterion (greedy decoding keeps at least 50% of the full model's accuracy")
    assert "different criteria" in one
    assert "keeps 60% of its full-depth accuracy" in one
    none = stitch_text.report_sentence(_sweep({5: 0.0, 6: 0.5}, {5: 0.0, 6: 0.5}), 0.5)
    assert re.search(r"cannot lose a single block of its 6 \(it solves \d+ of \d+ problems at full depth[^)]*\), "
                     r"where the report's models lose 7–11%", none)
    assert "cannot be compared" in stitch_text.report_sentence(_sweep({5: 0.0, 6: 0.0}, {5: 0.0, 6: 0.0}), 0.5)


def test_agreement_values_and_examples_table():
    s = _sweep({3: 0.0, 6: 0.5}, {3: 0.0, 6: 0.5})
    values = stitch_text.agreement_values(s)
    assert values["cut_depth"] == 3 and values["ppl_full"] == f"{math.e:.2f}"
    assert values["agreement_sentence"].startswith("At 3 of 6 blocks, the shallowest depth where both cuts ran, the "
                                                   "stitched model's KL from the full model is 0.33 nats")
    assert f"under it {math.exp(1.3):.1f}" in values["agreement_sentence"]
    assert values["closer_sentence"].startswith("Of the 1 truncated depth where both cuts ran")
    problems = [Problem(id="a", question="1 | 2?", answer="3")]
    table = stitch_text.examples_table(s, problems, 3).splitlines()
    assert table[0] == "| problem | full model | stitch at 3 | naive at 3 |" and len(table) == 3
    assert "∣" in table[2] and "⏎" in table[2]  # pipes and newlines cannot break the table
    assert [cell.split()[0] for cell in table[2].split(" | ")[1:]] == ["✓", "✗", "✗"]  # full right, both cuts wrong


@pytest.mark.parametrize(("x", "decimals", "shown"), [
    (538449449.8, 1, "≈ 5.4×10⁸"), (0.0, 2, "0"), (3e-9, 1, "< 10⁻⁶"), (-2e-8, 2, "−< 10⁻⁶"), (3.14159, 2, "3.14"),
    (99999.0, 0, "99999"), (1e5, 1, "≈ 1.0×10⁵")])
def test_numbers_read_as_prose_quotes_them(x, decimals, shown):
    from helpers.core.numbers import readable

    assert readable(x, decimals) == shown
    with pytest.raises(ValueError, match="went wrong"):
        readable(math.nan)


@pytest.mark.parametrize(("x", "shown"), [
    (1281.7, "1,280"), (108.26, "108"), (1.4, "1.40"), (0.012345, "0.0123"), (-1281.7, "-1,280"), (0.0, "0")])
def test_significant_figures_never_read_as_scientific_notation(x, shown):
    from helpers.core.numbers import significant

    assert significant(x) == shown
    with pytest.raises(ValueError, match="went wrong"):
        significant(math.inf)


@pytest.mark.parametrize(("n", "noun", "plural", "shown"), [
    (1, "problem", None, "1 problem"), (0, "problem", None, "0 problems"), (8, "problem", None, "8 problems"),
    (1200, "chain", None, "1,200 chains"), (2, "query", "queries", "2 queries"), (1, "query", "queries", "1 query")])
def test_a_count_takes_its_nouns_number(n, noun, plural, shown):
    from helpers.core.numbers import counted

    assert counted(n, noun, plural) == shown


@pytest.mark.parametrize(("items", "shown"), [([], "none"), ([2], "2"), ([1, 3], "1 and 3"), ([1, 2, 3], "1, 2 and 3"),
                                             (["40%", "12%"], "40% and 12%")])
def test_a_list_reads_as_a_sentence_lists_it(items, shown):
    from helpers.core.numbers import listed

    assert listed(items) == shown


def test_a_paired_difference_over_one_problem_says_problem():
    from helpers.evaluation.stats import paired_difference

    assert "worse on 0 of 1 problem;" in paired_difference([1.0], [0.0]).describe()
    assert "of 2 problems;" in paired_difference([1.0, 0.0], [0.0, 0.0]).describe()


def _scores(accuracy: float, n: int = 20, offset: int = 0) -> list[float]:
    """n per-problem 0/1 scores with the given accuracy, the solved ones starting at `offset`."""
    k = round(accuracy * n)
    return [1.0 if (i - offset) % n < k else 0.0 for i in range(n)]


def _row(depth: int, greedy: float, power: float, low: float = 0.2, smc: float = 0.25) -> power_sampling.DepthRow:
    acc = {"greedy": greedy, "low": low, "temperature": 0.1, "best_of_n": 0.2, "majority": 0.3, "power": power,
           "smc": smc}
    scores = {key: _scores(a) for key, a in acc.items()}
    costs = {"power": {"tokens": [35.0] * 20, "seconds": [3.0] * 20}, "smc": {"tokens": [40.0] * 20, "seconds": [2.0] * 20}}
    return power_sampling.DepthRow("toy", depth, 6, 20, acc, 0.4, 10.0, 35.0, 40.0, depth / 6, 1e9, scores=scores,
                                   resamples=1.5, multiplier=3.5, costs=costs)


def test_the_smaller_model_is_the_one_with_fewer_flops_per_token_even_at_equal_depth():
    """Qwen2.5's 1.5B and 7B both have 28 blocks: a profile that lists the larger first still compares it as the
    larger, in the size sentence and in the figure's panels."""
    from dataclasses import replace

    rows = []
    for name, size, power in (("big", 7e9, 0.7), ("small", 1.5e9, 0.4)):
        rows += [replace(_row(6, 0.5, power), model=name, size=size), replace(_row(5, 0.3, power), model=name, size=size)]
    values = power_sampling_text.size_values(rows)
    assert (values["size_small"], values["size_large"]) == ("small", "big")
    assert values["size_headline"].startswith("On big,")
    assert [full.model for _, full in power_sampling.headline_rows(rows)] == ["small", "big"]
    table = power_sampling_text.results_table(rows).splitlines()  # the tables run smaller first, as the figures do
    assert [line.split(" | ")[0] for line in table[2:6]] == ["| small"] * 2 + ["| big"] * 2


def test_the_numbers_behind_the_size_and_verdict_sentences_are_computed_without_words():
    """The paired differences the prose states come from the numbers module: each size's MH at the cut against its
    own full-depth greedy, the gap between them, the best truncation (the deeper on a tie) and SMC's resampling."""
    from dataclasses import replace

    rows = []
    for name, size, power in (("big", 2e9, 0.25), ("small", 1e9, 0.4)):
        rows += [replace(_row(6, 0.5, 0.4), model=name, size=size), replace(_row(5, 0.5, power), model=name, size=size)]
    contrast = power_sampling.size_contrast(rows)
    assert [full.model for _, full in contrast.rows] == ["small", "big"]
    assert [cut.depth for cut, _ in contrast.rows] == [5, 5]
    assert [d.mean for d in contrast.differences] == pytest.approx([-0.1, -0.25])
    assert contrast.gap.mean == pytest.approx(-0.15) and contrast.gap.n == 20
    assert power_sampling.size_contrast([r for r in rows if r.model == "big"]) is None
    toy = [_row(6, 0.5, 0.4), _row(5, 0.3, 0.35), _row(4, 0.3, 0.35), _row(3, 0.3, 0.1)]
    assert power_sampling.best_truncation(toy, "power").depth == 5  # a tie goes to the deeper
    assert toy[1].paired("power", toy[0], "greedy").mean == pytest.approx(-0.15)
    assert toy[0].paired("power", other_key="greedy").mean == pytest.approx(-0.1)
    assert power_sampling.mean_resamples(toy) == pytest.approx(1.5)


def test_the_size_gap_is_printed_as_the_difference_of_the_two_differences_beside_it():
    """With two seeds a paired difference is often a half: rounded on their own, -17.5 and -9.0 print as -18 and -9
    while their gap -8.5 prints as -8. The sentence and the front page's headline give all three to one decimal
    wherever they print them, and say once when both models were searched at the same share of their depth."""
    from dataclasses import replace

    def scores(solved: float, n: int = 20) -> list[float]:  # per-problem means over two seeds: 0, 0.5 or 1
        whole = int(solved)
        return [1.0] * whole + [0.5] * (solved != whole) + [0.0] * (n - whole - (solved != whole))

    rows = []
    for name, size, power in (("small", 1e9, scores(8.5)), ("big", 2e9, scores(5.5))):
        cut, full = _row(5, 0.5, 0.4), _row(6, 0.5, 0.4)
        rows += [replace(full, model=name, size=size, scores={**full.scores, "greedy": scores(10)}),
                 replace(cut, model=name, size=size, scores={**cut.scores, "power": power})]
    values = power_sampling_text.size_values(rows)
    assert (values["size_small_difference"], values["size_large_difference"], values["size_gap"]) == (-7.5, -22.5, -15)
    assert "difference (-22.5 points) minus the smaller small's (-7.5) is -15.0 points" in values["size_sentence"]
    assert "difference (-22.5 points) minus the smaller small's (-7.5) is -15.0 points" in values["size_headline"]
    assert "Both models were searched at 83% of their depth." in values["size_sentence"]
    assert re.search(r"\(paired -22.5 points \[[^]]+\], (larger than its noise|borderline|within its noise)\)\.",
                     values["size_headline"]), "the larger model's own difference, to the gap's decimal, and its standing"
    assert "-7.5 points [" not in values["size_sentence"]  # each model's own difference is the table's, not said twice
    assert "critical depths" not in values["size_sentence"]  # depths not read from chapter 03: no claim about them


def test_the_sizes_critical_depths_say_whether_the_smaller_model_tolerates_an_earlier_cut():
    from helpers.evaluation.critical import DepthChoice

    rows = _two_sizes()
    curve = ((4, 0.1), (5, 0.4), (6, 0.5))
    for r in rows:
        r.choice = DepthChoice(r.model, 6, (5,), critical=5, relative=True, curve=curve)
    said = power_sampling_text.size_values(rows)["size_sentence"]
    assert ("At their critical depths small loses 1 block of 6 (17% of its depth) and big 1 block of 6 (17%): the same "
            "number of blocks, the fewest a cut can remove, so these two sizes give no sign") in said
    for r in rows:  # a sweep that never went below the depth makes it a bound, not a depth to compare
        r.choice = DepthChoice(r.model, 6, (5,), critical=5, relative=True, curve=curve[1:])
    assert "critical depths" not in power_sampling_text.size_values(rows)["size_sentence"]


def test_power_verdict_compares_the_best_truncation_with_full_greedy():
    rows = [_row(6, 0.5, 0.55), _row(5, 0.1, 0.3), _row(4, 0.0, 0.5)]
    values = power_sampling_text.verdict_values(rows)
    assert values["full_greedy"] == 50 and values["full_power"] == pytest.approx(55)
    assert "stitched 4-block model scored 50% [30–70], equal to the full 6-block model's greedy 50%" in values["verdict"]
    assert "+0.0 points [+0, +0]" in values["verdict"] and "p = 1), within its noise." in values["verdict"]
    assert values["verdict"].startswith("Too close to call")
    assert "Against T = 1 sampling at full depth (10% [3–30]), it is +40.0 points [" in values["verdict"]  # 50% at 4
    # blocks − T = 1's 10% at 6
    assert "times the tokens" not in values["verdict"]  # what the search costs is chapter 05's, priced once there
    assert "below the full" in power_sampling_text.verdict_values(rows[:2])["verdict"]
    assert power_sampling_text.verdict_values(rows[:1])["verdict"] == "No truncated depth was tested."
    table = power_sampling_text.results_table(rows).splitlines()
    assert len(table) == 7 and "50% [30–70]" in table[2] and table[1].count("|---") == 10  # no majority of one
    assert table[-1].startswith("Best-of-k uses each problem's k = 1 temperature-1 samples") and "majority" not in table[0]
    two = power_sampling_text.results_table([dataclasses.replace(r, n_seeds=2) for r in rows])
    assert "| majority |" not in two and "it would only repeat T = 1" in two
    three = power_sampling_text.results_table([dataclasses.replace(r, n_seeds=3) for r in rows])
    assert "| majority |" in three and "a tie goes to the answer that came first" in three
    deeper = power_sampling_text.results_table([dataclasses.replace(r, n_seeds=2 if r.depth == 6 else 1) for r in rows])
    assert "| toy | 4/6 (1 seed) |" in deeper and "| toy | 6/6 |" in deeper  # one seed one depth lower: said
    assert "A depth marked (1 seed) ran 1 seed, not 2: each sampled method drew 1 sample a problem there, so " \
           "best-of-k is T = 1's own sample" in deeper and "k = 2 temperature-1 samples" in deeper
    assert table[2].endswith("| 0.40 | 10 / 35 / 40 |")


def test_paired_comparisons_name_what_the_prose_compares():
    rows = [_row(6, 0.5, 0.55), _row(4, 0.0, 1.0, low=0.0)]
    big = rows[1].paired("power", rows[0], "greedy")
    assert big.mean == pytest.approx(0.5) and big.worse == 0 and big.clear
    assert "larger than its noise" in power_sampling_text.verdict_values(rows)["verdict"]
    assert power_sampling_text.verdict_values(rows)["verdict"].startswith("Yes: on this model power sampling wins back")
    found = power_sampling.comparisons(rows)
    assert [(m, label) for m, label, _ in found] == [("toy", "power − low temperature, both at 6"),
                                                     ("toy", "power − low temperature, both at 4")]
    assert found[1][2].mean == pytest.approx(1.0)
    tests = [(label, d) for _, label, d in found]
    table = power_sampling_text.comparisons_table(tests, "toy").splitlines()
    assert len(table) == 2 + len(tests) and "| yes |" in table[3] and table[3].startswith("| toy | power − low")
    assert power_sampling_text.comparisons_table(tests).splitlines()[2].startswith("| power − low temperature")
    with pytest.raises(ValueError, match="one per test"):
        power_sampling_text.comparisons_table(tests, ["toy"])
    from helpers.samplers.power import PowerConfig
    from helpers.samplers.settings import Searches
    from helpers.samplers.smc import SMCConfig
    from helpers.samplers.target import Target

    prose = power_sampling_text.prose_values(rows, Searches(Target(2.0), PowerConfig(block_size=4), SMCConfig()))
    assert set(power_sampling_text.PROSE) <= set(prose) and prose["comparisons_table"] == "\n".join(table)
    plain = {k: v for k, v in prose.items() if k not in power_sampling_text.PROSE}  # numbers, and names in plain text
    assert all(isinstance(v, float | int) or (isinstance(v, str) and "**" not in v and "|" not in v) for v in plain.values())
    report = power_sampling_text.report_values()  # the report's numbers, which the notebook's own sentence places
    assert (report["report_small"], report["report_power_small"], report["report_greedy_small"]) == \
        ("Qwen2.5-Math-1.5B", 65.0, 61.0)
    assert (report["report_large"], report["report_power_large"], report["report_depth"]) == ("Qwen2.5-Math-7B", 79.0, 26)
    assert round(report["report_half_width"]) == 9 and set(report) <= set(prose)


def test_every_model_gets_its_verdict_comparisons_failures_and_pass_at_k():
    """With several models, the chapter's sections speak for each, by name, not for the first alone."""
    rows = _two_sizes()
    values = power_sampling_text.verdict_values(rows)
    items = values["verdict"].splitlines()
    assert [line.split(".**")[0] for line in items] == ["* **small", "* **big"]
    assert values["answer"] == power_sampling_text.verdict_values(rows[:2])["answer"]  # the front's fallback: the first
    assert {m for m, _, _ in power_sampling.comparisons(rows)} == {"small", "big"}
    from helpers.samplers.power import PowerConfig
    from helpers.samplers.settings import Searches
    from helpers.samplers.smc import SMCConfig
    from helpers.samplers.target import Target

    accepted = power_sampling_text.acceptance_values(rows, Searches(Target(2.0), PowerConfig(), SMCConfig()))
    assert accepted["acceptance_rates"].startswith("the chains accepted these shares of their proposals: small, 40% "
                                                   "at 6 blocks, 40% at 5 blocks; big, 40% at 6")
    assert accepted["acceptance_reading"] == ("so the chains do move: a regenerated suffix replaces the current one in "
                                              "a good share of proposals")  # the notebook's frame names α, B and N
    still = [dataclasses.replace(r, acceptance=float("nan")) for r in rows]
    assert power_sampling_text.acceptance_values(still, Searches(Target(2.0), PowerConfig(), SMCConfig())) == {
        "acceptance_rates": "no proposal was made", "acceptance_reading": "so the chains never moved"}


def test_the_smc_table_sets_smc_against_mh_at_every_depth_of_every_model_and_the_sentence_reads_it():
    from helpers.samplers.power import PowerConfig
    from helpers.samplers.settings import Searches
    from helpers.samplers.smc import SMCConfig
    from helpers.samplers.target import Target

    rows = [_row(6, 0.5, 0.55, smc=0.55), _row(4, 0.0, 1.0, low=0.0, smc=0.0)]
    table = power_sampling_text.smc_table(rows).splitlines()
    assert table[2] == ("| toy | 6/6 | 20 | 55% [34–74] | 55% [34–74] | 40 / 35 | 2.0 / 3.0 | +0 points [+0, +0] | "
                        "within its noise (p = 1) |")  # tokens and time on the same problems
    assert table[3].startswith("| toy | 4/6 | 20 | 0% [0–16] | 100% [84–100] |") and "| -100 points" in table[3]
    assert table[-1] == ("The report's question asked of SMC, on the same problems: on toy, SMC at 4 blocks − greedy at "
                         "6 is -50 points [-70, -30] (larger than its noise, p = 0.002).")
    ran = power_sampling_text.smc_values(rows, Searches(Target(2.0), PowerConfig(), SMCConfig(particles=4, block_size=16)))
    assert ran == {"smc_k": 4, "smc_meet": 16, "smc_ess": 0.5, "smc_resamples": 1.5}  # the notebook's sentence
    text = power_sampling_text.smc_sentence(rows)
    assert text.startswith("Of the 2 depths where both ran, SMC decoded fewer tokens than MH at 0 and took less time at 2")
    assert text.endswith("differs from MH's by more than the noise at toy at 4.")
    deeper = power_sampling_text.smc_table([*rows, _row(3, 0.0, 0.0, low=0.0, smc=0.0)]).splitlines()
    assert deeper[-1] == table[-1]  # asked where MH's answer is judged (the cut nearest full depth), not a deeper one
    two = power_sampling_text.smc_table(_two_sizes()).splitlines()
    assert sum(line.startswith("| small |") for line in two) == 2 and sum(line.startswith("| big |") for line in two) == 2


def test_numbers_from_the_searches_subset_are_marked_and_paired_on_it():
    """MH at the full depth ran on the first 8 of 20 problems: the table marks its cell, and the prose sets it only
    beside numbers of those 8."""
    full, cut = _row(6, 0.5, 0.55), _row(4, 0.0, 0.5)
    full = dataclasses.replace(full, scores={**full.scores, "power": [1.0] * 8},
                               ends={"power": [["correct"] * 2] * 8},
                               accuracy={**full.accuracy, "power": 1.0})
    cut = dataclasses.replace(cut, ends={"power": [["wrong answer"] * 2] * 4 + [["correct"] * 2] * 16})
    table = power_sampling_text.results_table([full, cut])
    assert "100% [68–100] †" in table and "† On the first 8 problems of the 20" in table
    assert table.count(" † |") == 1  # one cell: the truncated row ran everything on all 20
    assert "| 10 / 35† / 40 |" in table  # in the tokens column the mark sits on the one number it concerns
    verdict = power_sampling_text.verdict_values([full, cut])["verdict"]
    assert "on the first 8" not in verdict  # the verdict is the headline, on every problem; the full depth's search,
    # on its subset, is the decomposition's († there)
    failure = power_sampling_text.failure_sentence([full, cut])
    assert failure.startswith("On toy, at 4 blocks 50% of power samples finish with the right answer, against 100% at the "
                              "full 6 on the 8 "
                              "problems where both ran")


def test_a_verdict_where_interval_and_test_disagree_is_called_borderline():
    """One problem better, seven worse, by half a point each: the bootstrap interval excludes zero on 20
    problems, but flipping signs at random reaches that total 7% of the time; the prose must not claim it."""
    full, cut = _row(6, 0.5, 0.5), _row(5, 0.1, 0.3)
    power = [0.5] * 20
    greedy = [1.0] * 7 + [0.0] + [0.5] * 12
    cut = dataclasses.replace(cut, scores={**cut.scores, "power": power})
    full = dataclasses.replace(full, scores={**full.scores, "greedy": greedy})
    d = cut.paired("power", full, "greedy")
    assert d.high < 0 and d.p_value > 0.05 and d.borderline and not d.clear
    assert "borderline" in power_sampling_text.verdict_values([full, cut])["verdict"]
    assert power_sampling_text.verdict_values([full, cut])["verdict"].startswith("Probably not:")


def test_lens_result_values_and_tables():
    curves = {"kl": np.array([[3.0, 2.0, 1.0, 0.1], [3.0, 2.5, 0.5, 0.1]]),
              "overlap": np.array([[0.0, 0.2, 0.6, 0.9], [0.0, 0.1, 0.4, 0.8]])}
    ed_kl, ed_ov, cuts = logit_lens.lens_cut_points(curves, 0.5, 0.3)
    assert (ed_kl, ed_ov, cuts) == (2, 2, [2])
    study = logit_lens.LensStudy(curves={"m": curves}, gold_curves={}, summary=[{
        "model": "m", "layers": 4, "width": 8, "ed_kl": ed_kl, "ed_overlap": ed_ov, "ratio_kl": 0.75,
        "ratio_overlap": 0.75, "accuracy": 0.5, "kl_max": 3.0, "kl_max_layer": 0, "kl_last_tap": 0.1,
        "overlap_last_tap": 0.85, "cuts": cuts, "solution_tokens": 12.0, "tied": True,
        "by_level": logit_lens.by_level([Problem("a", "q", "1", level=1), Problem("b", "q", "2", level=3),
                                         Problem("c", "q", "3", level=1)],
                                        [{"correct": True}, {"correct": False}, {"correct": False}]),
        "cut_off": 1, "n_problems": 3}])
    values = logit_lens_text.result_values(study, 2)
    assert values["cuts"] == "2" and values["blocks_after_cut"] == 2 and values["greedy_accuracy"] == 50
    assert "ties its input and output embeddings" in values["peak_sentence"]
    assert logit_lens_text.summary_table(study).splitlines()[2] == "| m | 4 | 8 | 2 (0.75) | 2 (0.75) | 2 | 50% |"
    assert study.summary[0]["by_level"] == {1: (1, 2), 3: (0, 1)}
    levels = logit_lens_text.level_table(study).splitlines()
    assert levels[0] == "| model | level 1 | level 3 | cut off at the token limit |"
    assert levels[2] == "| m | 50% [9–91] | 0% [0–79] | 1 of 3 |"
    none = "This problem set has no gold solutions, so only generated text was read."
    assert logit_lens_text.gold_comparison(study, 0.5, 0.3) == ({}, {"gold_sentence": none, "gold_summary": none})
    assert "earlier in relative depth than" in logit_lens_text.report_comparison(study)
    assert logit_lens_text.artefact_sentence(study) == "The KL curve of m peaks at layer 0, so there the artefact sets " \
        "its KL rule."
    other = {**study.summary[0], "model": "n", "kl_max_layer": 0}
    inside = dataclasses.replace(study, summary=[{**study.summary[0], "kl_max_layer": 2}, other],
                                 explorer={"tokens": ["a", "b", "c"], "top_tokens": [[["a"], ["x"], ["c"]], [["b"]] * 3]})
    assert logit_lens_text.artefact_sentence(inside) == (
        "In the token figure (m), the lens at layer 0 predicts the current token at 2 of 3 positions. The KL curve of "
        "m peaks at layer 2, inside the network, where the middle layers' KL is larger still, so there the artefact "
        "does not set its KL rule. It does where a curve peaks at the embedding: n.")


def test_glued_values_are_read_back_from_an_executed_notebook(tmp_path):
    def out(name, data):
        return {"output_type": "display_data", "metadata": {"scrapbook": {"name": name}},
                "data": {glued.GLUE_PREFIX + k: v for k, v in data.items()}}

    nb = {"cells": [{"cell_type": "code", "outputs": [
        out("n", {"text/plain": "12"}), out("x", {"text/plain": "0.25"}), out("word", {"text/plain": "'stitch'"}),
        out("sentence", {"text/markdown": "It **beat** it.", "text/plain": "<IPython.core.display.Markdown>"}),
        out("figure", {"image/png": "abc", "text/plain": "<Figure>"})]}]}
    (tmp_path / "01_a.ipynb").write_text(json.dumps(nb))
    rows = glued.write(tmp_path, ["01_a", "02_missing"])
    assert {r["name"]: r["value"] for r in rows} == {"n": 12, "x": 0.25, "word": "stitch", "sentence": "It **beat** it."}
    assert json.loads((tmp_path / "glued_values.json").read_text()) == rows
    assert "| 01_a | `x` | 0.25 |" in (tmp_path / "glued_values.md").read_text()
    moved = glued.diff(rows, [{**r, "value": 0.5} if r["name"] == "x" else r for r in rows[1:]])
    assert moved["changed"] == [("01_a", "x", 0.25, 0.5)] and moved["removed"] == [("01_a", "n", 12)]


def test_problem_key_follows_the_content():
    p = Problem(id="L1-0", question="What is 1 + 1?", answer="2")
    assert problem_key(p) == problem_key(Problem(id="L1-0", question="What is 1 + 1?", answer="2", level=3))
    assert problem_key(p) != problem_key(Problem(id="L1-0", question="What is 1 + 2?", answer="3"))


def test_outcomes_say_how_samples_end_and_where_failures_grow():
    def rec(correct, stopped, predicted):
        return {"correct": correct, "stopped": stopped, "predicted": predicted}

    full = [[rec(True, True, "4"), rec(False, True, "5")], [rec(True, True, "2"), rec(True, True, "2")]]
    cut = [[rec(False, False, None), rec(False, True, None)], [rec(False, True, "3"), rec(True, False, "2")]]
    assert outcome_shares(full) == {"correct": 0.75, "wrong answer": 0.25, "no answer": 0.0, "ending replaced": 0.0,
                                    "cut off": 0.0}
    # an unfinished answer counts as unfinished even where the grader credits it: "correct" is among the finished
    assert outcome_shares(cut) == {"correct": 0.0, "wrong answer": 0.25, "no answer": 0.25, "ending replaced": 0.0,
                                   "cut off": 0.5}
    short = [[{**rec(False, False, None), "n_tokens": 40}, {**rec(False, False, None), "n_tokens": 48}]]
    assert outcome_shares(short, cap=48) == {"correct": 0.0, "wrong answer": 0.0, "no answer": 0.0,
                                             "ending replaced": 0.5, "cut off": 0.5}  # unfinished short of the cap
    rows = [_row(6, 0.5, 0.75), _row(4, 0.0, 0.25)]
    rows[0].outcomes = {"greedy": outcome_shares(full), "power": outcome_shares(full), "smc": outcome_shares(full)}
    rows[1].outcomes = {"greedy": outcome_shares(cut), "power": outcome_shares(cut)}  # a method left out: no row
    rows[0].ends, rows[1].ends = {"power": ended(full)}, {"power": ended(cut)}
    cut[0][0]["tokens"], cut[1][1]["tokens"] = [1, 2, 3, 4] * 100, list(range(400))  # a loop, and one still writing
    cut[0][1]["tokens"] = cut[1][0]["tokens"] = [5, 6, 7, 8] * 100  # repeats, but finished: not a loop
    assert looping(cut) == [[True, False], [False, False]]
    rows[1].loops = {"greedy": looping(cut), "power": looping(cut)}  # the full rows kept none: "–"
    table = power_sampling_text.outcomes_table(rows).splitlines()
    assert len(table) == 9 and table[5] == "| toy | 4/6 | greedy | 20 | 0% | 25% | 25% | 0% | 50% | 25% | 0% |"
    assert table[4] == "| toy | 6/6 | smc | 20 | 75% | 25% | 0% | 0% | 0% | – | 75% |"  # right among the finished ones
    assert table[-1].startswith("Each sample is counted once in the outcome columns, which sum to 100%; 'looping' is a "
                                "part of the unfinished ones, not a further share. Cut off: unfinished at the token cap.")
    rows[0].scores["smc"] = rows[0].scores["smc"][:8]  # SMC on the searches' first 8 problems: marked, footnoted
    table = power_sampling_text.outcomes_table(rows).splitlines()
    assert table[4] == "| toy | 6/6 | smc † | 8 | 75% | 25% | 0% | 0% | 0% | – | 75% |"
    assert "† On the first 8 problems of the 20" in table[-3]
    other = [dataclasses.replace(r, model="other") for r in rows]  # every model, each named in its rows
    assert sum(line.startswith("| other |") for line in power_sampling_text.outcomes_table(rows + other).splitlines()) == 5
    both = power_sampling_text.failure_sentence(rows + other)  # every model's failures, by name, the moral once
    assert "On toy, at 4" in both and "On other, at 4" in both and both.count("cannot add the ones") == 1
    sentence = power_sampling_text.failure_sentence(rows)
    assert "On toy, at 4 blocks 0% of power samples finish with the right answer, against 75% at the full 6" in sentence
    assert "'cut off', from 0% to 50% of samples (no answer: " in sentence  # the worst said once, the other beside it
    assert sentence.count("cut off") == 1
    assert "; 1 of its 2 unfinished samples loop, repeating what they wrote, so that a longer cap would hardly end" in sentence
    rows[1].loops = {"power": [[False, False], [False, False]]}
    assert "; none of its 2 unfinished samples loops in its last 256 tokens, so that a longer cap may end some" in power_sampling_text.failure_sentence(rows)
    rows[1].loops = {}  # rows that kept no loops say nothing of them
    assert "unfinished samples" not in power_sampling_text.failure_sentence(rows)
    assert "no truncated depth" in power_sampling_text.failure_sentence(rows[:1]).lower()


def _two_sizes(small_full_power: list[float] | None = None) -> list[power_sampling.DepthRow]:
    """Two models, each at its full 6 blocks and cut to 5, on 20 problems: the smaller's cut costs greedy 10 points
    and MH wins 5 back; the larger's cut costs 30 and MH wins none back."""
    def row(name, size, depth, greedy, power, low):
        r = _row(depth, greedy, power, low)
        return dataclasses.replace(r, model=name, size=size)

    rows = [row("small", 1e9, 6, 0.5, 0.5, 0.5), row("small", 1e9, 5, 0.4, 0.45, 0.4),
            row("big", 2e9, 6, 0.8, 0.8, 0.8), row("big", 2e9, 5, 0.5, 0.5, 0.5)]
    if small_full_power is not None:
        rows[0].scores["power"] = small_full_power
    return rows


def test_the_decomposition_table_gives_every_term_for_every_model_and_search():
    rows = _two_sizes()
    explained = power_sampling.explain(rows)
    assert [e.full.model for e in explained] == ["small", "big"]
    values = power_sampling_text.decomposition_values(power_sampling.explain(rows))
    assert values["dec_small_power_cut_cost"] == -10 and values["dec_small_power_recovery"] == 5
    assert values["dec_small_power_headline"] == -5 and values["dec_big_power_cut_cost"] == -30
    assert not any(k.startswith("dec_0") for k in values)  # named by model: the same name means the same model
    table = values["decomposition_table"].splitlines()
    assert len(table) == 2 + 2 * 5 and "†" not in values["decomposition_table"]
    assert table[2].startswith("| small, cut to 5 of 6 blocks | the cut") and "-10.0 points [" in table[2]
    why = power_sampling_text.answer_values(explained)["answer_why"]  # each model's paragraph: the front page's
    assert "On small, the cut to 5 of 6 blocks costs greedy decoding -10.0 points" in why
    assert "Against greedy decoding at the same depth, power sampling moves accuracy by +5.0 points" in why
    assert "(low temperature: +0.0 points [" in why  # the cheap way to sharpen, beside it, to MH's precision
    summary = values["decomposition_sentence"]  # the chapter reads the table across models, not number by number
    assert "-10.0" not in summary and "the cut's cost on big;" in summary  # -30 on 20 problems: larger than its noise
    assert "helps more where depth was removed is larger than its noise on none" in summary


def test_a_gain_at_the_cut_made_of_unfinished_answers_the_grader_credits_is_said_to_be_so():
    """MH gains 5 points at the cut, but as many of its finished answers are right as greedy's: the gain is unfinished
    answers the grader credited, and the paragraph says so; where the finished answers carry it, or without the
    endings, it says nothing."""
    rows = _two_sizes()
    ends = {"greedy": [["correct"]] * 8 + [["cut off"]] * 12, "power": [["correct"]] * 8 + [["cut off"]] * 12}
    rows[1] = dataclasses.replace(rows[1], ends=ends)
    why = power_sampling_text.why_sentence(power_sampling.explain(rows)[0])
    assert ("at the cut, none of it from answers that finished right (those moved by +0.0 points): unfinished answers the "
            "grader credits with a number they hold make all of it") in why  # never "the rest" of a part above the whole
    rows[1] = dataclasses.replace(rows[1], ends={**ends, "power": [["correct"]] * 9 + [["cut off"]] * 11})
    assert "grader credits" not in power_sampling_text.why_sentence(power_sampling.explain(rows)[0])  # +5 of +5
    assert power_sampling_text.caveats(power_sampling.explain(rows)) == {}  # +5 of +5 finished right: no mark
    rows[1] = dataclasses.replace(rows[1], ends=ends)
    assert power_sampling_text.caveats(power_sampling.explain(rows))["small"] == {("recovery", "power"): "°"}  # MH's point
    assert ("the search's gain at the cut on small (of which +0.0 points finished right; the rest is unfinished "
            "answers the grader credits)") not in power_sampling_text.decomposition_summary(
                power_sampling.explain(rows))  # said only where the gain is larger than its noise: +5 of 20 is not
    rows[1] = dataclasses.replace(rows[1], ends={})
    assert "grader credits" not in power_sampling_text.why_sentence(power_sampling.explain(rows)[0])


def test_a_term_on_the_searches_subset_is_marked_in_the_table_the_sentence_and_the_figure():
    """MH at the smaller model's full depth on its first 8 problems only: the gain at full depth and the mechanism
    pair over those 8, and every place that shows them says so."""
    rows = _two_sizes(small_full_power=[1.0] * 4 + [0.0] * 4)
    values = power_sampling_text.decomposition_values(power_sampling.explain(rows))
    marked = [line for line in values["decomposition_table"].splitlines() if "†" in line]
    assert len(marked) == 2 + 1 and "first 8 problems of the 20" in marked[-1]  # two rows, and the footnote
    why = power_sampling_text.answer_values(power_sampling.explain(rows))["answer_why"]
    assert "at full depth by +0.0 points" not in why and "on the first 8 problems" in why
    from helpers.plots.power import decomposition

    fig = decomposition(power_sampling.explain(rows), report={"1.5B": 4.0, "7B": 8.0})
    labels = [t.get_text() for t in fig.axes[0].get_yticklabels()]
    assert sum("†" in label for label in labels) == 2 and not any("†" in t.get_text()
                                                                 for t in fig.axes[1].get_yticklabels())
    assert not fig.texts  # no mark drawn: no note under the figure
    fig = decomposition(power_sampling.explain(rows), marks={"big": {("cut_cost", "greedy"): "*",
                                                                      ("recovery", "power"): "*"}},
                        legend=power_sampling_text.MARKS)
    assert fig.axes[1].get_yticklabels()[0].get_text() == "the cut\n(greedy)"  # the mark is the point's, not the row's
    beside = [(t.get_text(), t.xy) for t in fig.axes[1].texts]
    big = power_sampling.explain(rows)[1].parts
    cut, gain = big["power"].terms["cut_cost"], big["power"].terms["recovery"]
    assert [m for m, _ in beside] == ["*", "*"] and not fig.axes[0].texts  # two points marked, on big's panel only
    assert beside[0][1] == (100 * cut.high, 4) and beside[1][1] == (100 * gain.high, 3 + 0.15)  # MH's, not low T's
    assert [t.get_text() for t in fig.texts] == [f"* {power_sampling_text.MARKS['*']}"]  # the unused ° unexplained


def test_the_front_page_leads_only_with_what_every_size_supports():
    """Two sizes whose answers differ get one clause each, never the first model's verdict as the lead."""
    rows = _two_sizes()
    values = power_sampling_text.answer_values(power_sampling.explain(rows))
    small = power_sampling_text.answer_of(True, power_sampling.explain(rows)[0].parts["power"].terms["headline"])
    big = power_sampling_text.answer_of(True, power_sampling.explain(rows)[1].parts["power"].terms["headline"])
    assert small != big  # -5 points on 20 problems is within its noise; -30 is not
    assert values["answer_lead"].startswith("**No size this build searched shows search winning back what the cut "
                                            "costs:**\n\n* **small**, too close to call: ")
    assert "\n* **big**, probably not: " in values["answer_lead"]  # neither says yes: the lead says so, not that it
    # "depends"; big's -30 points (p = 0.031 alone) is borderline after Holm's correction for the two sizes
    assert values["answer_short"] == "not settled (too close to call on small; probably not on big)"  # the front's line
    assert "\n* **big**, no: " in power_sampling_text.answer_values(power_sampling.explain(rows[2:]))["answer_lead"] \
        or "**No, at the one size" in power_sampling_text.answer_values(power_sampling.explain(rows[2:]))["answer_lead"]
    # alone, one test: no correction
    assert "its interval ends at +0 points, so one problem either way could change this word" in values["answer_lead"]
    assert "provisional" not in values["answer_lead"]  # these rows keep no endings: nothing said of the cap
    table = values["answer_table"].splitlines()
    assert table[2].startswith("| small | 5 of 6 |") and table[3].startswith("| big | 5 of 6 |")
    assert "| T = 1 at full depth | MH − T = 1 [95% interval], against its noise |" in table[0]  # both comparators
    assert "| -5.0 points [" in table[2] and "| 10% [3–30] | +35.0 points [" in table[2]  # 45% at the cut − 10%
    assert "larger than its noise** where the paired 95% interval excludes zero" in table[5]  # the words, defined
    tests = [e.parts["power"].terms["headline"] for e in power_sampling.explain(rows)]
    several = next(line for line in table if line.startswith("The headline is tested once on each of the 2 models"))
    assert several.endswith("After it, none stay below 5%.")  # big's p = 0.031, alone below 5%, is doubled
    assert f"(p = {tests[1].p_text}; {2 * tests[1].p_value:.2g} after Holm's correction for 2 models)" in table[3]
    assert "| -30.0 points [" in table[3] and ", borderline (p = " in table[3]  # the words read the corrected p
    assert power_sampling_text.several_tests(["small"], tests[:1]) == ""  # one model: one test
    assert "for scale only (the MH − greedy intervals of small and big lie below both)" in table[5]
    assert "unfinished" not in values["answer_table"]  # these rows keep no endings: no column, no claim
    cut = [dataclasses.replace(r, ends={"greedy": [["cut off" if i < 8 and r.depth == 5 else "correct"]
                                                   for i in range(20)]}) for r in rows]
    capped = power_sampling_text.answer_values(power_sampling.explain(cut))["answer_table"]
    assert "| 0% → 40% |" in capped
    lead = power_sampling_text.answer_values(power_sampling.explain(cut))["answer_lead"]  # the cap, said once: here
    assert ("These words are provisional where the cap cuts answers off: the cut leaves unfinished 40% of small's "
            "greedy answers at 5 blocks (0% at full depth)") in lead and "No longer cap ran in this build" in lead
    same = [dataclasses.replace(r, model=r.model + "2", size=r.size * 3) for r in rows if r.model == "big"]
    values = power_sampling_text.answer_values(power_sampling.explain([r for r in rows if r.model == "big"] + same))
    twice = power_sampling.explain(rows)[1].parts["power"].terms["headline"]
    both = power_sampling_text.answer_of(True, power_sampling.corrected([twice, twice])[0])  # two tests of one
    assert values["answer_lead"] == f"**{both[0]}, at both sizes:** {both[1]}."
    assert values["answer_short"] == "probably not"  # one word that settles it, at both sizes (after Holm's correction)  # the report's gains: the note's, for scale


def test_a_no_that_a_longer_cap_undoes_is_said_to_be_the_caps():
    """The big model's cut costs 30 points at its cap, where it leaves 40% of its greedy answers unfinished (none at
    full depth). Under a longer cap where the cut costs nothing, its "no" is the cap's, in the front page's answer,
    the chapter's verdict and the cap table; where the cut still costs 30 points there, the "no" stands."""
    rows = _two_sizes()
    rows = [dataclasses.replace(r, ends={"greedy": [["cut off" if i < 8 and r.depth == 5 else "correct"]
                                                    for i in range(20)]}) for r in rows]
    same = power_sampling.LongerCap("big", 6, 5, 384, 160, tuple(_scores(0.8)), tuple(_scores(0.75)), 0.0, 0.05)
    explained = power_sampling.explain(rows)
    values = power_sampling_text.answer_values(explained, [same])
    assert "* **big**, not at this cap: power sampling falls short of the full model at a token cap" in values["answer_lead"]
    assert ("under a longer cap, where only greedy decoding ran, the cut's own cost is within its noise: the search "
            "there is not yet measured.") in values["answer_lead"]
    assert ("at 160 tokens the cut leaves unfinished 40% of small's greedy answers at 5 blocks (0% at full depth) and "
            "40% of big's") in values["answer_lead"]  # the numbers once, in the paragraph that says what is provisional
    assert ("Under 384 tokens, where only greedy decoding ran, the cut costs greedy decoding -5.0 points [-15, +0] on "
            "big (within its noise; 5% unfinished)") in values["answer_lead"]
    assert ("the cut to 5 of 6 blocks costs greedy decoding -30.0 points [-50, -10] (larger than its noise), and under "
            "384 tokens -5.0 points [") in values["answer_why"]
    summary = power_sampling_text.decomposition_summary(explained, [same])  # the across-model reading says it too
    assert ("the cut's cost on big (at a cap that leaves 40% of its greedy answers at the cut unfinished; under 384 "
            "tokens -5 points [-15, +0], within its noise)") in summary
    assert power_sampling_text.caveats(explained)["big"] == {("cut_cost", "greedy"): "*", ("headline", "power"): "*",
                                                        ("headline", "low"): "*", ("mechanism", "power"): "*",
                                                        ("mechanism", "low"): "*"}  # the cut against full
    verdict = power_sampling_text.verdict_values(rows, [same])["verdict"]
    assert "* **big.** Not at this cap: on this model" in verdict
    assert ("At 160 tokens the cut leaves 40% of greedy answers unfinished (0% at full depth); under 384 tokens (5%) it "
            "costs greedy decoding -5.0 points [") in verdict
    assert "and the search was not run there." in verdict
    cap = power_sampling_text.cap_values(rows, [same])
    assert cap["cap_table"].splitlines()[2].startswith("| big | 5 of 6 | 0% → 40% | 0% → 5% | -30.0 [")
    assert "on big the cut's cost of -30 points [" in cap["cap_sentence"] and "the cap made most of it" in cap["cap_sentence"]
    costly = dataclasses.replace(same, cut=tuple(_scores(0.5)))  # the cut costs 30 points under the longer cap too
    values = power_sampling_text.answer_values(explained, [costly])
    assert "* **big**, probably not: " in values["answer_lead"] and "-30.0 points [" in values["answer_why"]  # p = 0.031,
    # 0.062 after Holm's correction for two models
    assert "so the cap is not the whole of the cut's cost." in power_sampling_text.verdict_values(rows, [costly])["verdict"]
    assert "costs more than its noise under both caps" in power_sampling_text.cap_values(rows, [costly])["cap_sentence"]
    assert power_sampling_text.cap_values(rows, []) == {"cap_table": "", "cap_sentence": ""}  # none ran: nothing said
    small = dataclasses.replace(same, model="small", full=tuple(_scores(0.5)), cut=tuple(_scores(0.45)))
    sizes = power_sampling_text.size_values(rows, [small, same])["size_sentence"]  # the size contrast, capped too
    assert ("Both differences are read at a cap that leaves 40% of small's greedy answers at its cut and 40% of big's "
            "greedy answers at its cut unfinished; under 384 tokens the two cuts cost greedy decoding -5.0 points [") in sizes
    assert "Both differences" in power_sampling_text.size_values(rows, [same])["size_sentence"]
    assert "under 384 tokens" not in power_sampling_text.size_values(rows, [same])["size_sentence"]  # one of two read
    assert power_sampling.longer_caps(rows) == []  # no longer cap decoded: none read
    rows[3].longer = same  # the cut's row carries what compare_methods decoded under the longer cap
    assert power_sampling.longer_caps(rows) == [same]
    with pytest.raises(ValueError, match="must exceed max_new_tokens"):  # said before any model loads
        power_sampling.compare_methods(["no-such-model"], [], [5], None, n_seeds=1, max_new_tokens=160, shots=0,
                                       seed=0, batch_size=1, longer_cap=160)


def test_the_sharpness_table_says_each_models_kind_and_sets_its_sharpness_beside_the_searchs_gain():
    from helpers.evaluation.sharpness import Sharpness

    rows = _two_sizes()
    for r, (agree, nats) in zip(rows, ((0.9, 0.05), (0.6, 0.4), (0.95, 0.02), (0.5, 0.6)), strict=True):
        r.sharp = Sharpness(agree, nats, 40, 400)
    values = power_sampling_text.sharpness_values(rows)
    table = values["sharpness_table"].splitlines()
    assert len(table) == 8 and table[2].startswith("| small | base or tuned: not known from its name | 6/6 | 90% | 0.050 |")
    assert "points" not in "".join(table[2:6]) and "in points" in table[7]  # the legend names the unit once
    assert "the sharpest here is big at 6 blocks: 95%" in values["sharpness_sentence"]
    assert "The least sharp is big at 5 blocks (50%, 0.600 nats)" in values["sharpness_sentence"]
    assert "By entropy" not in values["sharpness_sentence"]  # both measures rank these rows alike: one ranking
    rows[3].sharp = Sharpness(0.5, 0.3, 40, 400)  # the least often greedy, yet not the most uncertain per token
    parted = power_sampling_text.sharpness_values(rows)["sharpness_sentence"]
    assert "The least sharp is big at 5 blocks (50%, 0.300 nats)" in parted
    assert parted.endswith("By entropy per token instead, the least sharp is small at 5 blocks (0.400 nats).")
    from helpers.models.registry import post_training

    assert post_training("gemma-3-270m") == "base" and post_training("qwen2.5-coder-0.5b") == "instruction-tuned"
    assert post_training("Qwen/Qwen2.5-Math-7B-Instruct") == "instruction-tuned"


def test_the_sweep_says_which_depths_it_ran_and_why_by_the_builds_own_rule():
    from types import SimpleNamespace

    sweeps = {"m": SimpleNamespace(model="m", cuts=[18, 20], depths=[20, 21, 22, 23, 24], n_layers=24,
                                   accuracy={"stitch": dict.fromkeys([20, 21, 22, 23, 24], 0.5),
                                             "naive": dict.fromkeys([21, 22, 24], 0.5)})}
    spanned = stitch_text.sweep_sentence(sweeps, None, 4)
    assert "the last 4 depths below each model's full depth" in spanned and "cut points below them are not swept" in spanned
    assert "m: cut points 18, 20, depths 20, 21, 22, 23, 24" in spanned and "can differ from chapter 02's" in spanned
    assert "every depth from each model's earliest cut point" in stitch_text.sweep_sentence(sweeps, None, None)
    assert "the depths the profile names" in stitch_text.sweep_sentence(sweeps, [20, 24], 4)
    floored = stitch_text.sweep_sentence(sweeps, None, None, 0.25, ["critical", "critical-1"])
    assert "until greedy accuracy falls below 25% of the full model's" in floored
    assert "naive truncation at critical and critical-1 only" in floored and "(naive at 21, 22)" in floored


def test_a_model_on_problems_of_its_own_is_marked_and_never_paired_as_a_size():
    """A base model of another family on levels of its own: every table that sets it beside the sizes names its
    problems, the size contrast stays with the two sizes of one family, and the lead speaks of models, not sizes."""
    rows = _two_sizes()
    ids = tuple(f"L5-{i}" for i in range(20))
    rows = [dataclasses.replace(r, problem_ids=ids, problem_levels=(5, 6), family="qwen2") for r in rows]
    base = [dataclasses.replace(r, model="base", size=3e8, family="gemma3_text", problem_levels=(1, 3),
                                problem_ids=tuple(f"L1-{i}" for i in range(20))) for r in rows if r.model == "big"]
    every = base + rows
    assert power_sampling.size_pair(every) == ["small", "big"]  # not the smallest two: base is of another family
    assert power_sampling_text.size_values(every)["size_small"] == "small"
    own = power_sampling_text.own_problems(every)
    assert own == {"base": " ‡", "small": "", "big": ""}
    note = ("‡ base ran problems of its own (levels 1 and 3), not the other models': its rows pair with each other, "
            "not with theirs.")
    results = power_sampling_text.results_table(every)
    assert "| base ‡ | 6/6 |" in results and results.endswith(note) and results.count("‡") == 3  # 2 rows, 1 note
    assert note not in power_sampling_text.results_table(rows)  # no model of its own: no mark, no note
    arith = dataclasses.replace(base[0], problem_ids=("arith-L1-0-0", "arith-L3-0-0"), problem_levels=(1, 3))
    assert power_sampling_text.problems_text(arith) == "levels 1 and 3, one operation each"  # how hard, said
    assert power_sampling_text.problems_text(dataclasses.replace(arith, problem_ids=("arith-L5-0-0", "arith-L6-0-0"),
                                                                 problem_levels=(5, 6))).startswith("levels 5–6, ")
    values = power_sampling_text.answer_values(power_sampling.explain(every))
    assert "| base ‡ | 5 of 6 |" in values["answer_table"] and f"\n\n{note}\n\n" in values["answer_table"]
    from helpers.evaluation.sharpness import Sharpness

    sharp = [dataclasses.replace(r, sharp=Sharpness(0.5, 0.5, 40, 400)) for r in every]
    sharpness = power_sampling_text.sharpness_values(sharp)["sharpness_table"]
    assert "| base ‡ | " in sharpness and sharpness.endswith(note)
    assert values["answer_lead"].startswith(("**No model this build searched shows search winning back what the cut costs:**", "**No, at all 3 models:**",
                                             "**Too close to call, at all 3 models:**"))
    table = power_sampling_text.decomposition_values(power_sampling.explain(every))["decomposition_table"]
    assert "| base ‡, cut to 5 of 6 blocks |" in table and table.endswith(note)
    alone = power_sampling_text.size_values([r for r in every if r.model in ("base", "big")])
    assert alone["size_headline"] == "" and "2 models but no two sizes of one family" in alone["size_sentence"]


def test_the_models_table_names_each_models_problems_where_they_differ():
    from helpers.data.arithmetic import arithmetic_problems

    shared, own = arithmetic_problems(5, [5, 6]), arithmetic_problems(5, [1, 3])
    a = dataclasses.replace(_sweep({3: 0.4, 6: 0.6}, {3: 0.2, 6: 0.6}), model="a", problems=shared)
    b = dataclasses.replace(_sweep({3: 0.4, 6: 0.6}, {3: 0.2, 6: 0.6}), model="b", problems=shared)
    base = dataclasses.replace(_sweep({3: 0.4, 6: 0.6}, {3: 0.2, 6: 0.6}), model="base", problems=own)
    assert "problems" not in stitch_text.models_table({"a": a, "b": b}, 0.5).splitlines()[0]
    lines = stitch_text.models_table({"a": a, "b": b, "base": base}, 0.5).splitlines()
    assert lines[0].startswith("| model | problems | blocks |") and lines[4].startswith("| base | 10, levels 1 and 3 | 6 |")
    sentence = stitch_text.models_sentence({"a": a, "base": base}, 0.5)
    assert "base can lose at least 3 of its 6 blocks on its own problems, levels 1 and 3 (50% of its depth" in sentence
    assert "a can lose at least 3 of its 6 blocks (" in sentence
    first = stitch_text.models_sentence({"base": base, "a": a, "b": b}, 0.5)  # the base model listed first
    assert "base can lose at least 3 of its 6 blocks on its own problems" in first and "a can lose at least 3 of its 6 blocks (" in first


def test_the_linear_maps_read_enough_texts_for_their_token_budget():
    """The other analyses of chapter 01 need a few texts per level; the maps get the pool grown to their budget, levels
    in turn (so held-out tokens come from every level), and the same pool where no budget asks for more."""
    from helpers.chapters import effective_depth

    small = effective_depth.select("arithmetic", [1, 2, 3], 2, 2, 1, seed=0)
    assert small.maps == small.pool and len(small.pool) == 6
    sel = effective_depth.select("arithmetic", [1, 2, 3], 2, 2, 1, seed=0, map_tokens=1200)
    assert sel.pool == small.pool and sel.problems == small.problems  # the other analyses are untouched
    assert len(sel.maps) * effective_depth.MIN_TEXT_TOKENS >= 1200 and {p.id for p in sel.pool} <= {p.id for p in sel.maps}
    assert [p.level for p in sel.maps[:6]] == [1, 2, 3, 1, 2, 3]


def test_the_linear_maps_are_fitted_once_and_read_back_from_the_store(tmp_path, monkeypatch):
    """A build that finds the maps stored (or released) loads each model only to name it, and fits nothing."""
    from helpers.chapters import effective_depth
    from helpers.data.sources import load_problems

    monkeypatch.setenv("SVD_RESULTS", str(tmp_path))
    monkeypatch.setenv("SVD_RELEASE", "off")
    problems = load_problems("arithmetic", n=1, levels=[1, 2], seed=0)
    first = effective_depth.linear_maps(["smollm2-135m"], "smollm2-135m", problems, map_tokens=40)
    assert first.errors.shape == (31, 31) and first.self_map and first.train_tokens > 0
    fits = []
    monkeypatch.setattr("helpers.interp.layer_maps.fit_layer_maps", lambda *args: fits.append(args))
    again = effective_depth.linear_maps(["smollm2-135m"], "smollm2-135m", problems, map_tokens=40)
    assert fits == [] and np.array_equal(again.errors, first.errors) and again.train_tokens == first.train_tokens


def test_the_premise_sentence_sets_the_base_models_sharpness_beside_the_tuned_ones_and_its_gains_within_it():
    """The base model's sharpness is compared with the instruction-tuned models' (each on its own problems); its
    gains are paired within it only: MH against greedy, T = 1 and low temperature at full depth, and MH against
    greedy at its cut; its gains over T = 1 and low temperature are set beside the tuned models' as point estimates."""
    from helpers.evaluation.sharpness import Sharpness

    rows = _two_sizes()
    names = {"small": "gemma-3-270m", "big": "qwen2.5-coder-0.5b"}
    rows = [dataclasses.replace(r, model=names[r.model]) for r in rows]
    for r, (agree, nats) in zip(rows, ((0.5, 0.6), (0.4, 0.7), (0.9, 0.05), (0.8, 0.1)), strict=True):
        r.sharp = Sharpness(agree, nats, 40, 400)
    values = power_sampling_text.sharpness_values(rows)
    sentence = values["premise_sentence"]
    assert values["premise_base_models"] == 1
    assert sentence.startswith("The base model, gemma-3-270m, gives its greedy answer in 50% of its T = 1 answers at "
                               "full depth, at 0.600 nats per token, where the instruction-tuned models give it in 90% "
                               "at 0.050 nats (each on its own problems): on these two measures it is less sharp than "
                               "every one of them, as the premise expects. At full depth its gains are MH − greedy "
                               "+0.0 points [")
    assert "MH − T = 1 +40.0 points [" in sentence and "; theirs +70.0)" in sentence  # greedy 50%, T = 1 10%
    assert "; at 5 of 6 blocks MH − greedy is +5.0 points [" in sentence
    assert "MH − low temperature +0.0 points [" in sentence
    assert sentence.endswith("Its gains at full depth lie within the instruction-tuned models' against greedy and low "
                             "temperature; below every instruction-tuned model's against T = 1: so the three comparisons do not "
                             "agree on the premise's prediction (point estimates across models, each on its own "
                             "problems: no test sets one model's gain against another's).")
    rows[0].sharp = Sharpness(0.95, 0.01, 40, 400)
    assert "it is sharper than every one of them, against the premise's expectation" in \
        power_sampling_text.premise_sentence(rows)
    rows[0].sharp = Sharpness(0.95, 0.2, 40, 400)
    assert "it is neither sharper nor less sharp than all of them" in power_sampling_text.premise_sentence(rows)
    assert values["premise_summary"] == (
        "The report samples base models, which the premise says are less sharp, so search gains more on them. "
        "Here gemma-3-270m is one: it is less sharp than every one of the instruction-tuned models, as the premise "
        "expects, and its gains from search at full depth lie within the instruction-tuned models' against greedy and low temperature; "
        "below every instruction-tuned model's against T = 1: so the three comparisons do not agree on the premise's "
        "prediction. These are point estimates across models, each on its own problems: no test sets one model's "
        "gain against another's; chapter 04 gives the numbers.")
    tuned = [r for r in rows if r.model.startswith("qwen")]
    assert power_sampling_text.premise_summary(tuned) == ""
    assert power_sampling_text.premise_sentence(tuned).startswith("No base model ran in this build")
    assert power_sampling_text.sharpness_values(tuned)["premise_base_models"] == 0


def test_naive_truncation_at_a_few_depths_is_compared_only_where_it_ran():
    s = _sweep({3: 0.0, 4: 0.1, 5: 0.35, 6: 0.5}, {3: 0.0, 4: 0.0, 5: 0.1, 6: 0.5})
    for table in (s.accuracy, s.outputs, s.agreement):  # naive at the critical depth and one below, and full
        table["naive"] = {d: v for d, v in table["naive"].items() if d in (4, 5, 6)}
    assert stitch.compared_depths(s) == [5, 4]
    values = stitch_text.agreement_values(s)
    assert values["cut_depth"] == 4
    assert values["closer_sentence"].startswith("Of the 2 truncated depths where both cuts ran, the lower KL")
    sentence = stitch_text.critical_values(s, 0.5, 10)["critical_sentence"]
    assert "Naive truncation, run at 5 and 4 blocks only, holds that level at neither." in sentence
    assert stitch.resolve_depths(["critical", "critical-1"], 5, 6) == [6, 5, 4]
    with pytest.raises(ValueError, match="relative to the critical depth"):
        stitch.resolve_depths(["critical"], None, 6)


def test_the_floor_sweep_goes_down_until_accuracy_falls_below_its_share_of_the_full_models():
    accuracy = {10: 0.8, 9: 0.7, 8: 0.5, 7: 0.3, 6: 0.1, 5: 0.0, 4: 0.0}
    asked = []

    def decode(variants):
        asked.append([d for _, d in variants])
        return {v: [{"correct": i < round(10 * accuracy[v[1]])} for i in range(10)] for v in variants}

    out = stitch.down_to_floor(decode, 10, 0.25)  # a quarter of 80% is 20%: depth 6 is the first below it
    assert sorted({d for _, d in out}, reverse=True) == [10, 9, 8, 7, 6, 5] and asked == [[10, 9, 8], [7, 6, 5]]
    accuracy[10] = 0.0
    asked.clear()
    assert set(stitch.down_to_floor(decode, 10, 0.25)) == {("stitch", d) for d in (10, 9, 8)} and len(asked) == 1
    with pytest.raises(ValueError, match="floor_fraction"):
        stitch.down_to_floor(decode, 10, 1.0)


def test_the_length_study_says_what_the_sweeps_cap_cut_off_and_which_cap_the_answers_need():
    from helpers.evaluation.lengths import BoxStop

    def answers(lengths):  # an answer that ends (EOS) after n tokens, or None: still going at the study's cap
        return [[{"n_tokens": n or 256, "stopped": n is not None, "correct": True,
                  "tokens": list(range(n)) if n else [1, 2, 3, 4] * 64}] for n in lengths]  # the unfinished loop

    full = answers([50] * 20)
    cut = answers([50] * 10 + [150] * 8 + [None] * 2)  # 10% never end: 160 holds all that do
    study = stitch.AnswerLengths("m", 6, 5, 256, {("greedy", 6): full, ("temperature", 6): full,
                                                  ("greedy", 5): cut, ("temperature", 5): cut},
                                 box={("greedy", 6): BoxStop(20, 0, 0, 0, 1000, 0)})
    values = stitch_text.lengths_values({"m": study}, 128)
    assert values["lengths_cap"] == 160
    assert values["lengths_sentence"].startswith("On this chapter's 20 problems, at its critical depth, m at 5 of 6 "
                                                 "blocks")  # its own problems, said: chapter 04's are others
    assert ("m at 5 of 6 blocks leaves 50% of its greedy answers unfinished at 128 new tokens and 10% at 256, and "
            "needs a cap of 160") in values["lengths_sentence"]
    assert values["lengths_sentence"].endswith("On 20 problems one answer is 5 points of a share, and these shares are "
                                               "this chapter's problems' only: chapter 04 counts how the answers end on "
                                               "its own problems (its outcomes table, which the front page quotes), and "
                                               "where those are other or harder problems, the shares there can differ.")
    table = values["lengths_table"].splitlines()
    assert len(table) == 2 + 4 + 2 and "| m | 5 of 6 | greedy | 20 | 100 | 50% | 10% (2) | – |" in table
    assert table[-1].startswith("An unfinished answer is counted as looping when at least 50% of")  # the legend, with it
    assert "| m | 6 of 6 | greedy | 20 | 50 | 0% | 0% (0) | 0 of 20, 0% |" in table
    none = stitch_text.lengths_values({}, 128)["lengths_table"]
    assert none.startswith("This build ran no length study") and "looping" not in none  # no legend for no table


def test_a_format_timed_faster_but_not_taken_by_auto_is_explained_not_left_a_riddle():
    from types import SimpleNamespace

    from helpers.chapters import precision_text

    rates = {f: SimpleNamespace(prompt_tokens_per_s=p, decode_tokens_per_s=d)
             for f, p, d in (("float32", 700.0, 50.0), ("bfloat16", 1400.0, 103.5))}
    speed = SimpleNamespace(by_rows={8: rates}, max_new_tokens=48, others=0.05,
                            ratio=lambda rows, part: {"decode": 2.07, "prompt": 2.0}[part])
    c = SimpleNamespace(model="m", auto="float32", auto_reason="no measurement of this model on this machine",
                        speed=speed, speed_asked=8)
    sentence = precision_text.speed_values(c)["dtype_speed_sentence"]
    assert "(2.07 times float32's rate)" in sentence
    assert "takes float32 for m on this machine all the same" in sentence and "not this chapter's short timing" in sentence
    c.auto = "bfloat16"
    assert "all the same" not in precision_text.speed_values(c)["dtype_speed_sentence"]
    assert "Other processes" not in sentence  # 5% of the cores used by others: a quiet machine, nothing said
    speed.others = 0.48  # a build that shared its machine says its rates are that moment's
    shared = precision_text.speed_values(c)
    assert "Other processes used 48% of the machine's cores while these timings ran" in shared["dtype_speed_sentence"]
    assert shared["dtype_speed_summary"].startswith("While other processes used 48% of this build's machine, bfloat16 "
                                                    "decoded at 2.07 times float32's rate (that moment's rate")


def test_a_window_measures_the_share_of_the_cores_other_processes_used():
    """The timing window counts other processes' CPU time: a child process spinning on a core while this one sleeps
    is a core's share of the machine."""
    import subprocess
    import sys

    from helpers.core.contention import Window

    if not __import__("pathlib").Path("/proc/stat").exists():
        pytest.skip("no /proc/stat: the share is unknown off Linux")
    with Window() as alone:
        sum(i * i for i in range(3_000_000))  # this process's own work
    child = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        with Window() as shared:
            __import__("time").sleep(1.0)
    finally:
        child.kill()
    assert alone.others is not None and 0 <= alone.others <= 1  # others may run beside a test: no more is certain
    assert shared.others >= 0.9 / (__import__("os").cpu_count() or 1) - 0.1  # one core of the machine's, at least


def test_the_pass_at_k_sentence_says_where_the_search_rose_less_and_what_that_suggests():
    both = [dataclasses.replace(r, pass_at_k={"temperature": [0.4, 0.6], "power": [0.5, 0.55]}) for r in _two_sizes()]
    sentence = power_sampling_text.pass_sentence(both)  # every model, each by name
    assert sentence.startswith("From k = 1 to k = 2, power sampling's pass@k rises less than T = 1's at every depth")
    both[3] = dataclasses.replace(both[3], pass_at_k={"temperature": [0.4, 0.5], "power": [0.4, 0.6]})
    assert "rises less than T = 1's at small at 6, small at 5 and big at 6 and not at big at 5:" in \
        power_sampling_text.pass_sentence(both)
    rows = both[:2]  # one model: its depths alone
    rows[1] = dataclasses.replace(rows[1], pass_at_k={"temperature": [0.4, 0.5], "power": [0.4, 0.6]})
    assert "rises less than T = 1's at 6 blocks and not at 5: these few samples show no consistent sign" in \
        power_sampling_text.pass_sentence(rows)
    rows[0] = dataclasses.replace(rows[0], pass_at_k={"temperature": [0.4, 0.5], "power": [0.4, 0.6]})
    assert "at no depth does power sampling's pass@k rise less" in power_sampling_text.pass_sentence(rows)
    one = [dataclasses.replace(r, pass_at_k={"temperature": [0.4], "power": [0.5]}) for r in rows]
    assert power_sampling_text.pass_sentence(one).startswith("With one sample per problem")


def test_the_depths_of_several_models_named_by_their_critical_depths_are_said_in_one_sentence():
    from helpers.evaluation.critical import DepthChoice

    rows = _two_sizes()
    rows[0].choice = rows[1].choice = DepthChoice("small", 6, (5,), critical=5, relative=True)
    rows[2].choice = rows[3].choice = DepthChoice("big", 6, (5, 4), critical=5, relative=True)
    assert power_sampling_text.depth_sentence(rows) == (
        "The depths tested on each model are named by its critical depth in chapter 03: 5 of small's 6 blocks "
        "(critical: 5); 5 and 4 of big's 6 blocks (critical: 5).")
    rows[2].choice = rows[3].choice = DepthChoice("big", 6, (5,), critical=5, relative=True)
    assert power_sampling_text.depth_sentence(rows) == (
        "The depth tested on each model is its critical depth in chapter 03: 5 of small's 6 blocks and 5 of big's 6 "
        "blocks.")
    rows[2].choice = rows[3].choice = DepthChoice("big", 6, (4,), critical=5, relative=False)
    assert "The profile fixed the depths tested on big's 6 blocks at 4" in power_sampling_text.depth_sentence(rows)


def test_the_depth_axis_draws_chapter_03s_curve_only_on_the_same_problems_and_settings():
    """The report's Figure 2 across depth sets chapter 03's greedy sweep beside this chapter's methods only where the
    sweep decoded the very same problems with the same cap and shots; elsewhere it says why it draws none."""
    from helpers.data.model_sets import problem_sets
    from helpers.evaluation.critical import DepthChoice, SweepSettings
    from helpers.plots.power import depth_axis

    sweep = SweepSettings.from_parameters(dict(
        dataset="arithmetic", n_problems=10, levels=[1, 2], seed=0, shots=2, max_new_tokens=160, depths=None,
        span=None, depth_step=1, kl_fraction=0.5, overlap_threshold=0.3, collapse_fraction=0.5))
    ids = tuple(p.id for p in problem_sets(["toy"], "arithmetic", n=10, levels=[1, 2], seed=0)["toy"])
    choice = DepthChoice("toy", 6, (5,), critical=5, relative=True, curve=((4, 0.2), (5, 0.45), (6, 0.5)),
                         sweep=sweep, curve_problems=len(ids))
    rows = [dataclasses.replace(r, problem_ids=ids, choice=choice) for r in (_row(6, 0.5, 0.55), _row(5, 0.4, 0.45))]
    axes = power_sampling.depth_axes(rows, max_new_tokens=160, shots=2)
    assert len(ids) == 20 and axes[0].curve == {4: 0.2, 5: 0.45, 6: 0.5} and axes[0].why == "" and axes[0].critical == 5
    assert power_sampling_text.depth_axis_sentence(axes) == (
        "The line is chapter 03's stitched greedy sweep on these same problems, for toy (4–6 blocks, 20 problems). "
        "The depths searched are named from it: the critical depth is the shallowest whose greedy accuracy holds its "
        "share on these very problems, so by its choice the cut costs greedy decoding little on them; a depth read on "
        "other problems may cost more.")  # a selection the headline's cut inherits, said where the depth is named
    fixed = [dataclasses.replace(a, rows=tuple(dataclasses.replace(r, choice=dataclasses.replace(choice, relative=False))
                                               for r in a.rows)) for a in axes]
    assert "named from it" not in power_sampling_text.depth_axis_sentence(fixed)
    fig = depth_axis(axes)
    assert [line.get_label() for line in fig.axes[0].get_lines()][:1] == ["greedy, chapter 03's sweep"]
    lens = power_sampling.depth_axes([dataclasses.replace(r, choice=dataclasses.replace(choice, cuts=(2, 5)))
                                      for r in rows], max_new_tokens=160, shots=2)
    assert lens[0].cuts == (2, 5) and power_sampling_text.depth_axis_sentence(lens).endswith(
        "The lens's cut points (chapter 02's two rules, read on chapter 03's problems) would cut toy at 2 and 5 blocks.")
    notes = [t.get_text() for t in depth_axis(lens).axes[0].texts]
    assert "lens cut" in notes and "← lens cut at 2" in notes  # 5 on the panel's depths, 2 below them
    below = dataclasses.replace(choice, cuts=(3,))
    assert power_sampling_text.depth_axis_sentence(power_sampling.depth_axes(
        [dataclasses.replace(r, choice=below) for r in rows], max_new_tokens=160, shots=2)).endswith(
        "would cut toy at 3 blocks, below its critical depth (5).")
    longer = power_sampling.depth_axes(rows, max_new_tokens=384, shots=2)  # another cap: another measurement
    assert longer[0].curve == {} and "at 160 new tokens, not this chapter's 20 at 384" in longer[0].why
    assert "Chapter 03's sweep is not drawn for toy (chapter 03 swept 20 problems" in \
        power_sampling_text.depth_axis_sentence(longer)
    two = power_sampling.depth_axes(rows + [dataclasses.replace(r, model="big", size=2e9) for r in rows],
                                    max_new_tokens=384, shots=2)  # one reason, said once for both models
    assert power_sampling_text.depth_axis_sentence(two).startswith("Chapter 03's sweep is not drawn for toy and big (")
    assert not [line for line in depth_axis(longer).axes[0].get_lines() if line.get_label().startswith("greedy, ch")]
    bare = power_sampling.depth_axes([dataclasses.replace(r, choice=None) for r in rows], max_new_tokens=160, shots=2)
    assert bare[0].why == "chapter 03 stored no sweep of it under this build's settings"
    first = {p.id for p in problem_sets(["toy"], "arithmetic", n=4, levels=[1, 2], seed=0)["toy"]}  # 4 per level
    part = dataclasses.replace(choice, sweep=dataclasses.replace(sweep, n_problems=4), curve_problems=8)
    easy = [dataclasses.replace(r, choice=part, scores={**r.scores, "greedy": [float(i in first) for i in ids]})
            for r in rows]  # the full model solves exactly the sweep's problems
    axes = power_sampling.depth_axes(easy, max_new_tokens=160, shots=2)
    assert axes[0].curve == {} and axes[0].sweep_subset == power_sampling.SweepSubset(8, 20, 1.0, 0.4)
    assert power_sampling_text.depth_axis_sentence(axes) == (
        "Chapter 03's sweep is not drawn for toy (chapter 03 swept the first 8 of these 20 problems, where full-depth "
        "greedy scores 100% against 40% on all 20): only this chapter's depths are. So the critical depth was read on "
        "part of the problems it is then tested on, and on their easier part.")


def test_the_front_says_where_a_cut_sits_on_the_collapse_line_and_where_the_cap_shares_the_verdict():
    """A cut chosen as chapter 03's critical depth with no problem to spare is named under the front table (one
    problem fewer moves it); a model whose cut ends many more answers at the cap says so in the lead itself."""
    from helpers.evaluation.critical import DepthChoice, SweepSettings

    sweep = SweepSettings("arithmetic", 16, None, 0, 2, 160, None, None, 1, 0.5, 0.3, 0.5)
    rows = _two_sizes()
    rows[0].choice = rows[1].choice = DepthChoice("small", 6, (5,), 5, True, curve=((5, 5 / 16), (6, 10 / 16)),
                                                  sweep=sweep, curve_problems=16)  # 5 of 16 against the line's 5
    rows[2].choice = rows[3].choice = DepthChoice("big", 6, (5,), 5, True, curve=((5, 9 / 16), (6, 10 / 16)),
                                                  sweep=sweep, curve_problems=16)  # 9 against 5: room to spare
    table = power_sampling_text.answer_values(power_sampling.explain(rows))["answer_table"]
    assert ("within one problem of that line: small solves 5 of 16 at its cut, where the line asks 5; one fewer and "
            "its critical depth would be the full model: no cut at all.") in table and "big solves" not in table
    cut_off = [["cut off"]] * 12 + [["correct"]] * 8  # the cut ends 60% of greedy answers at the cap
    for r in rows:
        r.ends = {"greedy": [["correct"]] * 20 if r.depth == 6 or r.model == "big" else cut_off}
    lead = power_sampling_text.answer_values(power_sampling.explain(rows))["answer_lead"]
    assert "the cut leaves unfinished 60% of small's greedy answers at 5 blocks (0% at full depth), and" in lead
    assert "big's greedy answers" not in lead  # only the model the cap cuts
    verdict = power_sampling_text.verdict_values(rows)["verdict"]  # the chapter's verdict says it where it is given
    assert verdict.count("At this token cap 60% of its greedy answers at 5 blocks are unfinished, against 0%") == 1


def test_the_halves_contributions_are_read_by_their_median_blocks_too_so_one_spike_cannot_make_a_drop():
    """Layer 2's massive activation lifts the first half's mean to 1.3 times the second's; its median block writes
    as much as the second half's, and the sentence says the drop is not there. A drop in every block is said to hold."""
    from types import SimpleNamespace

    from helpers.chapters import effective_depth_text

    def study(rc):
        return SimpleNamespace(curves={"rc_layer": np.array(rc)}, n_layers=len(rc), info=SimpleNamespace(name="m"),
                               maxima={"rc_mlp": np.ones(len(rc))})

    spiked = effective_depth_text.contribution_values(study([9.0, 0.4, 2.0, 0.4, 0.4, 0.41, 0.4, 0.42, 0.4, 0.4, 0.39,
                                                             0.3]))
    assert spiked["rc_ratio"] > 1.2 and spiked["rc_median_ratio"] == pytest.approx(1.0)
    assert "does not write clearly less" in spiked["rc_verdict"]
    assert spiked["rc_summary"] == "but its median block only 1.00 times less, so a few early layers carry the mean"
    dropped = effective_depth_text.contribution_values(study([9.0, 0.8, 0.8, 0.8, 0.8, 0.8, 0.4, 0.4, 0.4, 0.4, 0.4,
                                                              0.3]))
    assert "writes clearly less here too" in dropped["rc_verdict"] and "2.00" in dropped["rc_verdict"]
    assert dropped["rc_summary"] == "and its median block clearly less too"


def test_the_skip_figures_say_which_problems_they_average_and_whether_those_have_several_steps():
    from helpers.chapters import effective_depth_text

    one = [Problem("arith-L1-0-0", "q", "1", level=1), Problem("arith-L2-0-0", "q", "2", level=2)]
    assert effective_depth_text.skip_scope(one) == (
        "The skip figures take the maximum over 2 problems (arith-L1-0-0 and arith-L2-0-0), whose answers take 1 operation: "
        "single-step problems, so these figures show how a skip moves a one-step computation, not how a multi-step "
        "one is spread over the depth, as the papers' problems can.")
    assert effective_depth_text.skip_scope([Problem("arith-L5-0-0", "q", "1", level=5)]).endswith("take 3 operations.")
    assert effective_depth_text.skip_scope([Problem("gsm-1", "q", "1")]) == "The skip figures take the maximum over 1 problem (gsm-1)."


def test_chapter_03s_summary_says_its_result_in_words_of_its_own():
    s = _sweep({3: 0.0, 4: 0.1, 5: 0.35, 6: 0.5}, {3: 0.0, 4: 0.0, 5: 0.3, 6: 0.5})
    summary = stitch_text.summary_sentence(s, 0.5)
    assert summary.startswith("On toy, stitch-and-preserve keeps at least 50% of full-depth greedy accuracy down to 5 "
                              "of 6 blocks, 1 block removed")
    assert summary.endswith("Naive truncation is not told apart from it at any of the 3 depths where both ran.")
    assert summary not in stitch_text.critical_values(s, 0.5, 10)["critical_sentence"]
    none = _sweep({5: 0.0, 6: 0.0}, {5: 0.0, 6: 0.0})
    assert "solves none of these problems" in stitch_text.summary_sentence(none, 0.5)


def test_the_depth_axis_says_once_that_every_models_sweep_ran_on_the_first_problems():
    from types import SimpleNamespace

    from helpers.chapters.power_sampling import SweepSubset

    def axis(model, easy):
        part = SweepSubset(16, 100, easy, 0.4)
        return SimpleNamespace(model=model, curve={}, sweep_subset=part, why=f"chapter 03 swept {part.describe()}",
                               subset_only=True, cuts=())

    sentence = power_sampling_text.depth_axis_sentence([axis("a", 0.5), axis("b", 0.6)])
    assert sentence == ("Chapter 03's sweep is not drawn: for a and b it ran on the first 16 of these 100 problems, "
                        "where full-depth greedy scores 50% and 60% against 40% and 40% on all 100, in that order; only "
                        "this chapter's depths are drawn. So each critical depth was read on part of the problems it is "
                        "then tested on, and on their easier part.")


def test_the_decomposition_at_another_setting_sits_beside_this_ones_with_what_its_cap_made():
    """At the other setting (160 tokens, B = 28) big's cut costs 30 points, all of them gone under its longer cap; at
    this chapter's setting the cut costs 5. The table gives both settings' terms per model, the sentence the cut's
    cost at the other setting and what the longer cap takes off it; where the longer cap takes nothing off, it says
    so; nothing is said where no other setting ran."""
    from helpers.samplers.settings import Searches

    mine = {"alpha": 2.0, "block_size": 192, "mcmc_steps": 10, "power_mode": "reference", "mh_blocks": 16,
            "smc_particles": 4, "smc_block_size": 16, "smc_ess_threshold": 0.5, "smc_bridge_tokens": 0}
    searches, other = Searches.from_parameters(mine), {**mine, "max_new_tokens": 160, "block_size": 28, "mh_blocks": 0}
    other_rows = _two_sizes()
    other_rows[3].longer = power_sampling.LongerCap("big", 6, 5, 512, 160, tuple(_scores(0.8)), tuple(_scores(0.8)),
                                                    0, 0.05)
    now = _two_sizes()
    now[3].scores["greedy"] = _scores(0.75)
    explained = power_sampling.explain(now)
    values = power_sampling_text.robustness_values(explained, other_rows, searches, 384, other)
    table = values["robustness_table"].splitlines()
    assert [line.split(" | ")[1] for line in table[2:6]] == ["384 tokens, B = 192, at most 16 blocks a chain",
                                                             "160 tokens, B = 28, at most 6 blocks a chain"] * 2
    assert table[4].startswith("| big | 384 tokens, B = 192, at most 16 blocks a chain | 5 of 6 | -5.0 [")
    assert table[5].startswith("|  | 160 tokens") and "| -30.0 [" in table[5]
    assert "both settings ran the same problems" in table[-1]
    sentence = values["robustness_sentence"]
    assert sentence.startswith("The table sets this chapter's decomposition (384 tokens, B = 192, at most 16 blocks a "
                               "chain) beside the same comparison at 160 tokens, B = 28, at most 6 blocks a chain, on "
                               "the same problems. There, on small, the cut")
    assert ("On big, the cut to 5 of 6 blocks cost greedy decoding -30.0 points [-50, -10] (larger than its noise); "
            "under 512 tokens the same cut costs +0.0 points [+0, +0], +30.0 points [") in sentence
    assert "less (larger than its noise): answers the shorter cap cut off made that part of its cost" in sentence
    assert "at this chapter's setting the cut to 5 blocks costs -5.0 points [" in sentence
    assert sentence.count("made that part") == 1 and "†" not in values["robustness_table"]
    other_rows[3].longer = dataclasses.replace(other_rows[3].longer, cut=tuple(_scores(0.55)))  # 5 problems back
    near = power_sampling_text.robustness_values(explained, other_rows, searches, 384, other)["robustness_sentence"]
    assert "+5.0 points [" in near and "too close to say that the shorter cap made part of its cost" in near
    other_rows[3].longer = dataclasses.replace(other_rows[3].longer, cut=tuple(_scores(0.4)))  # costs more there
    worse = power_sampling_text.robustness_values(explained, other_rows, searches, 384, other)["robustness_sentence"]
    assert "the same cut costs -40.0 points [" in worse and "no less (-10.0 points [" in worse
    other_rows[3].longer = dataclasses.replace(other_rows[3].longer, full=tuple(other_rows[2].scores["greedy"]),
                                               cut=tuple(other_rows[3].scores["greedy"]))  # the longer cap moved none
    alike = power_sampling_text.robustness_values(explained, other_rows, searches, 384, other)["robustness_sentence"]
    assert "no less: every problem is graded alike under both caps" in alike and "[+0, +0] apart" not in alike
    mine_cap = dataclasses.replace(other_rows[3].longer, cap=384, full=tuple(now[2].scores["greedy"]),
                                   cut=tuple(now[3].scores["greedy"]))  # its longer cap is this chapter's own cap
    other_rows[3].longer = mine_cap
    own = power_sampling_text.robustness_values(explained, other_rows, searches, 384, other)["robustness_sentence"]
    assert ("under this chapter's cap of 384 tokens, where its greedy decodes are this chapter's own, the same cut costs "
            "-5.0 points [") in own and "at this chapter's setting" not in own.split("On big")[1]  # said once
    moved = [dataclasses.replace(r, problem_ids=("other",)) for r in other_rows]
    assert "**the settings ran different problems**" in power_sampling_text.robustness_values(
        explained, moved, searches, 384, other)["robustness_table"]
    assert power_sampling_text.robustness_values(explained, [], searches, 384, None) == {
        "robustness_table": "", "robustness_sentence": ""}
    subset = power_sampling.explain(_two_sizes(small_full_power=[1.0] * 4 + [0.0] * 4))  # MH full on 8 of 20
    table = power_sampling_text.robustness_values(subset, other_rows, searches, 384, other)["robustness_table"]
    marked = [line for line in table.splitlines() if "†" in line]
    assert len(marked) == 2 and marked[0].count(" †") == 1 and "first 8 problems of the 20 only" in marked[1]


def test_the_comparison_at_another_setting_runs_that_settings_parameters_and_reads_a_released_one_only(monkeypatch):
    """`at_setting` calls `compare_methods` with the other profile's parameters of the chapter, as the notebook calls
    it with its own, and with that profile released, reads only (a record the release lacks would stop it)."""
    from helpers.data.model_sets import problem_sets
    from helpers.results.store import released_only
    from helpers.runner.planning import other_setting

    calls = []
    monkeypatch.setattr(power_sampling, "compare_methods", lambda *a, **k: calls.append((a, k, released_only())) or [])
    setting = other_setting("smoke", "04_power_sampling")
    assert power_sampling.at_setting(setting) == [] and power_sampling.at_setting(None) == []
    (models, problems, depths, searches), kwargs, read_only = calls[0]
    assert models == ["smollm2-135m"] and depths is None and searches.power.block_size == 16 and not read_only
    assert kwargs["max_new_tokens"] == 48 and kwargs["critical_sweep"]["max_new_tokens"] == 48
    assert [p.id for p in problems["smollm2-135m"]] == [p.id for p in problem_sets(
        ["smollm2-135m"], "arithmetic", n=1, levels=[1, 2, 3], seed=0)["smollm2-135m"]]
    power_sampling.at_setting({**setting, "released": True})
    assert calls[1][2] and not released_only()  # read only while it runs, as before afterwards
    power_sampling.at_setting({**setting, "models": ["gemma-3-270m", "smollm2-135m"]}, ["smollm2-135m", "other"])
    assert calls[2][0][0] == ["smollm2-135m"] and list(calls[2][0][1]) == ["smollm2-135m"]  # the chapter's models only


def test_the_n_sweep_names_every_n_that_shares_the_highest_accuracy():
    from helpers.chapters.power_sampling import StepsSweep

    scores = {0: [1.0, 0.0, 0.5, 0.0], 1: [0.5, 0.0, 0.0, 0.0], 2: [1.0, 0.5, 0.0, 0.0], 4: [0.5, 0.5, 0.5, 0.0]}
    sweep = StepsSweep("small", 5, 6, [0, 1, 2, 4], [sum(v) / 4 for v in scores.values()], [10.0, 20.0, 30.0, 50.0],
                       scores, n_problems=4, n_seeds=2, mode="reference", chapter_steps=4)
    said = power_sampling_text.sweep_glue(sweep)["steps_sentence"]
    assert "scored from 12% to 38% across N (highest at N = 0, 2 and 4: 38% [" in said  # a three-way tie, not N = 0


def test_the_answer_says_where_its_test_can_look_and_what_lay_one_block_deeper():
    from helpers.evaluation.critical import DepthChoice

    rows = _two_sizes()
    rows += [dataclasses.replace(_row(4, 0.05, 0.0), model=name, size=size) for name, size in (("small", 1e9), ("big", 2e9))]
    for r in rows:
        r.choice = DepthChoice(r.model, 6, (5, 4), critical=5, relative=True)
    explained = power_sampling.explain(rows)
    said = power_sampling_text.limit_sentence(explained, rows)
    assert said.startswith("Every model was searched 1 block below its full depth (its critical depth, 5 of 6 and 5 of 6 "
                           "blocks), keeping 83% of the blocks.")
    assert ("With one more block removed (4 and 4 blocks), greedy decoding scored 5% and MH 0% (one seed), against "
            "50–80% for greedy decoding at full depth, so the test can look only at the critical depth itself.") in said
    costs = {e.full.model: e.parts["power"].terms["cut_cost"] for e in explained}
    assert not costs["small"].clear and costs["big"].clear  # -10 on 20 problems is noise, -30 is not
    assert (f"on small ({costs['small'].points(1)}), a search that reaches the full model's accuracy cannot be told "
            "from a cut that cost nothing.") in said
    assert said.endswith(f"Only on big ({costs['big'].points(1)}) does the cut cost more than its noise: there the "
                         "search had accuracy to win back.")  # the one model where the question can be asked
    assert "one more block removed" not in power_sampling_text.limit_sentence(explained, rows[:4])  # none ran there
    assert power_sampling_text.limit_sentence([], rows) == ""
