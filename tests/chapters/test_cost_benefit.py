"""Chapter 05: it prices chapter 04's stored decodes instead of recomputing them, and its front is right."""

from __future__ import annotations

import dataclasses
import json
import os
import traceback
from pathlib import Path

import pytest

import helpers.evaluation.decodes as sampling
from helpers.chapters import cost_benefit as ch
from helpers.chapters import cost_benefit_text, power_sampling_text
from helpers.chapters.power_sampling import compare_methods
from helpers.engines.slot_runner import SlotRunner
from helpers.samplers.power import PowerConfig
from helpers.samplers.settings import Searches
from helpers.samplers.smc import SMCConfig
from helpers.samplers.target import Target
from tests.evaluation.test_sampling import PROBLEMS

SEARCHES = Searches(Target(2.0), PowerConfig(block_size=4, mcmc_steps=2), SMCConfig(particles=3, block_size=4))
SETTINGS = dict(n_seeds=2, max_new_tokens=8, shots=0, seed=0, batch_size=4)


def test_chapter_05_reads_chapter_04s_decodes(tiny_dir, tmp_path, monkeypatch):
    monkeypatch.setenv("SVD_RESULTS", str(tmp_path))
    stacks = []
    forward = SlotRunner.decode

    def traced(self, *args, **kwargs):
        stacks.append([f"{Path(f.filename).stem}.{f.name}" for f in traceback.extract_stack()
                       if f"{os.sep}helpers{os.sep}" in f.filename])
        return forward(self, *args, **kwargs)

    monkeypatch.setattr(SlotRunner, "decode", traced)
    rows = compare_methods([str(tiny_dir)], PROBLEMS, [3], SEARCHES, **SETTINGS)
    monkeypatch.setattr(SlotRunner, "decode", forward)
    # the decode path the architecture page lists: from the chapter's call to the model runner (traced here, so not
    # a frame of `helpers` in the stack), seven frames
    path = stacks[0][next(i for i, f in enumerate(stacks[0]) if f.endswith("compare_methods")):]
    assert path == ["power_sampling.compare_methods", "decodes.sample_at_depths", "decodes._decode",
                    "work.run_together", "loop.run_programs", "slot.step"], path
    calls = []
    plain = sampling.decode_work

    def watched(prompts, max_new_tokens, stops, temperature, *args, **kwargs):
        calls.append(temperature)
        return plain(prompts, max_new_tokens, stops, temperature, *args, **kwargs)

    def no_chains(*args, **kwargs):
        raise AssertionError("chapter 05 re-ran power sampling instead of reading chapter 04's chains")

    monkeypatch.setattr(sampling, "decode_work", watched)
    monkeypatch.setattr(sampling, "chain_work", no_chains)
    monkeypatch.setattr(sampling, "smc_work", no_chains)
    m = ch.measure(str(tiny_dir), PROBLEMS, [3], SEARCHES, matched=True, **SETTINGS)
    # only new temperature-1 samples (the compute-matched baselines) and greedy at the break-even depth
    assert set(calls) <= {1.0, 0.0}
    assert calls.count(0.0) <= 1
    by = {(p.depth, p.method): p for p in m.points}
    for r in rows:
        assert by[(r.depth, "power")].accuracy == pytest.approx(r.accuracy["power"])
        assert by[(r.depth, "greedy")].accuracy == pytest.approx(r.accuracy["greedy"])
        assert by[(r.depth, "SMC")].accuracy == pytest.approx(r.accuracy["smc"])
        smc_matched = by[(r.depth, "best-of-3")]  # K = 3 temperature-1 samples: as many candidates as SMC draws
        assert smc_matched.matched and smc_matched.samples == 3
        k = m.matched_k[r.depth]
        if k > 1:
            matched = by[(r.depth, f"majority-of-{k}")]
            assert matched.matched and matched.samples == k
            single = by[(r.depth, "T=1")]
            assert matched.tokens == pytest.approx(k * single.tokens, rel=0.5)  # k samples' worth of tokens
            assert k * single.tokens >= by[(r.depth, "power")].tokens * 0.5
    assert all(p.flops > 0 for p in m.points)
    for depth in (4, 3):  # a point's seconds are its records' own, as stored (one answer's share of its passes)
        stored = [r["seconds"] for r in m.power_records[depth]]
        power = next(p for p in m.points if p.depth == depth and p.method == "power")
        assert power.seconds == pytest.approx(sum(stored) / len(stored) * power.samples) and power.seconds > 0
    power_at_3 = sum(r["decoded_tokens"] for r in m.power_records[3]) / len(m.power_records[3])
    assert m.full_multipliers[3] == pytest.approx(power_at_3 / m.greedy_tokens[4])  # the cut's MH over full greedy
    assert m.full_multipliers[4] == pytest.approx(m.multipliers[4]) and ch.size_cost(m).multiplier == m.full_multipliers[3]
    labels = [label for label, _ in ch.matched_comparisons(m, "SMC")]
    assert labels == ["SMC − best-of-3, both at 4", "SMC − majority-of-3, both at 4",
                      "SMC − best-of-3, both at 3", "SMC − majority-of-3, both at 3"]
    values = cost_benefit_text.smc_values(m)
    smc_tokens = sum(r["decoded_tokens"] for r in m.smc_records[4]) / len(m.smc_records[4])
    assert values["smc_multiplier"] == pytest.approx(smc_tokens / m.greedy_tokens[4])
    smc_at_3 = sum(r["decoded_tokens"] for r in m.smc_records[3]) / len(m.smc_records[3])
    assert m.smc_full_multipliers[3] == pytest.approx(smc_at_3 / m.greedy_tokens[4])  # the cut's SMC over full greedy
    assert values["smc_cut_multiplier"] == m.smc_full_multipliers[3]  # the cut is what truncation must pay for
    assert values["smc_cut_needed_saving"] == pytest.approx(100 * (1 - 1 / m.smc_full_multipliers[3]))
    assert f"At the cut, 3 blocks, SMC decoded {m.smc_full_multipliers[3]:.2f} times" in values["smc_verdict"]
    assert values["smc_conclusion_holds"] == (values["smc_cut_needed_saving"] > 100 * (1 - ch.flops_share(
        m.config, 3, m.context)))
    assert values["smc_verdict"].startswith("With K = 3 particles")
    assert f"on the same problems ({m.mh_on_smc_problems[4]:.2f} times" in values["smc_verdict"]  # like with like
    assert f"greedy answer on its {m.smc_problems} problem" in values["smc_verdict"] and m.smc_problems >= 1
    assert "For scale only, the exact count puts MH at the report's settings" in values["smc_verdict"]  # not a peer
    needs, multipliers = ch.budgets(m, 14.5)
    assert list(multipliers.values()) == pytest.approx([ch.multiplier_values(m)["multiplier_vs_greedy"],
                                                        values["smc_multiplier"], 14.5])
    assert list(needs.values())[2] == pytest.approx(1 - 1 / 14.5) and all(0 <= v < 1 for v in needs.values())
    assert next(iter(needs)).startswith(f"needed at {m.model}'s full-depth MH ×")  # whose multiplier each line is
    subset = m.smc_problems < ch.multiplier_values(m)["multiplier_problems"]
    assert [(f"on {m.smc_problems} of the" in k) for k in multipliers] == [False, subset, False]
    from helpers.evaluation.cost import qwen25_math_configs

    saving = cost_benefit_text.savings_values(m, qwen25_math_configs(), multipliers)
    assert saving["cut_multiplier"] == m.full_multipliers[3]  # the cut's MH against the full-depth greedy it replaces
    assert saving["cut_needed_saving"] == pytest.approx(100 * (1 - 1 / m.full_multipliers[3]))


