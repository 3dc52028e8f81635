"""The results store: reuse, resume, recompute on a new configuration."""

from __future__ import annotations

import json

import pytest

from helpers.core import env
from helpers.results.store import Run, config_hash


def test_hash_ignores_key_order_and_sees_values():
    assert config_hash({"a": 1, "b": [1, 2]}) == config_hash({"b": [1, 2], "a": 1})
    assert config_hash({"a": 1}) != config_hash({"a": 2})
    assert config_hash({"a": (1, 2)}) == config_hash({"a": [1, 2]})


def test_records_are_reused_and_carry_provenance(tmp_path):
    run = Run("exp", {"model": "m", "seed": 3, "n": 2}, root=tmp_path)
    calls = []
    assert run.compute("p1", lambda: calls.append(1) or {"x": 1}) == {"x": 1}
    again = Run("exp", {"seed": 3, "n": 2, "model": "m"}, root=tmp_path)
    assert again.compute("p1", lambda: calls.append(2) or {"x": 2}) == {"x": 1}
    assert calls == [1]
    record = json.loads(run.path.read_text().splitlines()[0])
    assert record["model"] == "m" and record["seed"] == 3 and record["config"]["n"] == 2
    assert {"torch", "transformers", "python"} <= set(record["versions"]) and record["seconds"] >= 0


def test_interrupted_run_resumes(tmp_path):
    run = Run("exp", {"k": 1}, root=tmp_path)
    run.add("a", 1, 0.1)
    run.add("b", 2, 0.1)
    with run.path.open("a") as fh:  # a write cut short by an interruption
        fh.write('{"key": "c", "config_hash": "')
    resumed = Run("exp", {"k": 1}, root=tmp_path)
    assert resumed.results() == {"a": 1, "b": 2}
    assert resumed.missing(["a", "b", "c"]) == ["c"]
    resumed.add("c", 3, 0.1)
    assert Run("exp", {"k": 1}, root=tmp_path).results() == {"a": 1, "b": 2, "c": 3}
    size = resumed.path.stat().st_size
    Run("exp", {"k": 1}, root=tmp_path)  # loading a clean file leaves it alone
    assert resumed.path.stat().st_size == size


def test_changed_configuration_recomputes(tmp_path):
    Run("exp", {"k": 1}, root=tmp_path).add("a", 1, 0.1)
    other = Run("exp", {"k": 2}, root=tmp_path)
    assert "a" not in other and len(other) == 0


def test_compute_stores_only_finished_units(tmp_path):
    run = Run("exp", {"k": 1}, root=tmp_path)

    def interrupted():
        raise RuntimeError("interrupted")

    with pytest.raises(RuntimeError):
        run.compute("x", interrupted)
    assert "x" not in run and not Run("exp", {"k": 1}, root=tmp_path).path.exists()
    assert run.compute("y", lambda: [1, 2]) == [1, 2]
    assert Run("exp", {"k": 1}, root=tmp_path).get("y") == [1, 2]  # written, and read back by a new reader


def test_bad_experiment_name(tmp_path):
    with pytest.raises(ValueError):
        Run("a/b", {}, root=tmp_path)


def test_a_process_counts_what_it_reused_and_computed(tmp_path, monkeypatch):
    import helpers.results.usage as usage

    log = tmp_path / "usage.jsonl"
    monkeypatch.setenv(env.STORE_USAGE, str(log))
    run = Run("exp", {"k": 3}, root=tmp_path)
    run.add("new", 1, 0.1)
    run.get("new")  # computed in this process: not a reuse
    assert usage.summary(log) == {"reused": 0, "computed": 1, "released": 0, "runs": [f"exp/{run.hash}"]}
    log.unlink()  # as if what follows were a later process
    old = Run("exp", {"k": 3}, root=tmp_path)
    Run("exp", {"k": 4}, root=tmp_path).add("other", 2, 0.1)
    old.get("new")
    old.compute("new", lambda: 99)
    assert old.get_many(["new", "absent"]) == [1, None]
    old.results()
    with log.open("a") as fh:
        fh.write('{"run": "exp/torn", "reu')  # a kernel stopped mid-line
    assert usage.summary(log) == {"reused": 1, "computed": 1, "released": 0,
                                  "runs": sorted({f"exp/{old.hash}", f"exp/{Run('exp', {'k': 4}).hash}"})}
    assert usage.summary(tmp_path / "absent.jsonl") is None


