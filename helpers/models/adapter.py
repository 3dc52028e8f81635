"""Where a decoder keeps its pieces: blocks (with attention and MLP), the final norm and the unembedding.

Residual captures, the logit lens, interventions and truncation all reach the model through this adapter, so
supporting a new architecture family means teaching it one function.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn


class UnsupportedArchitecture(TypeError):
    """The model does not have the layout the adapter knows."""


@dataclass
class Adapter:
    """Handles on the parts of a pre-norm decoder that the analyses touch."""

    blocks: nn.ModuleList
    final_norm: nn.Module
    unembed: nn.Module

    @property
    def n_layers(self) -> int:
        return len(self.blocks)

    def attention(self, layer: int) -> nn.Module:
        return self.blocks[layer].self_attn

    def mlp(self, layer: int) -> nn.Module:
        return self.blocks[layer].mlp

    @torch.no_grad()
    def readout(self, hidden: torch.Tensor) -> torch.Tensor:
        """Logits of a residual-stream state: unembed(final_norm(h)), in float32."""
        return self.unembed(self.final_norm(hidden)).float()


def adapter(model) -> Adapter:
    """The adapter of a Llama/Qwen2-style causal LM; a clear error for any other layout."""
    base = getattr(model, "model", None)
    blocks = getattr(base, "layers", None)
    norm = getattr(base, "norm", None)
    head = model.get_output_embeddings() if hasattr(model, "get_output_embeddings") else None
    ok = isinstance(blocks, nn.ModuleList) and norm is not None and head is not None and len(blocks) > 0 and all(
        hasattr(b, "self_attn") and hasattr(b, "mlp") for b in blocks)
    if not ok:
        raise UnsupportedArchitecture(
            f"{type(model).__name__} is not supported: the analyses need a pre-norm decoder with "
            "model.model.layers[i].self_attn / .mlp, model.model.norm and an output embedding "
            "(the Llama and Qwen2 families, e.g. SmolLM2 and Qwen2.5).")
    return Adapter(blocks=blocks, final_norm=norm, unembed=head)


def hidden_of(output) -> torch.Tensor:
    """A block's or attention's hidden-state output, whether it comes as a tensor or a tuple."""
    return output[0] if isinstance(output, tuple | list) else output