def test_smcs_multiplier_pairs_its_problems_with_greedys_in_a_full_depth_only_build(tiny_dir, tmp_path, monkeypatch):
    """Where the full depth is the headline (MH and greedy on every problem) and SMC runs on the searches' subset,
    SMC's tokens are set against greedy's on that subset, not on every problem."""
    monkeypatch.setenv("SVD_RESULTS", str(tmp_path))
    run = dict(matched=False, search_problems=1, **SETTINGS)
    ch.measure(str(tiny_dir), PROBLEMS, [4], SEARCHES, **run)
    for path in tmp_path.glob("decode/*.jsonl"):  # greedy answers of other lengths on the problems SMC did not run
        lines = [json.loads(line) for line in path.read_text().splitlines()]
        for r in lines:
            if r["config"]["method"] == "greedy" and r["result"]["id"] != PROBLEMS[0].id:
                r["result"]["tokens"] = r["result"]["tokens"][:2]
                r["result"]["decoded_tokens"] = r["result"]["n_tokens"] = 2
        path.write_text("".join(json.dumps(r) + "\n" for r in lines))
    m = ch.measure(str(tiny_dir), PROBLEMS, [4], SEARCHES, **run)
    assert len(m.power_records[4]) == SETTINGS["n_seeds"] * len(PROBLEMS) and len(m.smc_records[4]) == 2
    assert m.greedy_tokens[4] == pytest.approx((8 + 2 + 2) / 3)  # every problem's greedy answer
    smc = sum(r["decoded_tokens"] for r in m.smc_records[4]) / 2
    assert cost_benefit_text.smc_values(m)["smc_multiplier"] == pytest.approx(smc / 8)  # only the problem SMC ran


