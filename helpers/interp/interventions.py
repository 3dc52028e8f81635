"""Causal interventions on the residual stream, many per batch, and what they change downstream.

An edit is applied to one row of a batch that repeats the same sequence:
* `Skip(layer, part, start, stop)` removes block `layer`'s write (part 'layer'), or only its attention or MLP
  output, at positions [start, stop); the other positions run as usual (Csordás et al., section 3.2);
* `Erase(boundary, position)` replaces the residual at one boundary (0 = the embedding, l = the output of block
  l − 1, L = the final residual) and one position with a baseline vector (section 3.3).

`effects` compares each edited row with the clean run: the relative change of every block's contribution
c_l = h_{l+1} − h_l, ‖c − c'‖/‖c‖ per position, and the L2 distance between output distributions per position.
The analyses built on it live in `helpers.interp.skip_effects`, `helpers.interp.erasure` and `helpers.interp.attribution`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch

from helpers.models.adapter import Adapter, adapter, hidden_of
from helpers.models.hooks import hooked

PARTS = ("layer", "attn", "mlp")
EPS = 1e-6


@dataclass(frozen=True)
class Skip:
    """Skip block `layer` (or only its attention / MLP output) at positions [start, stop); stop None = the end."""

    layer: int
    part: str = "layer"
    start: int = 1
    stop: int | None = None


@dataclass(frozen=True)
class Erase:
    """Replace the residual at `boundary` (0..L) and `position` by the baseline vector of that boundary."""

    boundary: int
    position: int


Edit = Skip | Erase | None


@dataclass
class Reference:
    """The clean run of one sequence, everything an edited run needs to resume from any block.

    inputs[l] is the residual entering block l (inputs[L] the final residual), contributions[l] = c_l, probs
    the output distribution, and block_kwargs[l] what the model passed to block l besides the hidden state
    (masks, rotary tables), so a run can start at block l with exactly the same computation.
    """

    inputs: torch.Tensor  # [L + 1, T, D]
    contributions: torch.Tensor  # [L, T, D] float32
    probs: torch.Tensor  # [T, V] float32
    block_kwargs: list[dict]


@dataclass
class Effects:
    """Per edited row: relative change of every block's contribution [B, L, T]; output change norm [B, T]."""

    relative: np.ndarray
    output: np.ndarray


def _check(edits: Sequence[Edit], n_layers: int, T: int, baseline: torch.Tensor | None) -> None:
    for e in edits:
        if isinstance(e, Skip):
            if e.part not in PARTS:
                raise ValueError(f"part must be one of {PARTS}, got {e.part!r}")
            if not 0 <= e.layer < n_layers:
                raise ValueError(f"skipped layer must lie in 0..{n_layers - 1}, got {e.layer}")
            if not 0 <= e.start <= (T if e.stop is None else e.stop) <= T:
                raise ValueError(f"skip positions [{e.start}, {e.stop}) do not fit a sequence of {T} tokens")
        elif isinstance(e, Erase):
            if baseline is None:
                raise ValueError("Erase edits need a baseline (see mean_residual)")
            if not 0 <= e.boundary <= n_layers or not 0 <= e.position < T:
                raise ValueError(f"erase boundary must lie in 0..{n_layers} and position in 0..{T - 1}, got {e}")
        elif e is not None:
            raise TypeError(f"an edit is a Skip, an Erase or None, got {type(e).__name__}")


def _positions(edits: Sequence[Edit], T: int, device) -> dict[tuple[str, int], torch.Tensor]:
    """Masks [B, T, 1] of the edited positions, keyed by (part, layer) for skips and ('erase', boundary)."""
    masks: dict[tuple[str, int], torch.Tensor] = {}
    for b, e in enumerate(edits):
        if isinstance(e, Skip):
            key, lo, hi = (e.part, e.layer), e.start, T if e.stop is None else e.stop
        elif isinstance(e, Erase):
            key, lo, hi = ("erase", e.boundary), e.position, e.position + 1
        else:
            continue
        mask = masks.setdefault(key, torch.zeros((len(edits), T, 1), dtype=torch.bool, device=device))
        mask[b, lo:hi] = True
    return masks


def _edit_handlers(ad: Adapter, masks: dict, baseline: torch.Tensor | None, record: list | None = None) -> dict:
    """Hook handlers that apply the edits and, if `record` is a list, collect each block's contribution in it."""
    inputs: dict[int, torch.Tensor] = {}

    def erase(boundary: int):
        def handler(h: torch.Tensor, kwargs: dict) -> torch.Tensor:
            mask = masks.get(("erase", boundary))
            new = h if mask is None else torch.where(mask, baseline[boundary].to(h.dtype), h)
            if boundary < ad.n_layers:
                inputs[boundary] = new
            return new
        return handler

    def skip_and_record(l: int):
        def handler(out: torch.Tensor, kwargs: dict) -> torch.Tensor:
            mask = masks.get(("layer", l))
            if mask is not None:
                out = torch.where(mask, inputs[l], out)
            if record is not None:
                record.append(out - inputs[l])
            del inputs[l]
            return out
        return handler

    def zero(part: str, l: int):
        def handler(out: torch.Tensor, kwargs: dict) -> torch.Tensor | None:
            mask = masks.get((part, l))
            return None if mask is None else torch.where(mask, torch.zeros((), dtype=out.dtype), out)
        return handler

    handlers: dict = {("final_input", 0): erase(ad.n_layers)}
    for l in range(ad.n_layers):
        handlers.update({("block_input", l): erase(l), ("attn_output", l): zero("attn", l),
                         ("mlp_output", l): zero("mlp", l), ("block_output", l): skip_and_record(l)})
    return handlers


