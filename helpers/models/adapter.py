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
    writes: tuple[str, str] = ("self_attn", "mlp")  # each block's modules whose outputs its two sublayers add to
    # the residual stream: the attention and the MLP themselves (Llama, Qwen2), or the norms after them (Gemma 3)

    @property
    def n_layers(self) -> int:
        return len(self.blocks)

    def attention(self, layer: int) -> nn.Module:
        """The module whose output is what block `layer`'s attention writes into the residual stream."""
        return getattr(self.blocks[layer], self.writes[0])

    def mlp(self, layer: int) -> nn.Module:
        """The module whose output is what block `layer`'s MLP writes into the residual stream."""
        return getattr(self.blocks[layer], self.writes[1])

    @torch.no_grad()
    def readout(self, hidden: torch.Tensor) -> torch.Tensor:
        """Logits of a residual-stream state: unembed(final_norm(h)), in float32."""
        return self.unembed(self.final_norm(hidden)).float()


def adapter(model) -> Adapter:
    """The adapter of a Llama-, Qwen2- or Gemma 3-style causal LM; a clear error for any other layout."""
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
            "(the Llama, Qwen2 and Gemma 3 families, e.g. SmolLM2, Qwen2.5 and Gemma 3 270M).")
    # Gemma 2 and 3 norm each sublayer's output before adding it (a "sandwich" of four norms per block); in Llama and
    # Qwen2 `post_attention_layernorm` is the MLP's input norm, so the names alone do not tell the two apart
    sandwich = all(hasattr(b, "pre_feedforward_layernorm") and hasattr(b, "post_feedforward_layernorm") for b in blocks)
    writes = ("post_attention_layernorm", "post_feedforward_layernorm") if sandwich else ("self_attn", "mlp")
    return Adapter(blocks=blocks, final_norm=norm, unembed=head, writes=writes)


def hidden_of(output) -> torch.Tensor:
    """A block's or attention's hidden-state output, whether it comes as a tensor or a tuple."""
    return output[0] if isinstance(output, tuple | list) else output