def _point(method: str, flops: float, accuracy: float, depth: int = 4) -> ch.Point:
    scores = [1.0] * round(accuracy * 10) + [0.0] * (10 - round(accuracy * 10))
    return ch.Point("m", depth, 4, method, accuracy, scores, 1, flops, 0.0, 0.0, flops)


def test_pareto_front_keeps_only_points_better_than_every_cheaper_one():
    points = [_point("greedy", 1.0, 0.5), _point("T=1", 1.0, 0.3), _point("power", 3.0, 0.4),
              _point("majority-of-3", 3.0, 0.6), _point("best-of-3", 4.0, 0.6), _point("big", 9.0, 0.8)]
    front = ch.pareto_front(points)
    assert [p.method for p in front] == ["greedy", "majority-of-3", "big"]
    assert "No power-sampled point is on this front" in cost_benefit_text.front_sentence(points)
    assert "Power sampling is on this front" in cost_benefit_text.front_sentence([_point("power", 1.0, 0.9), *points])
    assert "Power sampling (SMC) is on this front" in cost_benefit_text.front_sentence([_point("SMC", 1.0, 0.9), *points])


def test_a_point_on_the_searches_subset_stays_off_the_front_and_is_compared_on_its_own_problems():
    """SMC on the first 4 of 10 problems scores 100% there, above every point on all 10: it is not set on their front;
    the sentence sets it beside full-depth greedy restricted to the same 4, and the figure marks it."""
    points = [_point("greedy", 1.0, 0.5), _point("greedy", 0.8, 0.2, depth=3), _point("power", 3.0, 0.6)]
    smc = ch.Point("m", 3, 4, "SMC", 1.0, [1.0] * 4, 1, 2.0, 0.0, 0.0, 2.0)
    assert ch.headline_set([*points, smc]) == (points, [smc])
    assert [p.method for p in ch.pareto_front([*points, smc])] == ["greedy", "greedy", "power"]
    sentence = cost_benefit_text.front_sentence([*points, smc])
    assert "among the methods run on all 10 problems" in sentence and "SMC ran on the first 4 problems only" in sentence
    assert "greedy at the full 4 blocks scored 100% [51–100]" in sentence  # greedy's first 4 scores are all 1
    from helpers.plots.cost import accuracy_at_compute
    from helpers.plots.style import method_colour

    fig = accuracy_at_compute([*points, smc], ch.pareto_front([*points, smc]))
    faded = {(float(line.get_xdata()[0]), float(line.get_ydata()[0]), line.get_color()) for line in fig.axes[0].lines
             if line.get_alpha() == 0.35 and len(line.get_xdata()) == 1 and line.get_marker() != "_"}  # not caps
    assert faded == {(2e-9, 100.0, method_colour("smc"))}  # SMC alone (2 FLOPs, in GFLOPs), faded, in its colour
    assert not fig.axes[0].texts  # no per-point labels to crowd the points
    assert any("first 4 of 10 problems" in t.get_text() for t in fig.axes[0].get_legend().get_texts())


def test_the_time_table_marks_a_row_on_the_searches_subset():
    smc = ch.Point("m", 3, 4, "SMC", 1.0, [1.0] * 4, 1, 2.0, 0.0, 0.0, 2.0)
    table = cost_benefit_text.time_table([_point("greedy", 1.0, 0.5), smc]).splitlines()
    assert table[0].startswith("| method | depth | problems |")
    assert table[2].startswith("| greedy | 4/4 | 10 |") and table[3].startswith("| SMC † | 3/4 | 4 |")
    assert table[-1].startswith("† On the first 4 problems of the 10")
    assert "†" not in cost_benefit_text.time_table([_point("greedy", 1.0, 0.5)])


