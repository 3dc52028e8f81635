"""Integrated gradients: the gold answer's probability attributed to the positions of one layer's output."""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import contextmanager

import numpy as np
import torch

from helpers.interp.interventions import reference_run
from helpers.models.adapter import adapter, hidden_of
from helpers.models.hooks import COMPONENT_POINTS, hooked, recorder

COMPONENTS = ("layer", "attn", "mlp")


@contextmanager
def _frozen(model):
    """Parameters temporarily without gradients, so a backward pass only reaches the interpolated activation."""
    flags = [p.requires_grad for p in model.parameters()]
    for p in model.parameters():
        p.requires_grad_(False)
    try:
        yield
    finally:
        for p, f in zip(model.parameters(), flags, strict=True):
            p.requires_grad_(f)


def integrated_gradients(model, ids: Sequence[int], answer_start: int, component: str = "layer", steps: int = 32,
                         batch_size: int = 16, layers: Sequence[int] | None = None) -> np.ndarray:
    """[L, T] attributions of the gold answer's probability to each layer's output, position by position.

    For layer l the activation x (block output h_{l+1}, or a_l, or m_l) is replaced by baseline + r (x − baseline),
    r = k/steps for k = 0..steps−1, with the baseline its own per-channel mean over positions; the objective is
    the sum of the answer tokens' probabilities; attribution = Σ_channels mean_k ∇ ⊙ (x − baseline).
    """
    if component not in COMPONENTS:
        raise ValueError(f"component must be one of {COMPONENTS}, got {component!r}")
    if steps < 1:
        raise ValueError(f"steps must be at least 1, got {steps}")
    ad = adapter(model)
    ids = list(ids)
    T = len(ids)
    if not 1 <= answer_start < T:
        raise ValueError(f"answer_start must lie in 1..{T - 1}, got {answer_start}")
    device = next(model.parameters()).device
    targets = torch.tensor(ids[answer_start:], device=device)
    layers = list(range(ad.n_layers)) if layers is None else list(layers)
    out = np.zeros((ad.n_layers, T), dtype=np.float32)
    ref = reference_run(model, ids)
    with _frozen(model), torch.enable_grad():
        for l in layers:
            point_name = COMPONENT_POINTS[component]
            clean: dict = {}
            with torch.no_grad(), hooked(ad, {(point_name, l): recorder(clean, "x", lambda h: h[0].detach())}):
                ad.blocks[l](ref.inputs[l][None], **ref.block_kwargs[l])  # block l alone yields the clean activation
            x = clean["x"].float()
            base = x.mean(0, keepdim=True)
            total = torch.zeros(T, device=device)
            for lo in range(0, steps, batch_size):
                r = torch.arange(lo, min(steps, lo + batch_size), device=device, dtype=torch.float32) / steps
                point = (base + r[:, None, None] * (x - base)).requires_grad_(True)
                swap = {(point_name, l): lambda h, kw, point=point: point.to(h.dtype)}
                with hooked(ad, swap):  # blocks before l are not run: nothing upstream of the swap matters
                    h = ref.inputs[l].expand(len(r), -1, -1)
                    for k in range(l, ad.n_layers):
                        h = hidden_of(ad.blocks[k](h, **ref.block_kwargs[k]))
                logits = ad.unembed(ad.final_norm(h[:, answer_start - 1:T - 1])).float()
                probs = torch.softmax(logits, -1)
                objective = probs.gather(-1, targets.expand(len(r), -1)[..., None]).sum()
                (grad,) = torch.autograd.grad(objective, point)
                total += (grad * (x - base)).sum(-1).sum(0)
            out[l] = (total / steps).detach().cpu().numpy()
    return out
