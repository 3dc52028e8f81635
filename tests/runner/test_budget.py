"""`run --budget`: decoding stops at the deadline with every finished record stored, and resumes from there; the
decode loop's pulse log gives the progress line (records done of total, tokens/s, rows, ETA)."""

from __future__ import annotations

import json

import pytest

import helpers.core.budget as budget
import helpers.core.pulse as pulse
from helpers.cli import BUDGET_SPENT, main, parse_duration
from helpers.core import env
from helpers.evaluation.decodes import DecodeSettings, decode_run, sample
from helpers.results.store import Run
from helpers.runner.execute import progress_line

# The budget is the runner's and the engine loop's own logic, the same under every transformers: one run.
pytestmark = pytest.mark.once


def test_decoding_stops_at_the_deadline_with_finished_records_stored_and_resumes(tiny, tmp_path, monkeypatch):
    from conftest import tiny_problems

    model = tiny
    settings = DecodeSettings("temperature", max_new_tokens=8)
    stored = []
    add = Run.add
    monkeypatch.setattr(Run, "add", lambda self, *a, **k: (stored.append(a[0]), add(self, *a, **k)))
    monkeypatch.setattr(budget, "deadline", lambda: 0.0 if stored else None)  # spent once a record is stored
    log = tmp_path / "pulse.jsonl"
    monkeypatch.setenv(env.PULSE, str(log))
    with pytest.raises(budget.BudgetSpent, match="budget"):
        sample(model, tiny_problems(), settings, n_seeds=3, batch_size=1, root=tmp_path, progress=False)
    assert len(stored) == 1 and len(decode_run(model, settings, root=tmp_path)) == 1  # the finished one is kept
    assert pulse.read_outcome(log) == budget.SPENT  # and the loop said why it ended, for the runner to read
    monkeypatch.setattr(budget, "deadline", lambda: None)
    records = sample(model, tiny_problems(), settings, n_seeds=3, batch_size=1, root=tmp_path,
                     progress=False)
    assert len(stored) == 6 and all(len(per) == 3 for per in records)  # only the five missing ones were decoded


def test_a_decode_without_a_pulse_still_says_why_it_stopped(tiny, tmp_path, monkeypatch):
    """A decode started without a pulse (a sampler called directly) still ends the log with the budget's outcome,
    which is all the runner needs to tell a spent budget from a failure; its lines count no records, so the
    progress line stays the last decode's that did."""
    from helpers.samplers.plain import decode

    log = tmp_path / "pulse.jsonl"
    monkeypatch.setenv(env.PULSE, str(log))
    pulse.Pulse.from_env().records(2, 2, "greedy")  # an earlier decode's progress
    monkeypatch.setattr(budget, "deadline", lambda: 0.0)
    with pytest.raises(budget.BudgetSpent):
        decode(tiny, [[1, 2, 3]], 4, stop_ids=[])
    last = json.loads(log.read_text().splitlines()[-1])
    assert last["outcome"] == budget.SPENT and last["total"] == 0 and pulse.read_outcome(log) == budget.SPENT
    assert "2/2 records" in progress_line("06_precision", log)  # the progress line is the last that counts records


def test_the_pulse_log_gives_the_progress_line(tiny, tmp_path, monkeypatch):
    from conftest import tiny_problems

    model = tiny
    log = tmp_path / "pulse.jsonl"
    monkeypatch.setenv(env.PULSE, str(log))
    sample(model, tiny_problems(), DecodeSettings("greedy", max_new_tokens=6), batch_size=2,
           root=tmp_path, progress=False)
    last = json.loads(log.read_text().splitlines()[-1])
    assert last["done"] == last["total"] == 2 and last["what"] == "greedy" and last["tokens"] > 0
    line = progress_line("03_stitch_and_preserve", log)
    assert "2/2 records" in line and "tokens/s" in line and "rows in flight" in line
    assert progress_line("03_stitch_and_preserve", tmp_path / "absent.jsonl") is None


