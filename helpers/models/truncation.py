"""Shallower models that share the original's weights: naive truncation and stitch-and-preserve.

Depth = the number of transformer blocks the model runs.

* `naive_truncate(model, d)` keeps blocks 0..d-1, then the final norm and the unembedding.
* `stitch_and_preserve(model, d)` keeps blocks 0..d-2 and re-attaches the original last block L-1, then
  the final norm and the unembedding (the report's method, section 4.1.2).

The truncated model is a new module tree whose parameters are the original tensors (no copy). Only the
bookkeeping is new: block and attention objects that carry their new position (the KV cache indexes
layers by it), their own hook tables, and a config whose layer count and per-layer lists match. The
original model is never modified and stays usable side by side. This module is the surgery on a transformers
module only; which blocks a cut keeps is recorded by the handle that asked for it
(`helpers.models.handle.ModelHandle.at_depth`).
"""

from __future__ import annotations

import copy
from collections import OrderedDict

from torch import nn

from helpers.models.adapter import adapter

METHODS = ("stitch", "naive")

_HOOK_SLOTS = tuple(k for k, v in vars(nn.Module()).items() if "hook" in k and isinstance(v, dict))


def rebind(module: nn.Module) -> nn.Module:
    """A new module object over the same parameters, buffers and children, with hook tables of its own."""
    clone = module.__class__.__new__(module.__class__)
    clone.__dict__ = dict(module.__dict__)
    for slot in _HOOK_SLOTS:
        clone.__dict__[slot] = OrderedDict()
    clone._modules = OrderedDict(module._modules)
    clone._parameters = OrderedDict(module._parameters)
    clone._buffers = OrderedDict(module._buffers)
    return clone


def lowest_depth(method: str) -> int:
    """The fewest blocks a truncation keeps: a stitched model runs at least one early block and the last."""
    return 2 if method == "stitch" else 1


def kept_blocks(n_layers: int, depth: int, method: str) -> list[int]:
    """Indices of the original blocks a truncated model runs, in order; invalid depths raise ValueError."""
    if method not in METHODS:
        raise ValueError(f"method must be one of {METHODS}, got {method!r}")
    low = lowest_depth(method)
    if not isinstance(depth, int) or isinstance(depth, bool) or not low <= depth <= n_layers:
        raise ValueError(f"depth for {method} truncation must be an integer in {low}..{n_layers} "
                         f"(this model has {n_layers} blocks), got {depth!r}")
    if method == "naive":
        return list(range(depth))
    return [*range(depth - 1), n_layers - 1]


def truncate(model, depth: int, method: str = "stitch"):
    """A model that runs `kept_blocks(L, depth, method)` and shares every weight with `model`."""
    ad = adapter(model)
    kept = kept_blocks(ad.n_layers, depth, method)
    config = copy.deepcopy(model.config)
    config.num_hidden_layers = len(kept)
    for name in ("layer_types", "max_window_layers_types"):  # per-layer lists follow the kept blocks
        values = getattr(config, name, None)
        if isinstance(values, list | tuple) and len(values) == ad.n_layers:
            setattr(config, name, [values[i] for i in kept])

    blocks = []
    for new_index, old_index in enumerate(kept):
        block = rebind(ad.blocks[old_index])
        attention = rebind(block.self_attn)
        attention.layer_idx = new_index  # the KV cache slot of this block in the truncated model
        block._modules["self_attn"] = attention
        if hasattr(block, "layer_idx"):
            block.layer_idx = new_index
        blocks.append(block)

    base = rebind(model.model)
    base._modules["layers"] = nn.ModuleList(blocks)
    base.config = config
    truncated = rebind(model)
    truncated._modules["model"] = base
    truncated.config = config
    truncated.generation_config = copy.deepcopy(model.generation_config)
    return truncated


def naive_truncate(model, depth: int):
    """Keep blocks 0..depth-1 (valid depths 1..L); shares weights with `model`."""
    return truncate(model, depth, "naive")


def stitch_and_preserve(model, depth: int):
    """Keep blocks 0..depth-2 plus the original last block (valid depths 2..L); shares weights with `model`."""
    return truncate(model, depth, "stitch")


def critical_depth(accuracy_by_depth: dict[int, float], full_accuracy: float, fraction: float = 0.5) -> int | None:
    """Smallest depth from which every deeper depth keeps at least `fraction` of the full model's accuracy.

    None when the full model itself scores 0 (nothing can collapse).
    """
    if full_accuracy <= 0:
        return None
    depths = sorted(accuracy_by_depth)
    critical = None
    for depth in reversed(depths):
        if accuracy_by_depth[depth] >= fraction * full_accuracy:
            critical = depth
        else:
            break
    return critical


def critical_is_bound(accuracy_by_depth: dict[int, float], critical: int | None, method: str = "stitch") -> bool:
    """Whether `critical_depth` is only an upper bound: the shallowest depth tested still keeps the share, so the
    depth where accuracy falls below it was never reached and the true critical depth is this one or shallower. A
    critical depth at the full depth, or at the shallowest the cut allows (`lowest_depth`), bounds nothing."""
    lowest = lowest_depth(method)
    return critical is not None and critical == min(accuracy_by_depth) and lowest < critical < max(accuracy_by_depth)