def _first_block(edit: Edit) -> int:
    """The first block whose computation an edit can change (the run starts there)."""
    if isinstance(edit, Skip):
        return edit.layer
    if isinstance(edit, Erase):
        return edit.boundary
    return 0


@torch.no_grad()  # not inference mode: integrated gradients differentiate through runs that reuse these tensors
def reference_run(model, ids: Sequence[int]) -> Reference:
    """The clean run, recording each block's input, contribution and call arguments, and the output distribution."""
    ad = adapter(model)
    x = torch.as_tensor(list(ids), dtype=torch.long, device=next(model.parameters()).device)[None]
    if x.shape[1] == 0:
        raise ValueError("the sequence is empty")
    kwargs: list = [None] * ad.n_layers
    inputs: list = [None] * (ad.n_layers + 1)

    def keep(l: int):
        def handler(h: torch.Tensor, kw: dict) -> None:
            inputs[l] = h
            if l < ad.n_layers:
                kwargs[l] = dict(kw)
        return handler

    handlers = {("block_input", l): keep(l) for l in range(ad.n_layers)}
    handlers[("final_input", 0)] = keep(ad.n_layers)
    with hooked(ad, handlers):
        hidden = model.model(input_ids=x, use_cache=False).last_hidden_state
    for kw in kwargs:
        kw.pop("hidden_states", None)
    stacked = torch.stack([h[0] for h in inputs])
    contributions = (stacked[1:] - stacked[:-1]).float()
    return Reference(stacked, contributions, torch.softmax(ad.unembed(hidden[0]).float(), -1), kwargs)


@torch.inference_mode()
def effects(model, ids: Sequence[int], edits: Sequence[Edit], reference: Reference | None = None,
            baseline: torch.Tensor | None = None, batch_size: int = 1, read_from: Sequence[int] | int = 0,
            read_to: int | None = None) -> Effects:
    """Run every edit on a copy of `ids` and compare it with the clean run, per block and position.

    The output distribution (the costly unembedding) is read only at positions read_from[i]..read_to − 1 of
    edit i; the output change elsewhere is reported as 0.

    An edited run starts at the first block the edit can change, from the clean run's residual and with the
    clean run's block arguments; blocks before it are unchanged by construction (their change is 0). With
    batch_size 1 every block computes exactly what the clean run computed wherever the edit cannot reach, so
    such changes are exactly zero; larger batches are faster but differ from the clean run by float noise.
    """
    ad = adapter(model)
    ids = list(ids)
    T = len(ids)
    _check(edits, ad.n_layers, T, baseline)
    ref = reference or reference_run(model, ids)
    ref_norm = ref.contributions.norm(dim=-1).clamp(min=EPS)  # [L, T]
    relative = np.zeros((len(edits), ad.n_layers, T), dtype=np.float32)
    output = np.zeros((len(edits), T), dtype=np.float32)
    starts = [read_from] * len(edits) if isinstance(read_from, int) else list(read_from)
    read_to = T if read_to is None else read_to
    if len(starts) != len(edits) or not all(0 <= r <= read_to <= T for r in starts):
        raise ValueError(f"read windows must lie within 0..{T} (one start per edit)")
    order = sorted(range(len(edits)), key=lambda i: _first_block(edits[i]))
    for lo in range(0, len(order), batch_size):
        rows = order[lo:lo + batch_size]
        chunk = [edits[i] for i in rows]
        start = min(_first_block(e) for e in chunk)
        record: list = []
        with hooked(ad, _edit_handlers(ad, _positions(chunk, T, ref.inputs.device), baseline, record)):
            h = ref.inputs[start].expand(len(chunk), -1, -1)
            for l in range(start, ad.n_layers):
                h = hidden_of(ad.blocks[l](h, **ref.block_kwargs[l]))
            hidden = ad.final_norm(h)
        for offset, c in enumerate(record):
            l = start + offset
            change = (c.float() - ref.contributions[l]).norm(dim=-1) / ref_norm[l]
            relative[rows, l] = change.cpu().numpy()
        for group in _readout_groups([(b, i, starts[i]) for b, i in enumerate(rows)], read_to):
            # the windows of several rows in one product with the head: a row reading a single position
            # would otherwise stream the whole vocabulary's weights for one vector
            probs = torch.softmax(ad.unembed(torch.cat([hidden[b, lo:read_to] for b, _, lo in group])).float(), -1)
            at = 0
            for _, i, lo in group:
                n = read_to - lo
                output[i, lo:read_to] = (probs[at:at + n] - ref.probs[lo:read_to]).norm(dim=-1).cpu().numpy()
                at += n
    return Effects(relative, output)


READOUT_POSITIONS = 256  # positions per product with the head: a full matrix unit, and 256 × V floats at most


def _readout_groups(windows: list[tuple[int, int, int]], read_to: int) -> list[list[tuple[int, int, int]]]:
    """(batch row, edit, first position) windows ending at `read_to`, grouped so each group's positions fill one
    product with the head (a window longer than the limit forms a group of its own); empty windows are left out."""
    groups: list[list[tuple[int, int, int]]] = []
    size = 0
    for window in windows:
        n = read_to - window[2]
        if n <= 0:
            continue
        if not groups or size + n > READOUT_POSITIONS:
            groups.append([])
            size = 0
        groups[-1].append(window)
        size += n
    return groups