def test_a_line_written_just_after_another_repeats_the_rate_instead_of_dividing_by_microseconds(tmp_path,
                                                                                                 monkeypatch):
    """A record stored, then the budget's end a step later: the last line's tokens/s is the run's rate, not a
    step's tokens over the microseconds between the two lines (it printed 1.5 million tokens/s)."""
    clock = [1000.0]
    monkeypatch.setattr(pulse.time, "time", lambda: clock[0])
    log = tmp_path / "pulse.jsonl"
    meter = pulse.Pulse(log)
    meter.records(0, 10, "greedy")
    clock[0] += 10.0
    meter.beat(200, rows=20)  # 20 tokens/s over ten seconds
    meter.records(1, 10, "greedy")
    clock[0] += 11.0 + 1e-5
    meter.beat(20, rows=20)
    meter.records(2, 10, "greedy")  # a line for the record: 20 tokens over 11 s
    clock[0] += 1e-5
    meter.beat(20, rows=20)
    meter.write(outcome=budget.SPENT)  # the decode loop's last line at the budget's end, a step later
    rates = [json.loads(line)["tokens_per_s"] for line in log.read_text().splitlines()]
    assert rates == [20.0, round(20 / 11, 2), round(20 / 11, 2)] and pulse.read_outcome(log) == budget.SPENT


@pytest.mark.parametrize("text, seconds", [("150m", 9000), ("2.5h", 9000), ("90s", 90), ("45", 45)])
def test_budgets_read_as_durations(text, seconds):
    assert parse_duration(text) == seconds


@pytest.mark.parametrize("text", ["", "m", "-5m", "0", "abc", "1e999h", "nanm"])
def test_a_bad_budget_is_refused(text):
    import argparse

    with pytest.raises(argparse.ArgumentTypeError, match="positive time"):
        parse_duration(text)


def test_a_budget_spent_before_a_chapter_stops_the_run_with_its_own_status(tmp_path, capsys):
    status = main(["run", "--profile", "smoke", "--only", "03_stitch_and_preserve", "--no-build", "--out",
                   str(tmp_path), "--budget", "0.001s"])
    assert status == BUDGET_SPENT
    out = capsys.readouterr().out
    assert "budget spent" in out and "03_stitch_and_preserve" in out and "same command" in out


def _power_records(model, root, settings):
    from conftest import tiny_problems

    return sample(model, tiny_problems(), settings, n_seeds=2, batch_size=3, root=root, progress=False)


def _chain_settings(mode: str):
    from helpers.samplers.power import PowerConfig
    from helpers.samplers.target import Target

    return DecodeSettings("power", 24, target=Target(2.0), power=PowerConfig(block_size=4, mcmc_steps=2, mode=mode))


@pytest.mark.parametrize("mode", ["exact", "reference"])
def test_an_mh_chain_stopped_by_its_budget_goes_on_from_its_last_block(tiny, tmp_path, monkeypatch, capsys, mode):
    """A chain cut off at the deadline is not lost: it goes on from its last finished block, and its record is the
    one an uninterrupted run writes (the same tokens, moves and costs; log p as the model computes it again)."""
    model = tiny
    settings = _chain_settings(mode)
    whole = _power_records(model, tmp_path / "whole", settings)
    saved = []
    save = Run.save_checkpoint
    monkeypatch.setattr(Run, "save_checkpoint", lambda self, *a: (saved.append(a[0]), save(self, *a)))
    monkeypatch.setattr(budget, "deadline", lambda: 0.0 if len(saved) >= 5 else None)
    with pytest.raises(budget.BudgetSpent):
        _power_records(model, tmp_path / "cut", settings)
    run = decode_run(model, settings, root=tmp_path / "cut")
    left = run.checkpoints()
    assert left and all(k not in run for k in left) and len(run) < 4  # chains under way left their checkpoints
    monkeypatch.setattr(budget, "deadline", lambda: None)
    resumed = _power_records(model, tmp_path / "cut", settings)
    assert f"{len(left)} MH chains go on from their checkpoints" in capsys.readouterr().err
    for a, b in zip([r for per in whole for r in per], [r for per in resumed for r in per], strict=True):
        assert (a["tokens"], a["acceptance"], a["decoded_tokens"], a["prefill_tokens"]) == \
               (b["tokens"], b["acceptance"], b["decoded_tokens"], b["prefill_tokens"])
        assert b["sum_logp"] == pytest.approx(a["sum_logp"], abs=1e-4)
    assert decode_run(model, settings, root=tmp_path / "cut").checkpoints() == {}  # finished chains need none
    assert not run.checkpoints_path.exists()