def test_report_arithmetic_is_glued_with_both_counts():
    values = ch.report_arithmetic().glue_values()
    assert values["report_formula"] == pytest.approx(8.84, abs=0.005)
    assert values["report_exact"] == pytest.approx(13.5, abs=0.05)
    assert values["report_blocks"] == "192, 384, 576, 679"


def test_searches_on_a_subset_run_where_the_plan_says_and_chapter_05_reads_them(tiny_dir, tmp_path, monkeypatch):
    """With search_problems = 2 of 3: the headline (MH at the stitched depth, greedy at the full one) on every
    problem, MH at the full depth too, SMC on the first two of the chapters' order; chapter 05 decodes no search
    again, and its matched baselines stay on the subset."""
    from helpers.chapters.power_sampling import steps_sweep
    from helpers.evaluation.comparison import depth_plan, search_limits, search_order

    monkeypatch.setenv("SVD_RESULTS", str(tmp_path))
    order = search_order(PROBLEMS, 2)
    assert [p.level for p in order] == [1, 2, 3] and search_order(PROBLEMS, None) == PROBLEMS
    assert search_limits(2) == {"smc": 2} and search_limits(None) == {}  # MH on every problem, at every depth
    assert list(depth_plan(4, [2, 3, 4], 2).items()) == [  # deepest first, the full depth once
        (("stitch", 4), {"smc": 2}), (("stitch", 3), {"smc": 2}), (("stitch", 2), {"smc": 2})]
    assert depth_plan(4, None, None) == {("stitch", 4): {}, ("stitch", 3): {}}
    assert depth_plan(4, [], 2) == {("stitch", 4): {"smc": 2}}  # only the full depth: MH there on every problem
    rows = compare_methods([str(tiny_dir)], PROBLEMS, [3], SEARCHES, search_problems=2, **SETTINGS)
    full, cut = rows
    assert (full.depth, cut.depth) == (4, 3)
    assert (full.count("power"), full.count("smc"), full.count("greedy")) == (3, 2, 3)
    assert (cut.count("power"), cut.count("smc"), cut.count("low")) == (3, 2, 3)
    assert "[" in full.interval("power")
    subset = compare_methods([str(tiny_dir)], PROBLEMS, [3], SEARCHES, search_problems=2,
                             power_subsets={str(tiny_dir): 1}, **SETTINGS)  # a model's MH at full depth on 1 only
    assert [(r.count("power"), r.count("smc")) for r in subset] == [(1, 2), (3, 2)]

    def no_search(*args, **kwargs):
        raise AssertionError("chapter 05 re-ran a search instead of reading chapter 04's")

    monkeypatch.setattr(sampling, "chain_work", no_search)
    monkeypatch.setattr(sampling, "smc_work", no_search)
    m = ch.measure(str(tiny_dir), PROBLEMS, [3], SEARCHES, matched=True, search_problems=2, **SETTINGS)
    by = {(p.depth, p.method): p for p in m.points}
    assert by[(3, "power")].n_problems == 3 and by[(4, "power")].n_problems == 3
    assert all(p.n_problems == 2 for p in m.points if p.matched)
    assert ch.matched_comparisons(m)  # paired over the problems both ran
    monkeypatch.undo()
    monkeypatch.setenv("SVD_RESULTS", str(tmp_path))
    sweep = steps_sweep(str(tiny_dir), PROBLEMS, 3, SEARCHES, [0, 1], n_seeds=2, max_new_tokens=8, shots=0, seed=0,
                        batch_size=4, search_problems=2)
    assert sweep.steps == [0, 1] and sweep.n_problems == 2 and sweep.chapter_steps == 2
    assert set(sweep.scores) == {0, 1, 2}  # the chapter's own N is read for the other mode's comparison
    assert sweep.scores[2] == cut.scores["power"][:2]  # the chapter's records, not new ones
    assert sweep.other_mode == "reference" and len(sweep.other_scores) == 2
    values = power_sampling_text.sweep_glue(sweep)
    assert values["steps_top"] == 1 and values["steps_base"] == 0 and "reference mode" in values["steps_sentence"]


@pytest.mark.parametrize(("mean", "low", "high", "p", "word"), [
    (-0.07, -0.12, -0.02, 0.01, "points the same way"), (0.07, 0.02, 0.12, 0.01, "points the other way"),
    (-0.07, -0.2, 0.05, 0.3, "cannot say which way")])
