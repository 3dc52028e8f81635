"""The front page states the build's answer in two sentences with its own numbers, and says which chapters it lacks."""

from __future__ import annotations

from helpers.runner.front import answer_markdown

BUILT = dict(profile="full", commit="abc1234", date="2026-11-26T03:00:00")


def test_the_answer_quotes_chapters_04_and_05():
    rows = [
        {"chapter": "04_power_sampling", "name": "answer", "value": "Not shown: power sampling stays below."},
        {"chapter": "04_power_sampling", "name": "headline", "value": "On m, power sampling scored 40% [30–50]."},
        {"chapter": "05_cost", "name": "cost_answer", "value": "At 23 blocks the search costs far more."},
    ]
    text = answer_markdown(rows, **BUILT)
    assert text.startswith("**Not shown: power sampling stays below.** On m, power sampling scored 40% [30–50]. "
                           "At 23 blocks the search costs far more.")
    assert "**full** profile at commit `abc1234` on 2026-11-26" in text


def test_a_build_of_two_sizes_states_the_second_size_and_the_gap():
    rows = [{"chapter": "04_power_sampling", "name": "answer", "value": "Not shown."},
            {"chapter": "04_power_sampling", "name": "headline", "value": "On small, 30% against 40%."},
            {"chapter": "04_power_sampling", "name": "size_headline", "value": "On large, 50% against 45%. Gap +15."}]
    assert answer_markdown(rows, **BUILT).startswith("**Not shown.** On small, 30% against 40%. On large, 50% "
                                                     "against 45%. Gap +15.")


def test_a_build_without_the_chapters_says_so_instead_of_inventing_an_answer():
    assert "did not run chapter 04" in answer_markdown([], **BUILT)
    only_04 = [{"chapter": "04_power_sampling", "name": "answer", "value": "Yes: it does."},
               {"chapter": "04_power_sampling", "name": "headline", "value": ""}]
    text = answer_markdown(only_04, **BUILT)
    assert text.startswith("**Yes: it does.** This build did not run chapter 05")


def test_the_banned_prose_list_catches_what_readers_saw():
    """The placeholders of the issue's reading (tests/book/banned_prose.txt, which the browser test applies to every
    page) are caught, and ordinary sentences are not."""
    import re
    from pathlib import Path

    listed = (Path(__file__).parents[1] / "book" / "banned_prose.txt").read_text(encoding="utf-8").splitlines()
    banned = [re.compile(line) for line in listed if line.strip() and not line.startswith("#")]

    def caught(text):
        return [m.group(0) for p in banned for m in p.finditer(text)]

    for text in ("layer none at 1.0 nat", "the ratio is undefined", "accuracy nan", "more accurate at 0 of 0",
                 "a perplexity of 538449449.8", "a KL of 0.0e+00", "at position 0 (median)", "depth None"):
        assert caught(text), text
    for text in ("none of the problems", "None of these papers tests it", "-1 if there is none",
                 "No truncated depth was tested.", "a perplexity of ≈ 5.4×10⁸",
                 "0 of 16 problems", "layer 0 at 1.0 nat"):
        assert not caught(text), text


def test_a_build_with_a_decomposition_leads_with_the_cost_then_its_answer_table_and_why():
    """What the search costs against what the cut saves comes first (chapter 05's short sentence where it has one):
    it is the result no token cap moves; then chapter 04's lead, table and why."""
    rows = [{"chapter": "04_power_sampling", "name": "answer", "value": "No: on this model ..."},
            {"chapter": "04_power_sampling", "name": "headline", "value": "On small, 30% against 40%."},
            {"chapter": "04_power_sampling", "name": "answer_lead", "value": "**No, at both sizes:** it does not."},
            {"chapter": "04_power_sampling", "name": "answer_table", "value": "| model |\n|---|\n| small |"},
            {"chapter": "04_power_sampling", "name": "answer_why", "value": "The cut costs 20 points."},
            {"chapter": "05_cost", "name": "cost_answer", "value": "On small the search costs more; on big too."}]
    text = answer_markdown(rows, **BUILT)
    assert text.startswith("**What it costs.** On small the search costs more; on big too.\n\n**No, at both sizes:** "
                           "it does not.\n\n| model |\n|---|\n| small |\n\n**Why.** The cut costs 20 points.\n\n")
    assert "On small, 30% against 40%." not in text  # the first model's headline alone would lead with one size
    short = [*rows, {"chapter": "05_cost", "name": "cost_lead", "value": "At every size the search costs more."}]
    assert answer_markdown(short, **BUILT).startswith("**What it costs.** At every size the search costs more.\n\n")
    halves = [*short, {"chapter": "05_cost", "name": "cost_short", "value": "no"},
              {"chapter": "04_power_sampling", "name": "answer_short", "value": "not settled (no on a; too close on b)"}]
    assert answer_markdown(halves, **BUILT).startswith(
        "**In short: in compute, no; in accuracy, not settled (no on a; too close on b).** (Compute: ")
    assert "**What it costs.** At every size" in answer_markdown(halves, **BUILT)  # the halves, then their numbers
    assert not answer_markdown(halves[:-1], **BUILT).startswith("**In short")  # one half alone is no short answer
    alone = answer_markdown(rows[:5], **BUILT)  # no chapter 05: the answer first, and the missing chapter named
    assert alone.startswith("**No, at both sizes:**") and "This build did not run chapter 05" in alone


def test_the_premise_is_stated_on_the_front_only_where_a_base_model_ran():
    rows = [{"chapter": "04_power_sampling", "name": "answer", "value": "No."},
            {"chapter": "04_power_sampling", "name": "answer_lead", "value": "**No:** it does not."},
            {"chapter": "04_power_sampling", "name": "answer_table", "value": "| model |"},
            {"chapter": "04_power_sampling", "name": "answer_why", "value": "The cut costs 20 points."},
            {"chapter": "04_power_sampling", "name": "premise_sentence", "value": "The base model, b, is sharp: 40%."},
            {"chapter": "04_power_sampling", "name": "premise_summary", "value": "b is sharp."},
            {"chapter": "04_power_sampling", "name": "premise_base_models", "value": 1}]
    text = answer_markdown(rows, **BUILT)
    assert "**Why.** The cut costs 20 points.\n\n**The premise.** b is sharp.\n\n" in text  # the short form
    assert "40%" not in text
    rows[-1]["value"] = 0
    assert "**The premise.**" not in answer_markdown(rows, **BUILT)


def test_the_front_says_where_the_test_can_look_after_why():
    rows = [{"chapter": "04_power_sampling", "name": "answer", "value": "No."},
            {"chapter": "04_power_sampling", "name": "answer_lead", "value": "**No:** it does not."},
            {"chapter": "04_power_sampling", "name": "answer_table", "value": "| model |"},
            {"chapter": "04_power_sampling", "name": "answer_why", "value": "The cut costs 20 points."},
            {"chapter": "04_power_sampling", "name": "answer_limit", "value": "Every model lost 1 block."}]
    assert "**Why.** The cut costs 20 points.\n\n**Where the test can look.** Every model lost 1 block.\n\n" in \
        answer_markdown(rows, **BUILT)
    rows[-1]["value"] = ""  # a build without a cut says nothing of it
    assert "**Where the test can look.**" not in answer_markdown(rows, **BUILT)