def test_a_checkpoint_that_does_not_fit_its_chain_is_not_gone_on_from(tiny, tmp_path, monkeypatch, capsys):
    """Damaged or foreign checkpoints (another block count, a torn generator state, costs that are not counts) are
    dropped with a line on stderr, and their chains start again: the records are those of an uninterrupted run."""
    from conftest import tiny_problems

    from helpers.results.identity import problem_key, sample_key

    model = tiny
    settings = _chain_settings("exact")
    whole = _power_records(model, tmp_path / "whole", settings)
    run = decode_run(model, settings, root=tmp_path / "bad")
    good = {"block": 1, "tokens": [5], "logp": [-1.0], "logq": [-1.0], "acceptance": [0.5],
            "moves": [[0, True], [0, False]], "generator": "AAAA"}
    keys = [sample_key(problem_key(p), s) for p in tiny_problems() for s in range(2)]
    run.save_checkpoint(keys[0], {"chain": {**good, "block": 9}, "spent": {"decoded": 1, "prefill": 1, "passes": 1,
                                                                         "seconds": 0.1}})
    run.save_checkpoint(keys[1], {"chain": good, "spent": {"decoded": 1, "prefill": 1, "passes": 1, "seconds": 0.1}})
    run.save_checkpoint(keys[2], {"chain": {}, "spent": {"decoded": -1, "prefill": 1, "passes": 1, "seconds": 0.1}})
    run.save_checkpoint(keys[3], {"spent": None})
    records = _power_records(model, tmp_path / "bad", settings)
    assert "4 checkpoints do not fit their chains and those start again" in capsys.readouterr().err
    assert [r["tokens"] for per in records for r in per] == [r["tokens"] for per in whole for r in per]


@pytest.mark.parametrize(("code", "spent", "said"), [
    ("from helpers.core import budget, pulse\npulse.outcome(budget.SPENT)\nraise RuntimeError('stopped')", True,
     "the budget ran out"),
    ("class BudgetSpent(Exception): pass\nraise BudgetSpent('a name is not an outcome')", False, "failed in cell"),
    ("from helpers.core import pulse\nfrom helpers.results.store import NOT_RELEASED\npulse.outcome(NOT_RELEASED)\n"
     "raise RuntimeError('the release lacks them')", False, "stopped before computing anything: the release lacks"),
    ("class NotReleased(Exception): pass\nraise NotReleased('a name is not an outcome')", False, "failed in cell")])
def test_the_runner_tells_a_spent_budget_by_the_loops_outcome_not_by_an_exceptions_name(tmp_path, code, spent, said):
    import nbformat

    from helpers.core.budget import BudgetSpent
    from helpers.runner.execute import execute
    from helpers.runner.profiles import Job, RunError

    notebook = tmp_path / "chapter.ipynb"
    nbformat.write(nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(code)]), notebook)

    class Chapter(Job):
        @property
        def source(self):
            return notebook

    with pytest.raises(BudgetSpent if spent else RunError, match=said):
        execute(Chapter("99_chapter"), tmp_path / "out", timeout=120)