def test_the_small_model_study_is_answered_by_the_paired_test(mean, low, high, p, word, monkeypatch):
    from types import SimpleNamespace

    from helpers.evaluation.stats import PairedDifference

    d = PairedDifference(mean, low, high, 40, 3, 6, p)
    monkeypatch.setattr(cost_benefit_text, "matched_comparisons", lambda m: [("power − best-of-6, both at 24", None),
                                                              ("power − majority-of-6, both at 24", d)])
    sentence = cost_benefit_text.majority_sentence(SimpleNamespace(model="m", n_layers=24, matched_k={24: 6}))
    assert word in sentence and "majority-of-6" in sentence and f"{100 * mean:+.1f} points" in sentence
    assert sentence.startswith("On m at its full depth")  # the model named: several models' rows share the table
    monkeypatch.setattr(cost_benefit_text, "matched_comparisons", lambda m: [])
    assert "no compute-matched majority vote" in cost_benefit_text.majority_sentence(SimpleNamespace(n_layers=24, matched_k={}))


def _priced(name: str, depth: int, multiplier: float):
    """A `Measured` of one of the report's models (their published configs), priced at `depth` with MH's tokens there
    `multiplier` times the full model's greedy tokens: what the sizes section reads. Against greedy at the same depth
    the multiplier is set to something else, which the sizes section must not read."""
    from helpers.evaluation.cost import qwen25_math_configs

    config = qwen25_math_configs()[name]
    L = config.num_hidden_layers
    return ch.Measured(name, L, SEARCHES.power, 160, [], {}, {depth: 90.0, L: 95.0}, {}, 300.0, 0.0, config,
                       multipliers={depth: multiplier / 2, L: multiplier + 0.5},
                       full_multipliers={depth: multiplier, L: multiplier + 0.5})


def test_each_size_is_priced_at_its_own_truncation_smaller_model_first():
    large, small = _priced("Qwen2.5-Math-7B", 26, 14.0), _priced("Qwen2.5-Math-1.5B", 27, 12.0)
    values = cost_benefit_text.size_cost_values([large, small])
    rows = [line for line in values["size_cost_table"].splitlines() if line.startswith("| Qwen")]
    assert [r.split(" | ")[0] for r in rows] == ["| Qwen2.5-Math-1.5B", "| Qwen2.5-Math-7B"]
    assert rows[0].split(" | ")[2:4] == ["27", "12.00"] and rows[1].split(" | ")[2:4] == ["26", "14.00"]
    seven = ch.size_cost(large)
    assert seven.depth == 26 and abs(seven.saved - 0.068) < 0.01  # the report's "roughly 7%" for 28 -> 26
    assert abs(seven.needed - (1 - 1 / 14)) < 1e-12 and seven.relation == "far more than"
    assert 0 < seven.per_block < seven.saved < 1 - seven.unembedding
    answer = values["cost_answer"]
    assert answer.startswith("On Qwen2.5-Math-1.5B at 27 of 28 blocks a power-sampled answer decoded 12.0 times")
    assert answer.endswith("at every size the search costs far more than the truncation saves.")
    assert "at no size do the blocks this build removed save what the search costs" in values["size_cost_sentence"]
    assert values["build_model"] == "Qwen2.5-Math-7B"  # the first model the notebook measured
    assert values["cost_lead"].startswith("At every size this build priced, the search costs far more than the "
                                          "truncation saves: a power-sampled answer at the cut decoded 12.0–14.0 times")
    assert f"saved {100 * ch.size_cost(small).saved:.0f}–{100 * seven.saved:.0f}% of the FLOPs" in values["cost_lead"]
    assert values["cost_short"] == "no"  # the front page's word: at no size do the blocks removed pay


def test_the_cut_priced_is_the_headlines_not_a_depth_below_it():
    """Chapter 04 may search one depth below the critical one too: the cut this chapter prices is the headline's, the
    truncated depth nearest the full one, not the shallowest decoded."""
    two = dataclasses.replace(_priced("Qwen2.5-Math-1.5B", 27, 12.0), greedy_tokens={26: 80.0, 27: 90.0, 28: 95.0},
                              full_multipliers={26: 30.0, 27: 12.0, 28: 12.5})
    assert ch.cut_depth(two) == 27 and ch.size_cost(two).depth == 27 and ch.size_cost(two).multiplier == 12.0
    assert ch.cut_depth(dataclasses.replace(two, greedy_tokens={28: 95.0})) == 28  # no truncation: the full depth


