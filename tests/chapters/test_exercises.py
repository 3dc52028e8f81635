"""The exercises: the checks students run catch wrong answers, the build's solution numbers are what the
exercises claim, and every chapter has exercises with solutions whose numbers are glued, not typed."""

from __future__ import annotations

import json
import re

import numpy as np
import pytest

from helpers.chapters.exercises import check_depth_rule, check_kept_blocks, kept_last_two, kl_below
from helpers.runner.profiles import NOTEBOOKS, toc_chapters


def test_the_depth_rule_check_passes_the_reference_and_names_the_curve_a_wrong_rule_fails():
    assert check_depth_rule(kl_below).startswith("passed")

    def with_last_layer(kl, nats):  # forgets that the last layer's KL is zero by construction
        below = np.nonzero(np.asarray(kl) < nats)[0]
        return int(below[0]) if len(below) else -1

    with pytest.raises(AssertionError, match="expected -1"):
        check_depth_rule(with_last_layer)
    with pytest.raises(AssertionError, match="integer layer"):
        check_depth_rule(lambda kl, nats: float(kl_below(kl, nats)))


def test_the_kept_blocks_check_passes_the_reference_and_catches_stitch_and_preserve():
    from helpers.models.truncation import kept_blocks

    assert check_kept_blocks(kept_last_two).startswith("passed")
    with pytest.raises(AssertionError, match="expected"):
        check_kept_blocks(lambda n, d: kept_blocks(n, d, "stitch"))  # preserves one block, not two
    with pytest.raises(AssertionError, match="blocks kept"):
        check_kept_blocks(lambda n, d: kept_last_two(n, d)[:-1])
    assert kept_last_two(10, 10) == list(range(10))  # full depth keeps every block
    with pytest.raises(ValueError, match=r"2\.\.10"):
        kept_last_two(10, 1)


def _forever(*args):
    while True:
        pass


def _endless(n, d):
    i = 0
    while True:
        yield i
        i += 1


@pytest.mark.parametrize(("student", "fragment"), [
    (lambda kl, nats: None, "returned None"),
    (lambda kl, nats: "2", "must return an integer layer, got '2'"),
    (lambda kl, nats: 1 / 0, "raised ZeroDivisionError"),
    (_forever, "did not finish within 0.5 seconds"),
    (lambda kl, nats: 10**5000, "returned an integer of about 5,001 digits, outside -1"),
    (lambda kl, nats: len(kl), "outside -1"),
])
def test_a_students_rule_that_fails_in_its_own_way_gets_a_sentence(student, fragment):
    from helpers.chapters.exercises import StudentCodeError

    with pytest.raises(StudentCodeError, match=fragment):
        check_depth_rule(student, time_limit_s=0.5)


@pytest.mark.parametrize(("student", "fragment"), [
    (lambda n, d: None, "returned None"),
    (lambda n, d: [0, "1"][:d], "must return block indices"),
    (lambda n, d: 7, "must return a list of block indices, got int"),
    (_endless, "blocks kept"),  # an endless generator is cut, then measured
    (_forever, "did not finish within 0.5 seconds"),
])
def test_a_students_kept_blocks_that_fail_in_their_own_way_get_a_sentence(student, fragment):
    from helpers.chapters.exercises import StudentCodeError

    with pytest.raises(AssertionError, match=fragment) as caught:
        check_kept_blocks(student, time_limit_s=0.5)
    assert isinstance(caught.value, StudentCodeError) or fragment == "blocks kept"


def test_the_absolute_rule_ignores_the_last_layer():
    assert kl_below([5.0, 3.0, 0.5, 0.0], 1.0) == 2
    assert kl_below([5.0, 3.0, 2.0, 0.0], 1.0) == -1  # only the last layer is below: none


