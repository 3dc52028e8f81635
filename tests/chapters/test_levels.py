"""The levels a model runs, chosen by measurement: the scan's arithmetic, its sentence, and the scan end to end."""

from __future__ import annotations

import pytest

from helpers.chapters.power_sampling import level_scans
from helpers.chapters.power_sampling_text import level_values
from helpers.data.arithmetic import arithmetic_problems
from helpers.evaluation.levels import LevelScan, level_scan


def _records(correct: list[bool]) -> list[list[dict]]:
    return [[{"correct": c}] for c in correct]


def test_a_scan_takes_accuracy_per_level_and_finds_the_levels_with_room_both_ways():
    problems = arithmetic_problems(4, [1, 2, 3])  # 4 per level, in level order
    scan = level_scan("base", problems, _records([1, 1, 1, 0, 0, 0, 0, 0, 1, 1, 0, 0]), [1, 3])
    assert scan.accuracy == {1: 0.75, 2: 0.0, 3: 0.5} and scan.n == {1: 4, 2: 4, 3: 4}
    assert scan.with_room() == [3] and not scan.agrees()  # 75% leaves no room above it
    assert LevelScan("m", {1: 0.2, 2: 0.6, 3: 0.61}, {1: 1, 2: 1, 3: 1}, (1, 2)).agrees()  # the range is closed
    with pytest.raises(ValueError, match="one greedy record per problem"):
        level_scan("base", problems, _records([True]), [1])


def test_the_sentence_says_what_the_scan_found_at_the_shared_levels_and_whether_the_choice_is_the_measured_one():
    scan = LevelScan("base", {1: 0.5, 2: 0.3, 5: 0.0, 6: 0.05}, {1: 20, 2: 20, 5: 20, 6: 20}, (1, 2))
    values = level_values([scan], [5, 6])
    assert values["levels_sentence"] == (
        "At full depth, base's greedy decoding solves 0% and 5% of the other models' levels 5 and 6 (20 problems per "
        "level), so the other models' levels leave it no room. The levels where it leaves room both ways (20–60% "
        "solved) are 1 and 2, so the levels it runs are the measured ones.")
    table = values["levels_table"].splitlines()
    assert table[0] == "| model | kind | level 1 | level 2 | level 5 | level 6 | levels run |"
    assert table[2].startswith("| base | base or tuned: not known from its name | 50% [") and table[2].endswith("| 1 and 2 |")
    other = level_values([LevelScan("base", {1: 0.9, 5: 0.3}, {1: 20, 5: 20}, (1,))], [5])["levels_sentence"]
    assert "some of the other models' levels would leave it room too" in other
    assert "while it runs level 1, as the profile chose them: this scan does not support that choice" in other
    some = LevelScan("base", {1: 0.5, 2: 0.3, 3: 0.3, 5: 0.0}, {1: 20, 2: 20, 3: 20, 5: 20}, (1, 3))
    assert some.within() and not some.agrees()
    assert level_values([some], [5])["levels_sentence"].endswith(
        "are 1, 2 and 3, and it runs levels 1 and 3, each among them (level 2 would leave room too).")
    assert level_values([], [5, 6]) == {"levels_table": "", "levels_sentence": "Every model runs the same problems, "
                                                                               "from levels 5 and 6."}


def test_the_scan_runs_every_level_at_full_depth_only_for_the_models_with_levels_of_their_own(tiny_dir, tmp_path,
                                                                                            monkeypatch):
    import json

    from tests.chapters.test_cost_benefit import SEARCHES

    monkeypatch.setenv("SVD_RESULTS", str(tmp_path))
    problems = tmp_path / "levels.jsonl"  # short questions: the tiny gemma3's local window is 64 positions
    problems.write_text("".join(json.dumps({"question": q, "answer": a, "level": lv}) + "\n" for q, a, lv in (
        ("Ada has 3 apples .", "3", 1), ("0 1 2 3 + 4", "7", 2), ("1 + 1", "2", 2), ("2 + 2", "4", 3))))
    name = str(tiny_dir)
    scans = level_scans(["other", name], {name: [1, 2]}, str(problems), 1, SEARCHES, max_new_tokens=4, shots=0,
                        seed=0, batch_size=4)
    assert [s.model for s in scans] == [name] and sorted(scans[0].accuracy) == [1, 2, 3]
    assert scans[0].given == (1, 2) and scans[0].n == {1: 1, 2: 1, 3: 1}  # the first problem of each level
    assert level_scans([name], None, str(problems), 1, SEARCHES, max_new_tokens=4, shots=0, seed=0,
                       batch_size=4) == []