def test_the_net_cost_figure_draws_the_chains_measured_multiplier_beside_the_schedules():
    """The schedule's count at a mean length can fall below what the chains measured: the figure draws both, so no
    break-even shows that the measurement does not make."""
    from helpers.plots.cost import net_cost

    m = dataclasses.replace(_priced("Qwen2.5-Math-7B", 26, 12.0),
                            power_records={28: [{"id": "a", "decoded_tokens": 1000, "n_tokens": 100}]})
    settings = ch.net_cost_settings(m, SEARCHES.power)
    (report, build, measured) = settings.values()
    assert measured == {"multiplier": 10.0} and build["length"] == 100 and report["length"] == 679
    assert list(settings)[-1] == "this build, its chains measured"
    fig = net_cost(m.config, settings)
    lines = [line for line in fig.axes[0].get_lines() if line.get_label().startswith("this build, its chains")]
    assert len(lines) == 1 and lines[0].get_ydata()[-1] == pytest.approx(10.0)  # at full depth: the multiplier itself
    assert ch.net_multipliers(m, SEARCHES.power)["net_build_length"] == 100


def test_a_size_whose_truncation_pays_for_the_search_is_named():
    cheap = _priced("Qwen2.5-Math-7B", 20, 1.05)  # 8 of 28 blocks removed save far more than 5% of the tokens cost
    values = cost_benefit_text.size_cost_values([_priced("Qwen2.5-Math-1.5B", 27, 12.0), cheap])
    assert ch.size_cost(cheap).relation == "no more than"
    assert "on Qwen2.5-Math-7B the search costs no more than the truncation saves" in values["cost_answer"]
    assert "on Qwen2.5-Math-1.5B the search costs far more than" in values["cost_answer"]
    assert values["size_cost_sentence"].endswith("on Qwen2.5-Math-7B the blocks removed pay for the search.")
    assert values["cost_lead"] == values["cost_answer"]  # the sizes disagree: no range, each said
    assert values["cost_short"] == "only on Qwen2.5-Math-7B"


def test_one_size_states_the_front_pages_sentence_and_asks_for_a_second():
    values = cost_benefit_text.size_cost_values([_priced("Qwen2.5-Math-1.5B", 26, 9.04)])
    assert values["cost_answer"].startswith("At 26 blocks a power-sampled answer decoded 9.0 times the tokens of the "
                                            "full model's greedy answer to the same problem, while running 26 blocks "
                                            "saved ")
    assert values["cost_answer"].endswith("where breaking even would need 89%: the search costs far more than the "
                                          "truncation saves.")
    assert "prices one model" in values["size_cost_sentence"]


def test_an_exercise_never_sets_the_builds_own_n_against_itself():
    """The report's N = 10, unless the build ran N = 10 already: then another N, and the prose says "as the report"."""
    assert ch.exercise_steps(1) == 10 and ch.exercise_steps(10) == 4


