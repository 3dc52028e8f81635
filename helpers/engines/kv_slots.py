"""The slot engine's KV memory: one preallocated buffer of keys and values, a slot per running row (`SlotCache`), and
where each row's extension stands in its slot (`Slot`). The engine (`helpers.engines.slot`) schedules rows into
slots and runs the passes; this module only keeps and moves their keys and values.
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass

import torch

from helpers.engines.protocol import Extension, Task
from helpers.models.attention import key_format


@dataclass
class Slot:
    """A row's place in the KV buffer, and where the extension under way stands in it."""

    task: Task | None = None  # None: free
    request: Extension | None = None  # the extension under way (None: free, or waiting at a barrier)
    filled: int = 0  # columns holding the keys and values of the row's adopted sequence, all but its last token
    lo: int = 0  # columns of the kept prefix the extension attends over: [0, lo)
    base: int = 0  # first column of the extension's own tokens (after the adopted ones: a rejection overwrites nothing)
    fed: int = 0  # tokens of the extension fed so far

    @property
    def decoding(self) -> bool:
        """Busy with an extension (not free, not waiting at a barrier)."""
        return self.request is not None

    @property
    def used(self) -> int:
        """Columns holding keys and values the row still reads: its adopted tokens and the extension's fed ones."""
        return max(self.filled, self.base + self.fed) if self.task is not None else 0

    def take_place_of(self, other: Slot) -> None:
        """Point at the same columns as `other` (whose keys and values were copied here)."""
        self.filled, self.lo, self.base, self.fed = other.filled, other.lo, other.base, other.fed


class SlotCache:
    """The KV memory of `SlotEngine`: per layer, keys and values of `slots` rows, written in place.

    It stands in for transformers' cache objects: a model's attention layers call `update` with the new keys
    and values of a pass, which go to the columns `cols[b]` of slot `rows[b]`, and get back the first `width`
    columns of the batch's slots to attend over (the engine's mask says which of them each row may see).
    """

    def __init__(self, model, slots: int, length: int):
        config = model.config
        heads = config.num_attention_heads
        kv_heads = getattr(config, "num_key_value_heads", None) or heads
        head_dim = getattr(config, "head_dim", None) or config.hidden_size // heads
        param = next(model.parameters())
        shape = (config.num_hidden_layers, slots, kv_heads, length, head_dim)
        self.keys = torch.zeros(shape, dtype=key_format(model), device=param.device)  # float32 for a bfloat16 CPU model
        self.values = torch.zeros(shape, dtype=param.dtype, device=param.device)
        self.rows = self.cols = None
        self.width = 0
        self.contiguous = True  # the batch is slots 0..B-1: attend over views, no copy

    @property
    def length(self) -> int:
        return self.keys.shape[3]

    def grow(self, length: int) -> None:
        """Make room for `length` columns per slot (doubling, so that growth is rare)."""
        if length > self.length:
            extra = max(length, 2 * self.length) - self.length
            self.keys, self.values = (torch.cat([store, store.new_zeros((*store.shape[:3], extra, store.shape[4]))], 3)
                                      for store in (self.keys, self.values))

    def point(self, rows: torch.Tensor, cols: torch.Tensor, width: int, contiguous: bool) -> None:
        """Where the next pass writes: row b's q new tokens go to columns cols[b] of slot rows[b]."""
        self.rows, self.cols, self.width, self.contiguous = rows[:, None], cols, width, contiguous

    def update(self, key: torch.Tensor, value: torch.Tensor, layer_idx: int, *_, **__):
        # What else transformers passes (cache_kwargs in 4.x and early 5.x, kwargs= from 5.24) is unused here.
        keys, values = self.keys[layer_idx], self.values[layer_idx]
        keys[self.rows, :, self.cols] = key.transpose(1, 2).to(keys.dtype)
        values[self.rows, :, self.cols] = value.transpose(1, 2).to(values.dtype)
        if self.contiguous:
            n = key.shape[0]
            return keys[:n, :, :self.width], values[:n, :, :self.width]
        rows = self.rows[:, 0]
        return keys[rows, :, :self.width], values[rows, :, :self.width]

    def get_seq_length(self, layer_idx: int = 0) -> int:
        return self.width

    def move(self, slot: int, src: int, dst: int, n: int) -> None:
        """Columns src..src+n of a slot, copied to dst..dst+n (an accepted proposal taking its place)."""
        for store in (self.keys, self.values):
            store[:, slot, :, dst:dst + n] = store[:, slot, :, src:src + n].clone()

    def trade(self, a: int, b: int, n_a: int, n_b: int) -> None:
        """Slots a and b trade their first n_a and n_b columns (two rows trading places)."""
        for store in (self.keys, self.values):
            held = store[:, a, :, :n_a].clone()
            store[:, a, :, :n_b] = store[:, b, :, :n_b]
            store[:, b, :, :n_a] = held

    def copy_slot(self, src: int, dst: int, n: int) -> None:
        """The first n columns of slot `src`, copied to slot `dst`."""
        for store in (self.keys, self.values):
            store[:, dst, :, :n] = store[:, src, :, :n]


def cache_keyword(model) -> str:
    """The name a model's forward takes its KV cache by: `cache` from transformers 5.24, `past_key_values` before."""
    return "cache" if "cache" in inspect.signature(model.forward).parameters else "past_key_values"
