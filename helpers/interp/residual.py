"""What each block reads and writes: one capture of the residual stream, and the measures built on it.

`capture` records, per block l, the input h_l, the attention output a_l, the MLP output m_l and the output
h_{l+1} = h_l + a_l + m_l, in float32, through the named hook points of `helpers.models.hooks`.
`contributions` turns a capture into the norm and cosine measures of Csordás et al. Nothing here edits weights.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch

from helpers.interp.metrics import cosine
from helpers.models.adapter import adapter
from helpers.models.hooks import hooked


@dataclass
class Capture:
    """Per-block tensors of one sequence, each [L, T, D] float32 (missing parts are None)."""

    inputs: torch.Tensor
    attn: torch.Tensor | None
    mlp: torch.Tensor | None
    outputs: torch.Tensor
    logits: torch.Tensor  # [T - logits_from, V] float32, the model's own output at positions logits_from..T-1
    logits_from: int = 0

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
def capture(model, ids: Sequence[int] | torch.Tensor, parts: str = "all", logits_from: int = 0) -> Capture:
    """One forward pass of a single sequence with hooks on every block.

    parts='all' records inputs, attention outputs, MLP outputs and outputs; parts='io' only inputs and outputs.
    The output head runs only at positions `logits_from`.. (a long prompt before them costs no logits).
    """
    if parts not in {"all", "io"}:
        raise ValueError(f"parts must be 'all' or 'io', got {parts!r}")
    ad = adapter(model)
    device = next(model.parameters()).device
    ids = torch.as_tensor(ids, dtype=torch.long, device=device).reshape(1, -1)
    if ids.shape[1] == 0:
        raise ValueError("capture needs at least one token")
    if not 0 <= logits_from < ids.shape[1]:
        raise ValueError(f"logits_from must lie in 0..{ids.shape[1] - 1}, got {logits_from}")
    n, T, D = ad.n_layers, ids.shape[1], model.config.hidden_size
    store: dict[str, list] = {k: [None] * n for k in ("inputs", "attn", "mlp", "outputs")}

    def keep(kind: str, layer: int):
        def handler(tensor: torch.Tensor, kwargs: dict) -> None:
            if tensor.shape != (1, T, D):
                raise RuntimeError(f"unexpected {kind} shape {tuple(tensor.shape)} at layer {layer}; expected (1, {T}, {D})")
            store[kind][layer] = tensor[0].float().clone()
        return handler

    points = {"inputs": "block_input", "outputs": "block_output"}
    if parts == "all":
        points.update({"attn": "attn_output", "mlp": "mlp_output"})
    handlers = {(point, l): keep(kind, l) for kind, point in points.items() for l in range(n)}
    with hooked(ad, handlers):
        logits = model(input_ids=ids, use_cache=False, logits_to_keep=T - logits_from).logits[0].float()
    stacked = {k: torch.stack(v) if all(t is not None for t in v) else None for k, v in store.items()}
    if stacked["inputs"] is None or stacked["outputs"] is None:
        raise RuntimeError("some blocks did not run; is this a truncated or unusual model?")
    return Capture(stacked["inputs"], stacked["attn"], stacked["mlp"], stacked["outputs"], logits, logits_from)


# --------------------------------------------------------------------------------------------------
# How much each (sub)layer writes into the residual, per layer and position (Csordás et al., section 3)
# --------------------------------------------------------------------------------------------------

CONTRIBUTION_METRICS = ("rc_attn", "rc_mlp", "rc_layer", "cos_attn", "cos_mlp", "cos_layer", "cos_io",
                        "norm_h", "norm_attn", "norm_mlp")


def contributions(cap: Capture) -> dict[str, np.ndarray]:
    """Per layer and position [L, T]: relative contributions, cosines with the residual they are added to, norms.

    rc_attn = ‖a_l‖/‖h_l‖, rc_mlp = ‖m_l‖/‖h_l + a_l‖, rc_layer = ‖a_l + m_l‖/‖h_l‖; cos_* compare the same
    pairs; cos_io = cos(h_{l+1}, h_l). The residual is always the one *before* the (sub)layer adds to it.
    """
    if cap.attn is None or cap.mlp is None:
        raise ValueError("contributions need capture(..., parts='all')")
    h, a, m = cap.inputs, cap.attn, cap.mlp
    mid, delta = h + a, a + m
    eps = 1e-6
    out = {
        "rc_attn": a.norm(dim=-1) / h.norm(dim=-1).clamp(min=eps),
        "rc_mlp": m.norm(dim=-1) / mid.norm(dim=-1).clamp(min=eps),
        "rc_layer": delta.norm(dim=-1) / h.norm(dim=-1).clamp(min=eps),
        "cos_attn": cosine(a, h), "cos_mlp": cosine(m, mid), "cos_layer": cosine(delta, h),
        "cos_io": cosine(cap.outputs, h),
        "norm_h": h.norm(dim=-1), "norm_attn": a.norm(dim=-1), "norm_mlp": m.norm(dim=-1),
    }
    return {k: v.cpu().numpy() for k, v in out.items()}


REDUCTIONS = ("tokens", "prompts", "max")


def reduce_layers(per_prompt: Sequence[np.ndarray], how: str = "tokens") -> np.ndarray:
    """One curve over layers from per-prompt [L, T] values (or stored summaries, see `summarise`).

    'tokens': mean over all positions of all prompts (each token weighs the same, as Csordás et al.);
    'prompts': mean over prompts of each prompt's mean over positions; 'max': largest value anywhere.
    """
    if how not in REDUCTIONS:
        raise ValueError(f"reduction must be one of {REDUCTIONS}, got {how!r}")
    if not per_prompt:
        raise ValueError("no prompts to reduce")
    summaries = [p if isinstance(p, dict) else summarise(p) for p in per_prompt]
    if how == "tokens":
        return np.sum([s["sum"] for s in summaries], axis=0) / sum(s["n"] for s in summaries)
    if how == "prompts":
        return np.mean([np.asarray(s["sum"]) / s["n"] for s in summaries], axis=0)
    return np.max([s["max"] for s in summaries], axis=0)


def summarise(values: np.ndarray, start: int = 0) -> dict:
    """What a reduction needs from one prompt's [L, T] values (positions `start`.. only): sums, count, maxima."""
    v = np.asarray(values, dtype=float)[:, start:]
    return {"sum": v.sum(axis=1), "n": int(v.shape[1]), "max": v.max(axis=1)}