def test_a_borderline_matched_difference_is_called_borderline_not_within_the_noise(monkeypatch):
    from types import SimpleNamespace

    from helpers.evaluation.stats import PairedDifference

    borderline = PairedDifference(0.125, 0.031, 0.25, 16, 4, 0, 0.12)  # the interval excludes 0, the test does not
    noise = PairedDifference(0.0, -0.1, 0.1, 16, 2, 2, 1.0)
    tests = {"power": [("power − best-of-4, both at 6", noise), ("power − majority-of-4, both at 6", borderline)],
             "SMC": []}
    monkeypatch.setattr(cost_benefit_text, "matched_comparisons", lambda m, method="power": tests[method])
    m = SimpleNamespace(model="small", matched_k={6: 4}, n_layers=6, points=[])
    sentence = cost_benefit_text.matched_sentence([m])
    assert "against majority-of-4 it is borderline" in sentence and "stay within the noise" not in sentence
    assert "the difference is borderline" in cost_benefit_text.majority_sentence(m)
    seen = (" (on 16 problems a depth, where a paired 95% interval spans about ±10 points)"  # the median half-width
            "; borderline (the interval and the paired test disagree): in MH's favour, against majority-of-4 on small "
            "at 6 blocks (+12.5 points [+3, +25])")
    assert cost_benefit_text.matched_summary([m]) == ("given its budget in best-of-k and majority-of-k samples, MH was "
                                                    "not told apart from them by more than the noise at 6 blocks" + seen)
    assert cost_benefit_text.matched_summary([m, SimpleNamespace(**{**vars(m), "model": "twin"})]).endswith(
        "was not told apart from them by more than the noise at any depth of small and twin" + seen
        + " and in MH's favour, against majority-of-4 on twin at 6 blocks (+12.5 points [+3, +25])")  # once for all
    clear = PairedDifference(0.3, 0.1, 0.5, 16, 6, 0, 0.01)
    tests["power"] = [("power − best-of-4, both at 6", clear), ("power − majority-of-4, both at 6", clear)]
    seen = " (on 16 problems a depth, where a paired 95% interval spans about ±20 points)"  # none borderline now
    assert cost_benefit_text.matched_summary([m]).endswith("MH beat both at 6 blocks" + seen)
    other = SimpleNamespace(model="large", matched_k={}, n_layers=8, points=[])  # ran no baseline: not named
    twin = SimpleNamespace(**{**vars(m), "model": "twin"})
    assert cost_benefit_text.matched_summary([m, twin]).endswith("MH beat both at 6 blocks on small; beat both at 6 "
                                                                 "blocks on twin" + seen)
    assert cost_benefit_text.matched_summary([m, other]).endswith("MH beat both at 6 blocks on small" + seen)
    assert cost_benefit_text.matched_sentence([m, other]).startswith("On small: MH power sampling against")
    assert "| small | power − best-of-4, both at 6 |" in cost_benefit_text.matched_table([m, other])
    tests["power"] = []
    assert cost_benefit_text.matched_summary([m]) == "no compute-matched baseline was run"
    tests["power"] = [("power − best-of-4, both at 6", noise), ("power − majority-of-4, both at 6", borderline)]

    def point(method, accuracy, matched, n=16):  # greedy scored 0.5 on the first 16, 0.4 on all 20
        return SimpleNamespace(method=method, depth=6, accuracy=accuracy, matched=matched, n_problems=n,
                               accuracy_on=lambda k: 0.5 if k == 16 else 0.4)

    m.points = [point("greedy", 0.4, False, 20), point("majority-of-4", 0.69, True), point("best-of-4", 0.3, True)]
    assert ("the most accurate of them, majority-of-4 at 6 blocks, scored 69%, above full-depth greedy's 50% on the "
            "same 16 problems") in cost_benefit_text.matched_sentence([m])  # never called weaker than greedy unmeasured


def test_a_depth_off_the_headline_is_searched_on_fewer_seeds_and_chapter_05_reads_them(tiny_dir, tmp_path,
                                                                                         monkeypatch):
    """`seeds_at` gives one depth k samples per problem: its row says so (pass@k up to k), the other depths keep
    n_seeds, the records are the first k of what n_seeds would draw, and chapter 05 prices them without a search."""
    from helpers.evaluation.comparison import depth_seeds
    from helpers.evaluation.critical import DepthChoice

    monkeypatch.setenv("SVD_RESULTS", str(tmp_path))
    rows = compare_methods([str(tiny_dir)], PROBLEMS, [3, 2], SEARCHES, seeds_at={2: 1}, **SETTINGS)
    by_depth = {r.depth: r for r in rows}
    assert [(d, by_depth[d].n_seeds, len(by_depth[d].pass_at_k["power"])) for d in (4, 3, 2)] == [
        (4, 2, 2), (3, 2, 2), (2, 1, 1)]
    assert all(len(per) == 1 for per in by_depth[2].ends["power"])
    every = compare_methods([str(tiny_dir)], PROBLEMS, [3, 2], SEARCHES, **SETTINGS)  # the second seed at 2 added
    assert [s for per in next(r for r in every if r.depth == 2).ends["power"] for s in per][::2] == [
        s for per in by_depth[2].ends["power"] for s in per]

    def no_search(*args, **kwargs):
        raise AssertionError("chapter 05 re-ran a search instead of reading chapter 04's")

    monkeypatch.setattr(sampling, "chain_work", no_search)
    monkeypatch.setattr(sampling, "smc_work", no_search)
    m = ch.measure(str(tiny_dir), PROBLEMS, [3, 2], SEARCHES, matched=False, seeds_at={2: 1}, **SETTINGS)
    assert {p.method for p in m.points if p.depth == 2} >= {"power", "greedy"}
    assert not any(p.method.startswith("best-of") for p in m.points if p.depth == 2)  # one sample: no best-of-2

    choice = DepthChoice("m", 4, (3, 2), critical=3, relative=True)
    assert depth_seeds(choice, {"critical-1": 1}, 2) == {("stitch", 2): 1}
    assert depth_seeds(choice, None, 2) == {}
    with pytest.raises(ValueError, match="not among the stitched depths"):
        depth_seeds(choice, {"critical+1": 1}, 2)  # the full depth runs on n_seeds: the headline's baseline
    with pytest.raises(ValueError, match="from 1 to n_seeds"):
        depth_seeds(choice, {2: 3}, 2)


