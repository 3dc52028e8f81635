"""The kernel's JSON-lines logs: a line that cannot be written never stops the work, and the reader skips what a
kernel stopped mid-write (or anything else) left that is not a JSON object."""

from __future__ import annotations

from helpers.core import jsonlog


def test_lines_appended_read_back_in_order(tmp_path):
    log = tmp_path / "log.jsonl"
    jsonlog.append(log, [{"a": 1}, {"b": [2, 3]}])
    jsonlog.append(log, ({"c": i} for i in range(2)))  # any iterable, a generator included
    assert jsonlog.read(log) == [{"a": 1}, {"b": [2, 3]}, {"c": 0}, {"c": 1}]


def test_nothing_is_written_without_a_path_or_lines(tmp_path):
    jsonlog.append(None, [{"a": 1}])
    jsonlog.append("", [{"a": 1}])
    log = tmp_path / "log.jsonl"
    jsonlog.append(log, [])
    assert not log.exists() and list(tmp_path.iterdir()) == []


def test_a_line_that_cannot_be_written_is_dropped_not_raised(tmp_path):
    jsonlog.append(tmp_path / "no such folder" / "log.jsonl", [{"a": 1}])  # the work goes on
    jsonlog.append(tmp_path, [{"a": 1}])  # a folder, not a file
    assert list(tmp_path.iterdir()) == []


def test_the_reader_skips_lines_cut_off_or_not_objects(tmp_path):
    log = tmp_path / "log.jsonl"
    log.write_text('{"a": 1}\n[1, 2]\n"text"\nnot json\n\n' + "[" * 100_000 + "\n" + '{"b": 2}\n{"c": 3, "d"')
    assert jsonlog.read(log) == [{"a": 1}, {"b": 2}]


def test_no_readable_log_reads_as_none(tmp_path):
    assert jsonlog.read(tmp_path / "absent.jsonl") is None
    (tmp_path / "binary.jsonl").write_bytes(b"\xff\xfe{}")
    assert jsonlog.read(tmp_path / "binary.jsonl") is None
    assert jsonlog.read(tmp_path) is None  # a folder
