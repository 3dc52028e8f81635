"""Where a decoder keeps its blocks, and one hook-based capture of what each block reads and writes.

The `Adapter` names the pieces every analysis needs (blocks, their attention and MLP, the final norm,
the unembedding) for the Llama and Qwen2 families. `capture` records, per block l, the input h_l, the
attention output a_l, the MLP output m_l and the output h_{l+1} = h_l + a_l + m_l, in float32.
Nothing here edits weights.
"""

from __future__ import annotations

from collections.abc import Sequence
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


@dataclass
class Capture:
    """Per-block tensors of one sequence, each [L, T, D] float32 (missing parts are None)."""

    inputs: torch.Tensor
    attn: torch.Tensor | None
    mlp: torch.Tensor | None
    outputs: torch.Tensor
    logits: torch.Tensor  # [T, V] float32, the model's own output

    @property
    def n_layers(self) -> int:
        return self.inputs.shape[0]

    def residual_error(self) -> float:
        """Largest relative violation of h_{l+1} = h_l + a_l + m_l over layers and positions."""
        if self.attn is None or self.mlp is None:
            raise ValueError("capture(..., parts='all') is needed to check the residual identity")
        recon = self.inputs + self.attn + self.mlp
        scale = self.outputs.norm(dim=-1).clamp(min=1e-6)
        return float(((recon - self.outputs).norm(dim=-1) / scale).max())


@torch.inference_mode()
def capture(model, ids: Sequence[int] | torch.Tensor, parts: str = "all") -> Capture:
    """One forward pass of a single sequence with hooks on every block.

    parts='all' records inputs, attention outputs, MLP outputs and outputs; parts='io' only inputs and outputs.
    """
    if parts not in {"all", "io"}:
        raise ValueError(f"parts must be 'all' or 'io', got {parts!r}")
    ad = adapter(model)
    device = next(model.parameters()).device
    ids = torch.as_tensor(ids, dtype=torch.long, device=device).reshape(1, -1)
    if ids.shape[1] == 0:
        raise ValueError("capture needs at least one token")
    n, T, D = ad.n_layers, ids.shape[1], model.config.hidden_size
    store: dict[str, list] = {k: [None] * n for k in ("inputs", "attn", "mlp", "outputs")}

    def keep(kind: str, layer: int, tensor: torch.Tensor) -> None:
        if tensor.shape != (1, T, D):
            raise RuntimeError(f"unexpected {kind} shape {tuple(tensor.shape)} at layer {layer}; expected (1, {T}, {D})")
        store[kind][layer] = tensor[0].float().clone()

    handles = []
    for l, block in enumerate(ad.blocks):
        def pre(module, args, kwargs, l=l):
            keep("inputs", l, args[0] if args else kwargs["hidden_states"])

        handles.append(block.register_forward_pre_hook(pre, with_kwargs=True))
        handles.append(block.register_forward_hook(lambda m, a, out, l=l: keep("outputs", l, hidden_of(out))))
        if parts == "all":
            handles.append(ad.attention(l).register_forward_hook(lambda m, a, out, l=l: keep("attn", l, hidden_of(out))))
            handles.append(ad.mlp(l).register_forward_hook(lambda m, a, out, l=l: keep("mlp", l, hidden_of(out))))
    try:
        logits = model(input_ids=ids, use_cache=False).logits[0].float()
    finally:
        for h in handles:
            h.remove()
    stacked = {k: torch.stack(v) if all(t is not None for t in v) else None for k, v in store.items()}
    if stacked["inputs"] is None or stacked["outputs"] is None:
        raise RuntimeError("some blocks did not run; is this a truncated or unusual model?")
    return Capture(stacked["inputs"], stacked["attn"], stacked["mlp"], stacked["outputs"], logits)