def test_nothing_is_counted_without_a_usage_file(tmp_path, monkeypatch):
    import helpers.core.jsonlog as jsonlog
    import helpers.results.usage as usage

    def no_file(*args, **kwargs):
        raise AssertionError(f"usage opened {args} with no usage file named")

    monkeypatch.delenv(env.STORE_USAGE, raising=False)
    monkeypatch.setattr(jsonlog, "open", no_file, raising=False)  # the log writer's `open`, before the builtin
    run = Run("exp", {"k": 3}, root=tmp_path)
    run.add("new", 1, 0.1)
    run.save_checkpoint("later", {"step": 1})
    assert run.get("new") == 1 and run.get_many(["new"]) == [1] and run.results() == {"new": 1}
    usage.report_at_exit()
    monkeypatch.setenv(env.STORE_USAGE, str(tmp_path / "usage.jsonl"))
    with pytest.raises(AssertionError, match="usage opened"):  # the check itself can fail
        run.get("new")


def test_a_kernel_reports_its_peak_memory_once_when_asked(tmp_path, monkeypatch):
    """Nothing is registered to run at exit without a usage file; a chapter's first call asks for the report, and
    asking twice writes it once."""
    import helpers.results.usage as usage

    class Exit:  # atexit's registry, as the test sees it
        def __init__(self) -> None:
            self.calls: list[tuple] = []

        def register(self, fn, *args) -> None:
            self.calls.append((fn, *args))

        def unregister(self, fn) -> None:
            self.calls = [c for c in self.calls if c[0] is not fn]

    at_exit = Exit()
    monkeypatch.setattr(usage, "atexit", at_exit)
    monkeypatch.delenv(env.STORE_USAGE, raising=False)
    usage.report_at_exit()
    assert at_exit.calls == []
    log = tmp_path / "usage.jsonl"
    monkeypatch.setenv(env.STORE_USAGE, str(log))
    usage.report_at_exit()
    usage.report_at_exit()
    assert len(at_exit.calls) == 1 and at_exit.calls[0][1] == str(log)
    fn, path = at_exit.calls[0]
    fn(path)  # as the process exits
    peak = usage.summary(log)["peak_mib"]
    assert isinstance(peak, int) and peak > 0  # the process's peak resident memory, for the run table


def test_checkpoints_keep_the_newest_of_each_unfinished_unit(tmp_path):
    """The newest checkpoint of a unit wins; a finished unit's, a torn line and another configuration's are dropped,
    and the file is rewritten to what is kept (removed once nothing is)."""
    run = Run("exp", {"a": 1}, root=tmp_path)
    run.save_checkpoint("u1", {"block": 1})
    run.save_checkpoint("u2", {"block": 1})
    run.save_checkpoint("u1", {"block": 2})
    Run("exp", {"a": 2}, root=tmp_path).save_checkpoint("u3", {"block": 1})  # another configuration's file
    with run.checkpoints_path.open("a") as fh:
        fh.write('{"key": "u2", "config_hash": "' + run.hash + '", "state": {"blo')  # a write cut off
    assert run.checkpoints() == {"u1": {"block": 2}, "u2": {"block": 1}}
    run.add("u2", 1.0, seconds=0.1)
    assert run.checkpoints() == {"u1": {"block": 2}}
    assert [json.loads(line)["key"] for line in run.checkpoints_path.read_text().splitlines()] == ["u1"]
    run.add("u1", 1.0, seconds=0.1)
    assert run.checkpoints() == {} and not run.checkpoints_path.exists()
