"""The line format of checkpoints, the states that units under way (MH chains) can go on from: one JSON line per
state, `{"key", "config_hash", "state"}`, in a run's local `<hash>.jsonl.checkpoints` (`helpers.results.store.Run`)
and in the release's checkpoint files (`helpers.results.release`), which both read and write them through here."""

from __future__ import annotations

import json
from collections.abc import Iterable


def checkpoint_line(key: str, config_hash: str, state: dict) -> bytes:
    """One checkpoint line: unit `key` of run `config_hash` can go on from `state`."""
    return json.dumps({"key": key, "config_hash": config_hash, "state": state}, separators=(",", ":")).encode() + b"\n"


def checkpoint_states(lines: Iterable[bytes], config_hash: str) -> dict[str, dict]:
    """The newest state per key among the checkpoint lines of the run `config_hash`; a line that is torn (a write
    cut off), another run's or not a checkpoint is skipped."""
    newest: dict[str, dict] = {}
    for raw in lines:
        try:
            line = json.loads(raw.decode("utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError, RecursionError):
            continue
        if (isinstance(line, dict) and isinstance(line.get("key"), str) and line.get("config_hash") == config_hash
                and isinstance(line.get("state"), dict)):
            newest[line["key"]] = line["state"]
    return newest
