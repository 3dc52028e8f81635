"""`run --budget`: decoding stops at the deadline with every finished record stored, and resumes from there; the
decode loop's pulse log gives the progress line (records done of total, tokens/s, rows, ETA)."""

from __future__ import annotations

import json

import pytest

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

    model, tokenizer, _ = tiny
    settings = DecodeSettings("temperature", max_new_tokens=8)
    stored = []
    add = Run.add
    monkeypatch.setattr(Run, "add", lambda self, *a, **k: (stored.append(a[0]), add(self, *a, **k)))
    monkeypatch.setattr(pulse, "deadline", lambda: 0.0 if stored else None)  # spent once a record is stored
    with pytest.raises(pulse.BudgetExhausted, match="budget"):
        sample(model, tokenizer, tiny_problems(), settings, n_seeds=3, batch_size=1, root=tmp_path, progress=False)
    assert len(stored) == 1 and len(decode_run(model, settings, root=tmp_path)) == 1  # the finished one is kept
    monkeypatch.setattr(pulse, "deadline", lambda: None)
    records = sample(model, tokenizer, tiny_problems(), settings, n_seeds=3, batch_size=1, root=tmp_path,
                     progress=False)
    assert len(stored) == 6 and all(len(per) == 3 for per in records)  # only the five missing ones were decoded


def test_the_pulse_log_gives_the_progress_line(tiny, tmp_path, monkeypatch):
    from conftest import tiny_problems

    model, tokenizer, _ = tiny
    log = tmp_path / "pulse.jsonl"
    monkeypatch.setenv(env.PULSE, str(log))
    pulse.PULSE.reset()
    sample(model, tokenizer, tiny_problems(), DecodeSettings("greedy", max_new_tokens=6), batch_size=2,
           root=tmp_path, progress=False)
    last = json.loads(log.read_text().splitlines()[-1])
    assert last["done"] == last["total"] == 2 and last["what"] == "greedy" and last["tokens"] > 0
    line = progress_line("03_stitch_and_preserve", log)
    assert "2/2 records" in line and "tokens/s" in line and "rows in flight" in line
    assert progress_line("03_stitch_and_preserve", tmp_path / "absent.jsonl") is None


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


def test_a_drain_admits_no_mh_chain_but_finishes_the_rest(tiny, tmp_path, monkeypatch):
    """Near a budget's end the engine admits no MH chain (one cut off at the deadline is lost) and keeps decoding the
    rows that finish soon; when only chains are left, it stops with the others' records stored."""
    from conftest import tiny_problems

    from helpers.evaluation.decodes import sample_methods
    from helpers.samplers.power import PowerConfig
    from helpers.samplers.target import Target

    model, tokenizer, _ = tiny
    settings = {"power": DecodeSettings("power", 8, target=Target(2.0), power=PowerConfig(block_size=4, mcmc_steps=1)),
                "greedy": DecodeSettings("greedy", 8)}
    monkeypatch.setattr(pulse, "draining", lambda: True)
    with pytest.raises(pulse.BudgetExhausted, match="long rows"):
        sample_methods(model, tokenizer, tiny_problems(), settings, n_seeds=1, batch_size=2, root=tmp_path,
                       progress=False)
    assert len(decode_run(model, settings["greedy"], root=tmp_path)) == 2
    assert len(decode_run(model, settings["power"], root=tmp_path)) == 0
    monkeypatch.setattr(pulse, "draining", lambda: False)
    records = sample_methods(model, tokenizer, tiny_problems(), settings, n_seeds=1, batch_size=2, root=tmp_path,
                             progress=False)
    assert all(len(per) == 1 for per in records["power"])


def test_the_drain_begins_a_longest_chain_life_before_the_deadline(monkeypatch):
    """Before any chain has ended the drain begins at $SVD_DRAIN; once one has, early enough for a chain that lives
    as long as the longest seen, so chains admitted late on a slow model are not cut off and lost."""
    import time

    monkeypatch.setattr(pulse, "_LONGEST", [0.0])
    now = time.time()
    monkeypatch.setenv(env.DEADLINE, str(now + 3600))
    monkeypatch.setenv(env.DRAIN, str(now + 2700))
    assert not pulse.draining()
    pulse.lived(1200.0)  # 1.25 x 20 minutes is still inside the last 45
    assert not pulse.draining()
    pulse.lived(3000.0)  # a chain of 50 minutes: the drain has begun
    assert pulse.draining()
    pulse.lived(10.0)  # the longest life is kept
    assert pulse.draining()


def test_a_drain_is_given_with_a_budget_and_shorter_than_it(tmp_path, capsys):
    from helpers.runner.profiles import RunError
    from helpers.runner.run import drain_seconds

    assert drain_seconds(7200) == 1800 and drain_seconds(36000) == 2700 and drain_seconds(7200, 4800) == 4800
    with pytest.raises(RunError, match="shorter than the budget"):
        drain_seconds(3600, 3600)
    assert main(["run", "--profile", "smoke", "--only", "03_stitch_and_preserve", "--no-build", "--out",
                 str(tmp_path), "--drain", "10m"]) == 2
    assert "give --budget" in capsys.readouterr().err