@pytest.mark.toy
def test_at_alpha_one_reference_mh_accepts_everything_yet_only_exact_mh_samples_p(monkeypatch):
    """The α = 1 exercise's claim, on the toy model: the reference ratio is 1 and every move is accepted, but its
    length handling keeps it far from p; the exact mode rejects some moves (the cut point's length correction)
    and lands within the noise floor of p. The chains are stored: a second build reads them back."""
    import helpers.samplers.toy_curves as curves
    from helpers.chapters.power_sampling import toy_alpha_one

    v = toy_alpha_one(steps=4, n_chains=1500)
    assert v["ex_one_acceptance_reference"] == 1.0
    assert 0.5 < v["ex_one_acceptance_exact"] < 1.0
    assert v["ex_one_tv_exact"] < 2 * v["ex_one_noise"]
    assert v["ex_one_tv_reference"] > 4 * v["ex_one_noise"]
    assert v["ex_one_standing_exact"].startswith("within noise")  # the solution's words follow the distances
    assert v["ex_one_standing_reference"].endswith("not noise")

    def refuse(*args, **kwargs):
        raise AssertionError("the stored chains were run again")

    monkeypatch.setattr(curves, "run_chains", refuse)
    assert toy_alpha_one(steps=4, n_chains=1500) == v


def test_the_bfloat16_spacing_near_a_logit_of_20_is_torchs():
    import torch

    from helpers.chapters.precision import DtypeComparison
    from helpers.chapters.precision_text import exercise_values
    from helpers.models.precision import FORMATS

    sweep = {d: {4: 1.0, 3: 0.5, 2: 0.0} for d in FORMATS}
    c = DtypeComparison("m", 4, {}, {}, {}, sweep, 2, 0.5)
    v = exercise_values(c, "smoke")
    x = torch.tensor(v["ex_logit"], dtype=torch.bfloat16)
    assert v["ex_logit_spacing"] == float(torch.nextafter(x, x + 100) - x) and v["ex_bits"] == 8
    assert v["ex_rule"] == "stricter" and v["ex_critical_float32"] == 4  # critical at 3; 0.5 there is below 0.8
    # the re-run command names the profile that built the page, not a fixed one
    assert v["rerun_command"] == "`python -m helpers run --profile smoke --only 06_precision -p collapse_fraction=0.8 --recompute`"
    full = DtypeComparison("m", 4, {}, {}, {}, {d: {4: 1.0, 3: 0.4} for d in FORMATS}, 2, 0.5)  # critical: the full 4
    v = exercise_values(full, "smoke")  # a stricter rule cannot move it: the exercise asks about a looser one
    assert v["ex_rule"] == "looser" and v["ex_collapse"] == 0.25 and v["ex_critical_float32"] == 3


def _exercises(stem: str) -> tuple[list[tuple[str, str, str]], dict[str, str]]:
    """[(label, title, body)] of a notebook's exercises and {label: solution body}."""
    text = "\n".join("".join(c["source"]) for c in json.loads((NOTEBOOKS / f"{stem}.ipynb").read_text())["cells"]
                     if c["cell_type"] == "markdown")
    exercises = re.findall(r"````\{exercise\} (.+?)\n:label: (\S+)\n(.*?)\n````\n\n````\{solution\}", text,
                           flags=re.S)
    solutions = dict(re.findall(r"````\{solution\} (\S+)\n:class: dropdown\n(.*?)\n````", text, flags=re.S))
    return [(label, title, body) for title, label, body in exercises], solutions


def test_every_chapter_has_three_exercises_each_with_a_solution_and_a_unique_label():
    labels = []
    for stem in toc_chapters():
        exercises, solutions = _exercises(stem)
        assert len(exercises) >= 3, stem
        assert {label for label, _, _ in exercises} == set(solutions), stem
        assert all(label.startswith(f"ex-{stem[:2]}-") for label, _, _ in exercises), stem
        labels += [label for label, _, _ in exercises]
    assert len(labels) == len(set(labels))
    kinds = {title.split(":")[0] for stem in toc_chapters() for _, title, _ in _exercises(stem)[0]}
    assert {"Re-run", "Derive", "Extend"} <= kinds


def test_re_run_solutions_quote_glued_numbers_only():
    """A re-run solution states what the build's run showed: every number in it comes from a glue role (maths
    and code aside), none is typed in."""
    for stem in toc_chapters():
        exercises, solutions = _exercises(stem)
        for label, title, _ in exercises:
            if not title.startswith("Re-run"):
                continue
            text = solutions[label]
            assert "{glue:" in text, label
            bare = re.sub(r"\{glue:\w+\}`[^`]+`|\$[^$]+\$|`[^`]+`|\{(doc|ref)\}`[^`]+`|b?float(16|32)", "", text)
            assert not re.search(r"\d", bare), f"{label}: a number typed into its solution: {bare!r}"
