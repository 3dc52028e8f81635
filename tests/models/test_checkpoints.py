"""Truncated models written as ordinary checkpoints: a plain loader reads them and computes the same logits."""

from __future__ import annotations

import pytest
import torch
from transformers import AutoConfig, AutoModelForCausalLM

from helpers.models.checkpoints import checkpoint, checkpoint_folder
from helpers.models.truncation import kept_blocks


@pytest.mark.parametrize("method", ["stitch", "naive"])
def test_a_written_truncation_computes_the_in_memory_truncations_logits(tiny, method, tmp_path):
    model, tokenizer, info = tiny.module, tiny.tokenizer, tiny.info
    short = tiny.at_depth(3, method)
    folder = checkpoint(short, root=tmp_path)
    config = AutoConfig.from_pretrained(folder)
    assert config.num_hidden_layers == 3 and config.model_type == model.config.model_type  # a plain Llama or Qwen2
    loaded = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32).to(model.device).eval()
    ids = torch.tensor([tokenizer("Ada has 3 apples . How many apples does Ada have now ?")["input_ids"]],
                       device=model.device)
    with torch.inference_mode():
        assert torch.allclose(loaded(ids).logits, short.module(ids).logits, atol=1e-5, rtol=1e-5)
    # the kept blocks, renumbered 0..2: the last one is the original last block under stitch-and-preserve
    original = kept_blocks(info.n_layers, 3, method)[-1]
    assert torch.equal(loaded.model.layers[2].mlp.down_proj.weight, model.model.layers[original].mlp.down_proj.weight)


def test_checkpoints_are_cached_by_identity_and_rewritten_when_damaged(tiny, tmp_path, capsys):
    a, b = tiny.at_depth(3, "stitch"), tiny.at_depth(3, "naive")
    first = checkpoint(a, root=tmp_path)
    assert checkpoint_folder(b, tmp_path) != first and checkpoint_folder(tiny, tmp_path) != first
    weights = first / "model.safetensors"
    stamp = weights.stat().st_mtime_ns
    assert checkpoint(a, root=tmp_path) == first and weights.stat().st_mtime_ns == stamp  # reused
    with weights.open("r+b") as fh:  # damage the weights in place, same size
        fh.seek(weights.stat().st_size // 2)
        fh.write(b"\0" * 4096)
    assert checkpoint(a, root=tmp_path) == first
    assert "cannot be trusted" in capsys.readouterr().err
    loaded = AutoModelForCausalLM.from_pretrained(first, dtype=torch.float32).to(tiny.module.device)
    assert torch.equal(loaded.model.layers[0].self_attn.q_proj.weight, tiny.module.model.layers[0].self_attn.q_proj.weight)
    assert not [p for p in tmp_path.iterdir() if ".tmp" in p.name]  # no temporary folder left behind
