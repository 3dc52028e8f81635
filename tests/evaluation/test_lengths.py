"""Answer lengths read from long decodes: outcomes under shorter caps, loops, and the stop at the first \\boxed{}."""

import pytest

from helpers.evaluation.lengths import (
    box_stop,
    first_box_end,
    looping,
    repeated_share,
    shares,
    smallest_cap,
    three_way,
    tokens_to_box,
)


def rec(n_tokens, stopped, correct, tokens=None, predicted=None):
    return {"n_tokens": n_tokens, "stopped": stopped, "correct": correct,
            "tokens": tokens if tokens is not None else list(range(n_tokens)), "predicted": predicted}


def chars(tokens):
    """A toy tokenizer: each token id is one character."""
    return "".join(chr(t) for t in tokens)


def ids(text):
    return [ord(c) for c in text]


def test_an_answer_that_ended_counts_as_finished_under_every_cap_it_fits_and_unfinished_below():
    r = rec(300, True, True)
    assert three_way(r, 1024) == three_way(r, 300) == "right"
    assert three_way(r, 299) == "unfinished"
    assert three_way(rec(50, True, False), 160) == "finished wrong"
    assert three_way(rec(1024, False, True), 1024) == "unfinished"  # a cut-off answer is unfinished, right or not


def test_shares_sum_to_one_and_finished_accuracy_reads_the_finished_only():
    records = [rec(100, True, True), rec(200, True, False), rec(400, True, True), rec(1024, False, False)]
    s = shares(records, 256)
    assert (s.right, s.wrong, s.unfinished) == (0.25, 0.25, 0.5)
    assert s.finished_accuracy == 0.5
    assert shares(records, 1024).right == 0.5


def test_a_decode_cut_off_short_cannot_speak_for_a_longer_cap():
    with pytest.raises(ValueError, match="max_new_tokens of at least 512"):
        shares([rec(160, False, False)], 512)
    with pytest.raises(ValueError, match="cut off at 160"):  # one short decode among long ones is enough to refuse
        shares([rec(1024, False, False), rec(160, False, False)], 512)
    with pytest.raises(ValueError, match="a cap is a number"):
        shares([rec(10, True, True)], 0)


def test_the_smallest_cap_is_the_first_candidate_that_holds_the_share():
    records = [rec(n, True, True) for n in (100, 200, 300, 380)] + [rec(1024, False, False)]
    assert smallest_cap(records, 0.8, [160, 256, 384, 512]) == 384
    assert smallest_cap(records, 0.95, [160, 256, 384, 512]) is None


def test_a_loop_repeats_and_reasoning_does_not():
    assert repeated_share(list(range(10)) + [1, 2, 3] * 100, n=4, tail=64) == 1.0
    assert repeated_share(list(range(500)), n=4, tail=64) == 0.0
    assert repeated_share([1, 2], n=4, tail=64) == 0.0
    with pytest.raises(ValueError):
        repeated_share([1, 2, 3], n=4, tail=2)


def test_a_loop_is_an_unfinished_answer_that_repeats_itself():
    loop, writing = [1, 2, 3, 4] * 100, list(range(400))
    per_problem = [[rec(400, False, False, loop), rec(400, False, False, writing)],
                   [rec(400, True, False, loop)]]  # repeats, but ended by itself: not a loop
    assert looping(per_problem) == [[True, False], [False]]
    assert looping([]) == []


def test_the_first_closed_box_is_found_with_nested_braces():
    assert first_box_end("so \\boxed{\\frac{1}{2}} and \\boxed{3}") == len("so \\boxed{\\frac{1}{2}}")
    assert first_box_end("\\boxed{12") is None
    assert first_box_end("no box") is None
    text = "x = \\boxed{7} then more"
    assert tokens_to_box(ids(text), chars) == len("x = \\boxed{7}")
    assert tokens_to_box(ids("none"), chars) is None


def test_a_stop_at_the_first_box_counts_changed_answers_and_saved_tokens():
    same = "\\boxed{5} and so \\boxed{5}"
    other = "\\boxed{4} wait \\boxed{5}"
    plain = "\\boxed{5}"
    records = [rec(len(t), True, True, tokens=ids(t), predicted="5") for t in (same, other, plain)]
    stop = box_stop(records, ["5", "5", "5"], chars)
    assert stop.stopped_early == 2 and stop.changed == 1 and stop.changed_grade == 1
    assert stop.saved == (len(same) - len("\\boxed{5}")) + (len(other) - len("\\boxed{4}"))
    with pytest.raises(ValueError, match="gold"):
        box_stop(records, ["5"], chars)


def test_the_cap_is_where_the_answers_end_and_a_loop_is_not_waited_for():
    from helpers.evaluation.lengths import choose_cap

    ends = [rec(n, True, True) for n in (100, 150, 200, 300, 350) * 19] + [rec(500, True, True)] * 5
    assert choose_cap(ends, [160, 256, 384, 512, 1024]) == 384  # 95 of 100 end within 384
    loops = [rec(n, True, True) for n in (100, 200) * 47] + [rec(1024, False, False)] * 6  # 94% ever end
    assert choose_cap(loops, [160, 256, 384, 512, 1024]) == 256  # within a point of all that ever end
    never = [rec(1024, False, False)] * 99 + [rec(100, True, True)]
    assert choose_cap(never, [160, 256, 1024]) == 1024  # almost nothing ends: the longest, not the shortest


def test_a_summary_counts_loops_among_the_answers_unfinished_at_the_longest_cap():
    from helpers.evaluation.lengths import summarize

    loop = rec(1024, False, False, tokens=[7, 8, 9, 10] * 256)
    still = rec(1024, False, False, tokens=list(range(1024)))
    s = summarize([rec(100, True, True), rec(300, True, False), loop, still], [160, 1024])
    assert (s.n, s.unfinished, s.looping) == (4, 2, 1)
    assert s.shares[160].unfinished == 0.75 and s.shares[1024].unfinished == 0.5
    assert s.median == (300 + 1024) / 2
