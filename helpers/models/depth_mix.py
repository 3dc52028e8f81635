"""Several truncations of one model in one batch: every row of a forward pass runs the variant (method, depth) it
was routed to, so that a depth sweep decodes in one engine run with a full batch instead of one small run per depth.

Every row goes through all L blocks; a variant of `helpers.models.truncation` is read off on the way:

* naive at depth d: the final norm reads h_d (the output of block d-1) in place of h_L;
* stitch at depth d: block L-1 reads h_{d-1} (the output of block d-2) in place of h_{L-1};
* full depth: nothing changes.

A row attends over its own keys and values only, so the blocks it runs past its variant, whose outputs are
dropped, change nothing it computes: its tokens are the truncated model's, up to the rounding of another batch.
Its keys and values at the last block are those the stitched model writes there, from h_{d-1}. The price is those
extra blocks, L - d per row: little for a sweep of the last few depths, and paid back many times over on a CPU,
where a batch of 16 rows gets a third of what the matrix unit gives 128.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from helpers.models.adapter import adapter
from helpers.models.hooks import install
from helpers.models.truncation import kept_blocks, rebind, truncate

Variant = tuple[str, int]  # (method, depth) of `helpers.models.truncation`


class DepthMix:
    """One model's `variants` in one batch, given to an engine in place of a model (`helpers.engines.loop.Engine`).
    `model` is what the engine runs (a full-depth copy that shares every
    weight and has hook tables of its own); `route(v)` says, before each forward pass, which variant each of its
    rows runs (an index into `variants`); `costs[i]` is variant i's share of a full-depth pass per token (the
    weights of the blocks it keeps and of the output head), by which an engine splits a pass's wall time over
    its rows."""

    def __init__(self, model, variants: Sequence[Variant]):
        if not variants:
            raise ValueError("a depth mix needs at least one variant (method, depth)")
        ad = adapter(model)
        self.n_layers = L = ad.n_layers
        self.variants = [(method, int(depth)) for method, depth in variants]
        kept = [kept_blocks(L, depth, method) for method, depth in self.variants]  # checks every variant
        self.model = truncate(model, L, "naive")  # all L blocks, hook tables of its own
        base = self.model.model
        base._modules["norm"] = rebind(base.norm)  # the final norm's hook goes on this copy, not the original's
        mixed = adapter(self.model)
        # variant i reads the output of block `source[i]` at the last block's input (stitch) or the final norm's
        self.stitch_from = {i: d - 2 for i, (m, d) in enumerate(self.variants) if m == "stitch" and d < L}
        self.naive_from = {i: d - 1 for i, (m, d) in enumerate(self.variants) if m == "naive" and d < L}
        block = [sum(p.numel() for p in b.parameters()) for b in mixed.blocks]
        head = sum(p.numel() for p in mixed.unembed.parameters())
        self.costs = [(sum(block[k] for k in ks) + head) / (sum(block) + head) for ks in kept]
        self._saved: dict[tuple[str, int], torch.Tensor] = {}
        self._rows: dict[tuple[str, int], torch.Tensor] = {}  # (kind, block) -> batch rows that read its output
        handlers = {("block_output", k): self._keeper(k)
                    for k in {*self.stitch_from.values(), *self.naive_from.values()}}
        handlers[("block_input", L - 1)] = self._putter("stitch")
        handlers[("final_input", 0)] = self._putter("naive")
        self._handles = install(mixed, handlers)

    def route(self, variants: Sequence[int]) -> None:
        """Batch row b of the next forward pass runs variant `variants[b]`."""
        device = next(self.model.parameters()).device
        rows: dict[tuple[str, int], list[int]] = {}
        for b, v in enumerate(variants):
            if v in self.stitch_from:
                rows.setdefault(("stitch", self.stitch_from[v]), []).append(b)
            elif v in self.naive_from:
                rows.setdefault(("naive", self.naive_from[v]), []).append(b)
            elif not 0 <= v < len(self.variants):
                raise ValueError(f"row {b} is routed to variant {v}; this mix has variants 0..{len(self.variants) - 1}")
        self._rows = {key: torch.tensor(r, device=device) for key, r in rows.items()}
        self._saved = {}

    def _keeper(self, block: int):
        def keep(h: torch.Tensor, _kwargs: dict) -> None:
            for kind in ("stitch", "naive"):
                rows = self._rows.get((kind, block))
                if rows is not None:
                    self._saved[(kind, block)] = h.index_select(0, rows)
        return keep

    def _putter(self, kind: str):
        def put(h: torch.Tensor, _kwargs: dict) -> torch.Tensor | None:
            mine = [(rows, self._saved[key]) for key, rows in self._rows.items() if key[0] == kind]
            if not mine:
                return None
            h = h.clone()
            for rows, saved in mine:
                h.index_copy_(0, rows, saved)
            return h
        return put

    def close(self) -> None:
        """Remove the routing hooks (they live on the copy only; the original model never had them)."""
        for h in self._handles:
            h.remove()
        self._handles = []
