"""The re-encoding engine ('reencode'): every pass re-encodes each decoding row's prompt and prefix, keeping nothing
between passes, so it is the check on the engines that keep a cache, and it runs models without a KV cache (any
module whose `model(input_ids=..., use_cache=False, logits_to_keep=1)` returns `.logits` of shape [rows, ≥ 1, V]).

Every row with an extension under way decodes one token per `step`, as on the slot engine; rows whose sequences
are equally long share a forward pass (no padding, no mask: each row is encoded as it would be alone, up to the
rounding of another batch size), at most `pass_tokens` tokens a pass, so a step costs about one pass per distinct
length, not one per row. A row's draw depends only on its logits and its own generator
(`helpers.engines.categorical`), so on a model whose numbers do not depend on the batch (the toy model's table)
which rows share a step changes no sample.
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

    pass_tokens = 8192  # most tokens in one forward pass: rows of one length beyond it split into several passes

    def open_run(self, tasks, stops, capacity, room) -> list[Charge]:
        super().open_run(tasks, stops, capacity, room)
        self.refuse_variants_without_mix(tasks)
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
        whose extension ended (a stop token, or its limit). A pass's wall time is charged to its rows by the tokens
        each encoded, times what its variant of a depth mix costs."""
        start = time.perf_counter()
        rows = [req.row for _, req in self.under_way]
        seqs = [req.row.prompt + req.row.tokens[:req.keep] + req.tokens for _, req in self.under_way]
        by_length: dict[int, list[int]] = {}
        for b, seq in enumerate(seqs):
            by_length.setdefault(len(seq), []).append(b)
        passes = [group[i:i + max(1, self.pass_tokens // n)] for n, group in by_length.items()
                  for i in range(0, len(group), max(1, self.pass_tokens // n))]
        parts = []
        for group in passes:
            if self.mix is not None:  # a depth mix: each row runs its own truncation
                self.mix.route([rows[b].variant for b in group])
            ids = torch.tensor([seqs[b] for b in group], device=self.device)
            parts.append(self.model(input_ids=ids, use_cache=False, logits_to_keep=1).logits[:, -1].float())
        order = torch.tensor([b for group in passes for b in group])
        logits = torch.cat(parts)[order.argsort()]  # back in the rows' order
        chosen, logp, logq = draw_each(logits, [(r.temperature, r.top_k) for r in rows], [r.generator for r in rows])
        ended, going_on = [], []
        for (task, req), token, lp, lq in zip(self.under_way, chosen, logp, logq, strict=True):
            req.append(token, lp, lq)
            (ended if token in self.stops or len(req.tokens) >= req.limit else going_on).append((task, req))
        tasks = [task for task, _ in self.under_way]
        self.under_way = going_on
        cost = [self.mix.costs[r.variant] if self.mix is not None else 1.0 for r in rows]
        return ended, Charge(tasks, time.perf_counter() - start, [len(s) - 1 for s in seqs], model_passes=len(passes),
                             weights=[len(s) * c for s, c in zip(seqs, cost, strict=True)], tokens=len(tasks))

    def close_run(self) -> None:
        self.under_way = []
