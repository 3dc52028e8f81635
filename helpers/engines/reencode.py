"""The re-encoding engine ('reencode'): every pass re-encodes each decoding row's prompt and prefix, keeping nothing
between passes, so it is the check on the engines that keep a cache, and it runs models without a KV cache.

Every row with an extension under way decodes one token per `step`, as on the slot engine; rows whose sequences
are equally long share a forward pass (no padding, no mask: each row is encoded exactly as it would be alone), so a
step costs one pass per distinct length, not one per row. A row's draw depends only on its logits and its own
generator (`helpers.engines.categorical`), so which rows share a step changes no sample.
"""

from __future__ import annotations

import time
from collections import deque

import torch

from helpers.engines.categorical import draw_each
from helpers.engines.engine import Engine
from helpers.engines.protocol import Charge, Extension, Task


class ReencodeEngine(Engine):
    """Keeps nothing between passes: each step re-encodes every decoding row's whole sequence for its next token."""

    def open_run(self, tasks, stops, capacity, room) -> list[Charge]:
        super().open_run(tasks, stops, capacity, room)
        self.capacity = capacity or len(tasks)
        self.held = 0  # rows admitted and not yet ended (a row waiting at a barrier keeps its place)
        self.under_way: list[tuple[Task, Extension]] = []
        return []

    def admit(self, waiting: deque[Task]) -> tuple[list[Task], Charge | None]:
        taken = []
        while waiting and self.held < self.capacity:
            taken.append(waiting.popleft())
            self.held += 1
        return taken, None

    def extend(self, task: Task, request: Extension) -> None:
        if request.limit > 0:
            self.under_way.append((task, request))

    def end(self, task: Task) -> None:
        self.held -= 1

    def decoding(self) -> bool:
        return bool(self.under_way)

    @torch.inference_mode()
    def step(self) -> tuple[list[tuple[Task, Extension]], Charge]:
        """One token for every row with an extension under way, each row's whole sequence encoded afresh; the rows
        whose extension ended (a stop token, or its limit)."""
        start = time.perf_counter()
        seqs = [req.row.prompt + req.row.tokens[:req.keep] + req.tokens for _, req in self.under_way]
        by_length: dict[int, list[int]] = {}
        for b, seq in enumerate(seqs):
            by_length.setdefault(len(seq), []).append(b)
        order = [b for rows in by_length.values() for b in rows]
        parts = []
        for rows in by_length.values():
            if self.mix is not None:  # a depth mix: each row runs its own truncation
                self.mix.route([self.under_way[b][1].row.variant for b in rows])
            ids = torch.tensor([seqs[b] for b in rows], device=self.device)
            parts.append(self.model(input_ids=ids, use_cache=False, logits_to_keep=1).logits[:, -1].float())
        logits = torch.cat(parts)[torch.tensor(order).argsort()]  # back in the rows' order
        rows = [req.row for _, req in self.under_way]
        chosen, logp, logq = draw_each(logits, [(r.temperature, r.top_k) for r in rows], [r.generator for r in rows])
        ended, going_on = [], []
        for (task, req), token, lp, lq in zip(self.under_way, chosen, logp, logq, strict=True):
            req.append(token, lp, lq)
            (ended if token in self.stops or len(req.tokens) >= req.limit else going_on).append((task, req))
        tasks = [task for task, _ in self.under_way]
        self.under_way = going_on
        return ended, Charge(tasks, time.perf_counter() - start, [len(s) - 1 for s in seqs],
                             model_passes=len(by_length), weights=[len(s) for s in seqs], tokens=len(tasks))

    def close_run(self) -> None:
        self.under_way = []