def test_the_savings_table_prices_a_measured_model_at_its_own_context_as_the_sizes_section_does():
    """One quantity, one value: a model this build measured is priced at its own mean context in the savings table,
    so its per-block saving and unembedding share are the sizes section's; a model it did not measure at the
    context given for all."""
    from helpers.evaluation.cost import Shape, flops_share, model_cost, qwen25_math_configs

    configs = qwen25_math_configs()
    name, config = next(iter(configs.items()))
    mine = cost_benefit_text.savings_table(configs, 100.0, {"×10": 10.0}, {name: 3000.0})
    row = next(line for line in mine.splitlines() if line.startswith(f"| {name} |"))
    c, L = model_cost(config, None, 3000.0), Shape.of(config).layers
    assert f"| {100 * (1 - flops_share(config, L - 1, 3000.0)):.1f}% |" in row
    assert f"| {100 * c.flops_unembedding / c.flops_per_token:.0f}% |" in row
    other = next(line for line in mine.splitlines() if line.startswith("| ") and name not in line and "model" not in line)
    assert other in cost_benefit_text.savings_table(configs, 100.0, {"×10": 10.0})  # the others as before


def test_the_other_mode_of_a_reference_chain_with_the_published_block_count_is_a_valid_exact_chain():
    """The steps sweep runs the chapter's MH in the other mode too: a reference chain's published block count (the
    `full` profile's 16 blocks) is not exact mode's, which takes the blocks its length sets."""
    from helpers.chapters.power_sampling import other_mode_config
    from helpers.samplers.power import PowerConfig

    reference = PowerConfig(block_size=192, mcmc_steps=10, mode="reference", top_k=50, blocks=16)
    exact = other_mode_config(reference)
    assert exact == PowerConfig(block_size=192, mcmc_steps=10, mode="exact", top_k=0, blocks=0)
    assert other_mode_config(exact) == PowerConfig(block_size=192, mcmc_steps=10, mode="reference", top_k=0, blocks=0)


def test_chains_that_ran_a_block_the_count_cannot_see_are_found_from_their_acceptance_rate():
    from helpers.evaluation.cost import expected_decoded_tokens

    cfg = PowerConfig(block_size=192, mcmc_steps=10, mode="reference")

    def chain(length: int, acceptance: float, above: float) -> dict:
        count = expected_decoded_tokens(length, 192, 10, mode="reference")
        return {"n_tokens": length, "acceptance": acceptance, "decoded_tokens": count + above}

    # 0.35 is no multiple of 1/10: two blocks at least (3 and 4 of 10 accepted); 0.3 may be one block; the last
    # answer spans two blocks, which the count already gives it
    u = ch.unseen_blocks([chain(50, 0.35, 300), chain(60, 0.3, 100), chain(300, 0.25, 0)], cfg, 384)
    assert (u.chains, u.fits_one, u.ran_more) == (3, 2, 1) and u.share == pytest.approx(0.75)
    said = cost_benefit_text.unseen_sentence(u, cfg)
    assert "at least 1 of those ran a second" in said and "account for 75% of the chains' net excess" in said
    none = ch.unseen_blocks([chain(60, 0.3, -5)], cfg, 384)  # decoded less than its count: no share to give
    assert none.ran_more == 0 and none.share != none.share  # nan
    assert cost_benefit_text.unseen_sentence(none, cfg).startswith("None of the 1 chains")
    assert cost_benefit_text.unseen_sentence(u, dataclasses.replace(cfg, mode="exact")) == ""  # exact: no such stop
