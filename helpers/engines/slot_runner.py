"""The slot engine's model runner: one forward pass over some slots of the KV buffer, with the attention mask and
positions each row needs. It knows nothing of rows or programs: the scheduler (`helpers.engines.slot`) says which
slots run, what each feeds and which of its columns it sees; the KV buffer (`helpers.engines.kv_slots`) keeps the
keys and values.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from helpers.engines.kv_slots import SlotCache, cache_keyword
from helpers.models.attention import local_window


class SlotRunner:
    """Runs a transformers model on a `SlotCache`: prompt chunks (`encode`) or one token per row (`decode`)."""

    def __init__(self, model, cache: SlotCache, route: Callable[[list[int]], None] | None = None):
        self.model, self.cache = model, cache
        self.device = next(model.parameters()).device
        self.cache_kw = cache_keyword(model)
        self.eager = getattr(model.config, "_attn_implementation", None) == "eager"
        self.route = route  # a depth mix's `route`: which truncation each row of a pass runs
        self.window = local_window(model.config)  # sliding-window layers (Gemma 3) see only this many positions back

    def encode(self, slots: list[int], chunks: list[list[int]], starts: list[int], variants: list[int]) -> None:
        """Encode token chunks into slots (row b's chunk at columns starts[b]..), causally, in one pass."""
        q = max(len(c) for c in chunks)
        width = max(starts) + q
        self.cache.grow(width)
        ids = torch.tensor([c + [0] * (q - len(c)) for c in chunks], device=self.device)
        begin = torch.tensor(starts, device=self.device)[:, None]
        cols = begin + torch.arange(q, device=self.device)
        allowed = torch.arange(width, device=self.device) <= cols[:, :, None]  # [B, q, width]
        self.cache.point(torch.tensor(slots, device=self.device), cols, width, contiguous=False)
        self._route(variants)
        positions = torch.arange(width, device=self.device)  # a prompt's columns are its positions
        self.model(input_ids=ids, attention_mask=self._masks(allowed[:, None], cols[:, None, :, None], positions),
                   position_ids=cols,
                   use_cache=True, logits_to_keep=1, **{self.cache_kw: self.cache})

    def decode(self, slots: list[int], feed: list[int], lo: list[int], base: list[int], col: list[int],
               variants: list[int]) -> torch.Tensor:
        """One token per slot: row b feeds `feed[b]`, written at column col[b], attending over columns [0, lo[b])
        and [base[b], col[b]], at position lo[b] + col[b] - base[b]; the last logits of each row, [B, V]."""
        dev = self.device
        lo_t, base_t, col_t = (torch.tensor(x, device=dev)[:, None] for x in (lo, base, col))
        width = max(col) + 1
        columns = torch.arange(width, device=dev)
        allowed = (columns < lo_t) | ((columns >= base_t) & (columns <= col_t))  # [rows, width]
        self.cache.point(torch.tensor(slots, device=dev), col_t, width, contiguous=slots[-1] == len(slots) - 1)
        self._route(variants)
        here = lo_t + col_t - base_t  # the fed token's position: the kept prefix, then the extension's own tokens
        positions = torch.where(columns < lo_t, columns, lo_t + columns - base_t)  # each column's, [rows, width]
        mask = self._masks(allowed[:, None, None], here[:, None, :, None], positions[:, None, None])
        out = self.model(input_ids=torch.tensor(feed, device=dev)[:, None], attention_mask=mask, position_ids=here,
                         use_cache=True, **{self.cache_kw: self.cache})
        return out.logits[:, -1]

    def _route(self, variants: list[int]) -> None:
        """Tell a depth mix which variant each row of the next pass runs (a single model needs no telling)."""
        if self.route is not None:
            self.route(variants)

    def _masks(self, allowed: torch.Tensor, query: torch.Tensor, keys: torch.Tensor) -> torch.Tensor | dict:
        """The pass's mask; for a model with sliding-window layers, one per kind of layer, as transformers takes them
        (a dict by layer type): a sliding layer's also hides every key `window` or more positions before its query
        (`query`, `keys`: positions, broadcasting against `allowed`), as the model's own masks do."""
        if self.window is None:
            return self._mask(allowed)
        near = keys > query - self.window
        return {"full_attention": self._mask(allowed), "sliding_attention": self._mask(allowed & near)}

    def _mask(self, allowed: torch.Tensor) -> torch.Tensor:
        """A boolean mask for SDPA-style attention, or an additive one for the eager implementation."""
        if not self.eager:
            return allowed
        dtype = self.cache.values.dtype  # the model's format (keys may be kept in float32)
        return torch.zeros(allowed.shape, dtype=dtype, device=allowed.device).masked_fill(
            ~allowed, torch.finfo(dtype).min)
