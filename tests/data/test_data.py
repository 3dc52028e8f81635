"""Problem sets and prompts."""

from __future__ import annotations

import json
import re

import pytest

from helpers.chapters.common_text import levels_text, sets_text
from helpers.data.arithmetic import LEVELS, arithmetic_problem, arithmetic_problems, worked_examples
from helpers.data.model_sets import check_model_levels, on_own_problems, problem_sets
from helpers.data.problems import DataError, problems_of
from helpers.data.prompts import PROMPT_PREFIX, build_prompt, prompt_text
from helpers.data.sources import load_hub, load_local, load_problems


def test_deterministic_and_independent_of_count():
    a = arithmetic_problems(3, seed=7)
    assert a == arithmetic_problems(3, seed=7)
    assert a != arithmetic_problems(3, seed=8)
    assert arithmetic_problems(5, levels=[2], seed=7)[:3] == [p for p in a if p.level == 2]


def test_at_least_five_levels_with_growing_steps():
    assert len(LEVELS) >= 5
    steps = [LEVELS[level].n_ops for level in sorted(LEVELS)]
    assert steps == sorted(steps) and steps[-1] > steps[0]


@pytest.mark.parametrize("level", sorted(LEVELS))
def test_worked_solution_is_correct_arithmetic(level):
    for i in range(30):
        p = arithmetic_problem(level, i)
        lines = p.solution.splitlines()
        value = int(re.search(r"starts with (\d+)", lines[0]).group(1))
        for line in lines[1:-1]:
            a, op, b, c = re.search(r"(\d+) ([-+*/]) (\d+) = (\d+)", line).groups()
            assert int(a) == value
            value = {"+": int(a) + int(b), "-": int(a) - int(b), "*": int(a) * int(b), "/": int(a) // int(b)}[op]
            assert op != "/" or int(a) % int(b) == 0
            assert value == int(c) and value >= 0
        assert lines[-1] == f"The final answer is \\boxed{{{value}}}." and p.answer == str(value)
        assert len(lines) - 2 == LEVELS[level].n_ops


def test_bad_arguments():
    with pytest.raises(DataError, match="levels"):
        arithmetic_problem(99, 0)
    with pytest.raises(DataError):
        arithmetic_problems(0)
    with pytest.raises(DataError, match="Unknown problem set"):
        load_problems("nonsense")


def test_worked_examples_are_not_benchmark_problems():
    questions = {p.question for p in arithmetic_problems(50)}
    assert all(ex.question not in questions for ex in worked_examples(4))


def test_local_jsonl_and_json_with_field_mapping(tmp_path):
    rows = [{"problem": "What is 2+2?", "solution_value": "4", "level": 1},
            {"problem": "What is 3*3?", "solution_value": "9", "level": 2}]
    jsonl = tmp_path / "set.jsonl"
    jsonl.write_text("\n".join(json.dumps(r) for r in rows))
    js = tmp_path / "set.json"
    js.write_text(json.dumps(rows))
    for path in (jsonl, js):
        problems = load_local(path, fields={"question": "problem", "answer": "solution_value"})
        assert [p.answer for p in problems] == ["4", "9"] and problems[1].level == 2
    assert len(load_problems(str(jsonl), n=1, fields={"question": "problem", "answer": "solution_value"})) == 1
    with pytest.raises(DataError, match="no field 'question'"):
        load_local(jsonl)


def test_gsm8k_style_answers_are_split(tmp_path):
    path = tmp_path / "gsm8k.jsonl"
    path.write_text(json.dumps({"question": "q", "answer": "3 + 4 = 7\n#### 1,007"}))
    (p,) = load_local(path, source="gsm8k")
    assert p.answer == "1007" and p.solution == "3 + 4 = 7"


def test_malformed_file_is_a_clear_error(tmp_path):
    path = tmp_path / "bad.jsonl"
    path.write_text("{not json")
    with pytest.raises(DataError, match="JSON"):
        load_local(path)
    with pytest.raises(DataError, match="No such"):
        load_local(tmp_path / "missing.jsonl")


def test_hub_sets_offline_give_a_clear_error():
    with pytest.raises(DataError) as err:
        load_hub("math500")
    assert "local JSON/JSONL" in str(err.value)


def test_prompt_through_chat_template_and_raw(tiny):
    tokenizer = tiny.tokenizer
    question = "Ada has 3 apples ."
    if tokenizer.chat_template:
        text = tokenizer.decode(build_prompt(tokenizer, question))
        assert "user" in text.split() and text.rstrip().endswith("assistant")
        assert tokenizer.decode(build_prompt(tokenizer, question, shots=2)).split().count("assistant") == 3
    else:
        with pytest.raises(DataError, match="no chat template"):
            build_prompt(tokenizer, question, chat=True)
    raw = tokenizer.decode(build_prompt(tokenizer, question, chat=False))
    assert "Can you solve the following math problem" in raw and "assistant" not in raw.split()
    with_shots = tokenizer.decode(build_prompt(tokenizer, question, chat=False, shots=2))
    assert with_shots.count("Can you solve") == 3
    with pytest.raises(DataError):
        build_prompt(tokenizer, "   ")
    with pytest.raises(DataError):
        build_prompt(tokenizer, question, shots=-1)


def test_reference_prompt_text():
    text = prompt_text("What is 1+1?")
    assert text.startswith(PROMPT_PREFIX) and text.endswith("put your final answer within \\boxed{}.")


def test_each_model_gets_its_own_levels_and_models_on_the_same_levels_get_the_same_problems():
    sets = problem_sets(["a", "b", "base"], "arithmetic", n=2, levels=[5, 6], model_levels={"base": [1, 3]})
    assert sets["a"] is sets["b"] and [p.level for p in sets["a"]] == [5, 5, 6, 6]
    assert [p.level for p in sets["base"]] == [1, 1, 3, 3]
    assert problems_of(sets, "base") == sets["base"] and problems_of(sets["a"], "anything") == sets["a"]
    assert levels_text(p.level for p in sets["a"]) == "levels 5–6"
    assert levels_text(p.level for p in sets["base"]) == "levels 1 and 3"
    assert levels_text(p.level for p in sets["base"][:1]) == "level 1" and levels_text([None]) == "problems without levels"
    assert sets_text(sets) == "a: 4 problems (levels 5–6); b: 4 problems (levels 5–6); base: 4 problems (levels 1 and 3)"
    assert sets_text({"a": sets["a"], "b": sets["b"]}) == "4 problems (levels 5–6); models: a, b"
    with pytest.raises(DataError, match="not among the models"):
        problem_sets(["a"], "arithmetic", n=2, levels=[5, 6], model_levels={"bsae": [1]})
    with pytest.raises(DataError, match="no problems were given for 'c'"):
        problems_of(sets, "c")
    with pytest.raises(DataError, match=r"levels \[9\] do not exist"):
        problem_sets(["a"], "arithmetic", n=2, levels=[5, 6], model_levels={"a": [9]})


@pytest.mark.parametrize("value, message", [
    ([1, 2], "must map model names"), ({"a": []}, "non-empty list"), ({"a": [0]}, "non-empty list"),
    ({"a": [True]}, "non-empty list"), ({"a": "1"}, "non-empty list"), ({3: [1]}, "is not a model name"),
    ({"b": [1]}, "not among the models"),
])
def test_model_levels_are_refused_by_one_rule_that_says_what_to_write(value, message):
    with pytest.raises(DataError, match=message):
        check_model_levels(value, ["a"])


def test_model_levels_become_tuples_and_none_means_none():
    assert check_model_levels({"a": [1, 3]}, ["a", "b"]) == {"a": (1, 3)}
    assert check_model_levels(None) == {}


def test_a_model_runs_its_own_problems_when_most_models_share_others():
    shared, own = ["1", "2"], ["9"]
    assert on_own_problems({"base": own, "small": shared, "large": shared}) == {
        "base": True, "small": False, "large": False}  # the majority's set, wherever the base model stands
    assert on_own_problems({"a": shared, "b": own}) == {"a": False, "b": True}  # a tie: the first model's set
    assert on_own_problems({"a": shared, "b": list(shared)}) == {"a": False, "b": False}
    assert on_own_problems({}) == {}
