"""The vLLM engine a process holds is reused only for the same checkpoint and the same engine arguments (vLLM itself
is not needed: the engine's start and stop are stood in for)."""

from __future__ import annotations

import pytest

import helpers.engines.vllm as vllm
import helpers.models.checkpoints as checkpoints


@pytest.fixture()
def started(monkeypatch, tiny):
    """The engines `for_model` starts, as (folder, engine arguments); none is held before or after."""
    log = []

    def start(self, folder, **args):
        self.folder = str(folder)
        log.append((self.folder, args))

    monkeypatch.setattr(vllm.VLLMEngine, "__init__", start)
    monkeypatch.setattr(vllm.VLLMEngine, "close", lambda self: log.append(("closed", self.folder)))
    monkeypatch.setattr(checkpoints, "checkpoint", lambda model: "/checkpoints/tiny")
    monkeypatch.setattr(vllm.VLLMEngine, "_current", None)
    yield log
    vllm.VLLMEngine.shutdown()


def test_a_call_with_other_engine_arguments_gets_a_new_engine_not_the_held_one(started, tiny):
    first = vllm.VLLMEngine.for_model(tiny, max_model_len=512)
    assert vllm.VLLMEngine.for_model(tiny, max_model_len=512) is first  # the same shape: kept
    second = vllm.VLLMEngine.for_model(tiny, max_model_len=1024)
    assert second is not first and ("closed", "/checkpoints/tiny") in started
    assert [args.get("max_model_len") for folder, args in started if folder != "closed"] == [512, 1024]
    assert vllm.VLLMEngine.for_model(tiny, max_model_len=1024, kv_cache_gib=2) is not second


def test_the_shape_compares_arguments_by_value():
    assert vllm.engine_shape("f", "float32", {"a": [1, 2], "b": 1}) == vllm.engine_shape("f", "float32", {"b": 1, "a": [1, 2]})
    assert vllm.engine_shape("f", "float32", {}) != vllm.engine_shape("f", "bfloat16", {})
