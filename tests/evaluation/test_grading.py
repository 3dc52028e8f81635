"""Answer extraction and equivalence."""

from __future__ import annotations

import pytest

from helpers.evaluation.grading import extract_answer, grade, is_equivalent, last_boxed, last_number

EQUIVALENT = [
    ("42", "42"),
    ("1,234", "1234"),
    ("-7", "-7"),
    ("$42$", "42"),
    ("\\text{42}", "42"),
    ("\\frac{1}{2}", "0.5"),
    ("\\frac12", "\\frac{1}{2}"),
    ("\\dfrac{3}{4}", "3/4"),
    ("2\\sqrt{2}", "\\sqrt{8}"),
    ("(1, 2)", "(1,2)"),
    ("[0, 1)", "[0,1)"),
    ("x^2+2x+1", "(x+1)^2"),
    ("10\\%", "10"),
    ("5 \\text{ cm}", "5"),
    ("\\pi", "\\pi"),
]

NOT_EQUIVALENT = [
    ("41", "42"),
    ("-7", "7"),
    ("1,234", "1235"),
    ("\\frac{1}{3}", "0.5"),
    ("(1, 2)", "(2, 1)"),
    ("[0, 1)", "[0, 1]"),
    ("x+1", "x+2"),
    ("", "3"),
    (None, "3"),
]


@pytest.mark.parametrize(("predicted", "gold"), EQUIVALENT)
def test_equivalent(predicted, gold):
    assert is_equivalent(predicted, gold)


@pytest.mark.parametrize(("predicted", "gold"), NOT_EQUIVALENT)
def test_not_equivalent(predicted, gold):
    assert not is_equivalent(predicted, gold)


def test_last_boxed_with_nested_braces():
    assert last_boxed("first \\boxed{1} then \\boxed{\\frac{1}{2}} done") == "\\frac{1}{2}"
    assert last_boxed("\\fbox{7} and \\boxed{8}") == "8"
    assert last_boxed("\\boxed{8} and \\fbox{7}") == "7"
    assert last_boxed("no box here") is None
    assert last_boxed("\\boxed{unclosed {") is None


def test_fallback_to_last_number():
    assert last_number("so 3 + 4 = 7, and then 1,200 apples") == "1200"
    assert last_number("-12 is the answer") == "-12"
    assert extract_answer("The answer is 12.") == "12"
    assert extract_answer("\\boxed{5} but later 7") == "5"
    assert extract_answer("nothing") is None


@pytest.mark.parametrize("text", ["\\boxed{", "\\boxed{}}}", "}{", "\\boxed{\\frac{", "$$$", "\x00\x01", "\\boxed{1/0}",
                                  "\\boxed{\\sqrt{-}}", 12345, None])
def test_malformed_text_never_raises(text):
    assert grade(text, "3") in (True, False)


def test_grading_writes_nothing_to_stderr(capfd):
    import threading

    assert is_equivalent("\\frac{1}{2}", "0.5")
    worker = threading.Thread(target=lambda: is_equivalent("noqa noqa 3/4", "0.75"))  # no signal timeout here
    worker.start()
    worker.join()
    assert capfd.readouterr().err == ""
