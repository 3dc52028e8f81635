"""One hook mechanism with named points, on which captures, skips, erasures, integrated gradients and the depth mix
(several truncations in one batch) are built.

A point is (name, layer): `block_input` (h_l, the residual block l reads), `attn_output` (a_l), `mlp_output`
(m_l), `block_output` (h_{l+1}) and `final_input` (the residual the final norm reads; layer is ignored). A
handler receives the point's hidden state [B, T, D] and the block's keyword arguments (for `block_input`; an
empty dict elsewhere) and returns a replacement tensor, or None to leave it as it is. Hooks installed by `hooked`
live only inside its `with` block, also when it raises; `install` leaves their removal to the caller.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager

import torch

from helpers.models.adapter import Adapter, hidden_of

POINTS = ("block_input", "attn_output", "mlp_output", "block_output", "final_input")
Handler = Callable[[torch.Tensor, dict], "torch.Tensor | None"]
Point = tuple[str, int]

COMPONENT_POINTS = {"layer": "block_output", "attn": "attn_output", "mlp": "mlp_output"}


def _replace_output(output, new: torch.Tensor):
    return (new, *output[1:]) if isinstance(output, tuple) else new


def _input_hook(handler: Handler, layer: int):
    def hook(module, args, kwargs):
        h = args[0] if args else kwargs["hidden_states"]
        if h.dim() != 3:
            raise RuntimeError(f"block {layer} received a hidden state of shape {tuple(h.shape)}; expected [B, T, D]")
        if args[1:]:
            raise RuntimeError(f"block {layer} got extra positional arguments; this architecture is not supported")
        new = handler(h, kwargs)
        if new is None:
            return None
        return ((new, *args[1:]), kwargs) if args else (args, {**kwargs, "hidden_states": new})
    return hook


def _output_hook(handler: Handler):
    def hook(module, args, output):
        new = handler(hidden_of(output), {})
        return None if new is None else _replace_output(output, new)
    return hook


def _final_hook(handler: Handler):
    def hook(module, args):
        new = handler(args[0], {})
        return None if new is None else (new, *args[1:])
    return hook


def install(ad: Adapter, handlers: Mapping[Point, Handler]) -> list:
    """Register `handlers` at their points and return the handles; the caller removes them (`hooked` does, and a
    model that routes rows for good, `helpers.models.depth_mix`, keeps them for its lifetime)."""
    handles = []
    try:
        for (name, layer), handler in handlers.items():
            if name not in POINTS:
                raise ValueError(f"unknown hook point {name!r}; use one of {POINTS}")
            if name != "final_input" and not 0 <= layer < ad.n_layers:
                raise ValueError(f"layer {layer} is outside 0..{ad.n_layers - 1}")
            if name == "block_input":
                handles.append(ad.blocks[layer].register_forward_pre_hook(_input_hook(handler, layer), with_kwargs=True))
            elif name == "final_input":
                handles.append(ad.final_norm.register_forward_pre_hook(_final_hook(handler)))
            else:
                module = {"attn_output": ad.attention, "mlp_output": ad.mlp}.get(name, lambda i: ad.blocks[i])(layer)
                handles.append(module.register_forward_hook(_output_hook(handler)))
    except BaseException:
        for h in handles:
            h.remove()
        raise
    return handles


@contextmanager
def hooked(ad: Adapter, handlers: Mapping[Point, Handler]) -> Iterator[None]:
    """Install `handlers` at their points for the duration of the block.

    Handlers at one block run in the order block_input, attn_output, mlp_output, block_output, as the forward
    pass reaches them.
    """
    handles = install(ad, handlers)
    try:
        yield
    finally:
        for h in handles:
            h.remove()


def recorder(store: dict, key, transform: Callable[[torch.Tensor], torch.Tensor] | None = None) -> Handler:
    """A handler that keeps the point's tensor (optionally transformed) in store[key] and changes nothing."""
    def handler(h: torch.Tensor, kwargs: dict) -> None:
        store[key] = h if transform is None else transform(h)
    return handler
