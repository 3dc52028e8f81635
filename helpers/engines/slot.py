"""The transformers decode loop: one KV slot per running row, every busy slot decoding together.

`CachedEngine` runs the programs of `helpers.engines.protocol` (plain decodes, power-sampling chains, SMC particle
groups) on a transformers model. Each row owns a slot of a preallocated KV buffer (`SlotCache`); every step feeds
one token per busy slot and keeps only per-token scalars (the chosen token, its log-probability under the model
at T=1 and under the distribution it was drawn from). A cut costs nothing: a proposal's keys and values go after
the row's current ones, and only an accepted proposal is moved into place. A row whose extension ends asks its
program for the next one at once, and a row whose program ends hands its slot to the next waiting row, so the
batch stays full. Each row has its own random generator, so a sample does not depend on which other rows share
its batch, or when. A model that is several truncations at once (`helpers.models.depth_mix`) is told before each
pass which of them each row runs, and gets a shared-prefix slot per truncation.
"""

from __future__ import annotations

import time
from collections import deque

import torch

from helpers.core import pulse
from helpers.engines.categorical import draw_each
from helpers.engines.kv_slots import Slot, SlotCache, cache_keyword
from helpers.engines.protocol import (
    Completion,
    Driver,
    Engine,
    Extension,
    Row,
    Task,
    shared_prefix,
    split_cost,
)


class CachedEngine(Engine):
    """The decode loop: one `Slot` per running row, all busy slots decoding together, finished ones refilled.

    A pass attends over a slot's columns [0, lo) and [base, base + fed].
    """

    prefill_seconds = 0.0  # wall time spent encoding prompts, the rest of a run's time is decoding
    gather_above = 0.125  # run only the busy slots when more than this share of slots 0..hi-1 would ride along

    @torch.inference_mode()
    def run(self, tasks, stops, capacity=None, on_done=None, room=0) -> list[Completion]:
        if not tasks:
            return []
        self.stops = stops
        todo = [Task(i, row, program) for i, (row, program) in enumerate(tasks)]
        n_slots = min(capacity or len(todo), len(todo))
        longest = max(len(t.row.prompt) for t in todo)
        self.route = getattr(self.model, "route_rows", None)  # a depth mix: which model each row of a pass runs
        self.costs = getattr(self.model, "route_costs", None)
        variants = sorted({t.row.variant for t in todo})
        if self.route is None and variants != [0]:
            raise ValueError(f"rows ask for model variants {variants}, but this engine's model is a single model; "
                             "variants need a depth mix (helpers.models.depth_mix.DepthMix).")
        self.spare = {v: n_slots + i for i, v in enumerate(variants)}  # the shared prefix, encoded per variant
        self.cache = SlotCache(self.model, n_slots + len(variants), longest + max(room, 16) + 1)
        self.cache_kw = cache_keyword(self.model)
        self.slots = [Slot() for _ in range(n_slots)]
        self.where: dict[int, int] = {}  # id(row) -> the slot it runs in
        self.eager = getattr(self.model.config, "_attn_implementation", None) == "eager"
        driver = Driver(self, todo, on_done)  # it calls this engine's hooks; the engine never holds it
        self._encode_shared_prefix(todo)
        waiting = deque(todo)
        try:
            for task in self._admit(waiting):
                driver.advance(task, None)
            while self.where:
                if not any(slot.decoding for slot in self.slots):
                    raise driver.stranded()
                for task, extension in self._step():  # the rows whose extension ended in this pass
                    driver.advance(task, extension)
                for task in self._admit(waiting):
                    driver.advance(task, None)
            if waiting:  # only rows a budget's drain holds back are left: they could not finish in time
                raise pulse.BudgetExhausted(f"the run's time budget ends before {len(waiting)} long rows (MH chains) "
                                            "could finish; every finished record is stored, and the same command "
                                            "again goes on from there")
            return driver.results
        finally:  # the KV buffer (GBs at a full batch) goes with the run, not with this engine
            self.cache = None

    # ---- prompts -------------------------------------------------------------------------------------

    def _encode_shared_prefix(self, todo: list[Task]) -> None:
        """Encode the prefix all prompts share (the few-shot examples) once, into the spare last slot."""
        self.shared = shared_prefix([t.row.prompt for t in todo])
        if not self.shared:
            return
        for variant, spare in self.spare.items():  # one model: one variant (0)
            users = [t for t in todo if len(t.row.prompt) > 1 and t.row.variant == variant]
            if not users:
                continue
            start = time.perf_counter()
            self._forward([spare], [self.shared], [0], [variant])
            seconds = time.perf_counter() - start
            split_cost(users, len(self.shared), seconds, passes=1)
            self.prefill += len(self.shared)
            self.passes += 1
            self.prefill_seconds += seconds

    def _admit(self, waiting: deque) -> list[Task]:
        """Give free slots to waiting rows and prefill their prompts in one pass; the rows whose programs the driver
        then starts."""
        free = [s for s, slot in enumerate(self.slots) if slot.task is None]
        if free and waiting and pulse.draining():  # a budget ends soon: admit only rows that can finish by then
            picks, rest = [], deque()
            for task in waiting:
                (picks if len(picks) < len(free) and not task.row.long else rest).append(task)
            waiting.clear()
            waiting.extend(rest)
            group = list(zip(free, picks, strict=False))
        else:
            group = [(s, waiting.popleft()) for s in free[:len(waiting)]]
        if not group:
            self._compact()
            return []
        start = time.perf_counter()
        todo = []
        for s, task in group:
            slot = self.slots[s] = Slot(task)
            self.where[id(task.row)] = s
            prompt, n = task.row.prompt, len(self.shared)
            if n and len(prompt) > 1:  # `_encode_shared_prefix` found these n tokens at the start of every prompt
                self.cache.copy_slot(self.spare[task.row.variant], s, n)
                slot.filled = n
            if len(prompt) - 1 > slot.filled:
                todo.append((s, slot))
        if todo:
            self._forward([s for s, _ in todo], [slot.task.row.prompt[slot.filled:-1] for _, slot in todo],
                          [slot.filled for _, slot in todo], [slot.task.row.variant for _, slot in todo])
            seconds = time.perf_counter() - start
            for (_, slot), share in zip(todo, self._shares([slot.task.row for _, slot in todo]), strict=True):
                new = len(slot.task.row.prompt) - 1 - slot.filled
                slot.task.prefill += new
                slot.task.passes += 1
                slot.task.seconds += seconds * share
                self.prefill += new
            self.passes += 1
            self.prefill_seconds += time.perf_counter() - start
        for s, task in group:
            self.slots[s].filled = len(task.row.prompt) - 1
        return [task for _, task in group]

    def _forward(self, slots: list[int], chunks: list[list[int]], starts: list[int], variants: list[int]) -> None:
        """Encode token chunks into slots (row b's chunk at columns starts[b]..), causally, in one pass."""
        q = max(len(c) for c in chunks)
        width = max(starts) + q
        self.cache.grow(width)
        ids = torch.tensor([c + [0] * (q - len(c)) for c in chunks], device=self.device)
        begin = torch.tensor(starts, device=self.device)[:, None]
        cols = begin + torch.arange(q, device=self.device)
        mask = torch.arange(width, device=self.device) <= cols[:, :, None]  # [B, q, width]
        self.cache.point(torch.tensor(slots, device=self.device), cols, width, contiguous=False)
        self._route(variants)
        self.model(input_ids=ids, attention_mask=self._mask(mask[:, None]), position_ids=cols,
                   use_cache=True, logits_to_keep=1, **{self.cache_kw: self.cache})

    def _route(self, variants: list[int]) -> None:
        """Tell a depth mix which variant each row of the next pass runs (a single model needs no telling)."""
        if self.route is not None:
            self.route(variants)

    def _shares(self, rows: list[Row]) -> list[float]:
        """Each row's share of a pass's wall time: equal, or by what its variant of a depth mix costs alone."""
        weights = [self.costs[r.variant] if self.costs else 1.0 for r in rows]
        return [w / sum(weights) for w in weights]

    def _mask(self, allowed: torch.Tensor) -> torch.Tensor:
        """A boolean mask for SDPA-style attention, or an additive one for the eager implementation."""
        if not self.eager:
            return allowed
        dtype = self.cache.keys.dtype
        return torch.zeros(allowed.shape, dtype=dtype, device=allowed.device).masked_fill(
            ~allowed, torch.finfo(dtype).min)

    # ---- the driver's hooks -----------------------------------------------------------------------------

    def _slot(self, row: Row) -> int:
        return self.where[id(row)]

    def _adopted(self, task: Task, extension: Extension) -> None:
        """The extension's tokens take their place: its keys and values move down to where its prefix ends."""
        s = self._slot(task.row)
        slot = self.slots[s]
        m = len(extension.tokens)
        if m and slot.base != slot.lo:
            self.cache.move(s, slot.base, slot.lo, m)
        slot.filled = slot.lo + m

    def _waiting(self, task: Task) -> None:
        slot = self.slots[self._slot(task.row)]
        slot.lo = slot.base = slot.filled
        slot.fed = 0

    def _requested(self, task: Task, request: Extension) -> None:
        """Point the row's slot at the request: attend over the kept prefix, write after the adopted tokens."""
        slot = self.slots[self._slot(task.row)]
        slot.lo = len(request.row.prompt) + request.keep - 1
        slot.base, slot.fed = slot.filled, 0

    def _submit(self, task: Task, request: Extension) -> None:
        """Make room for the request's tokens; every `_step` then decodes one of them."""
        self.cache.grow(self.slots[self._slot(task.row)].base + request.limit + 1)

    def _released(self, members: list[Task], copies: list[tuple[Row, Row]]) -> None:
        """A destination row gets its source's keys and values; the copies' wall time is split over the group."""
        start = time.perf_counter()
        for source, destination in copies:
            src, dst = self._slot(source), self._slot(destination)
            self.cache.copy_slot(src, dst, self.slots[src].filled)
            self.slots[dst].take_place_of(self.slots[src])
        split_cost(members, 0, time.perf_counter() - start)

    def _ended(self, task: Task) -> None:
        self.slots[self.where.pop(id(task.row))] = Slot()

    def _step(self) -> list[tuple[Task, Extension]]:
        """One forward pass that decodes a token for every busy slot; the rows whose extension ended (a stop token,
        or its limit), for the driver to hand back to their programs.

        The pass runs slots 0..hi-1 as one contiguous batch, free and waiting slots riding along masked, unless more
        than `gather_above` of them would ride along (SMC particles waiting at a barrier for their group): then it
        runs the busy slots alone, their keys and values gathered (a copy per layer, far cheaper than the rows'
        share of the linear layers it saves)."""
        start = time.perf_counter()
        busy = [s for s, slot in enumerate(self.slots) if slot.decoding]
        hi = busy[-1] + 1
        computed = busy if hi - len(busy) > self.gather_above * hi else list(range(hi))
        live = [self.slots[s] if self.slots[s].decoding else None for s in computed]  # None: free or waiting
        reqs = [slot.task.request if slot else None for slot in live]
        # the first token of an extension feeds the prefix's last; later ones feed the extension's previous token
        feed = [(r.tokens[-1] if slot.fed else r.prefix_last) if slot else 0 for slot, r in zip(live, reqs, strict=True)]
        lo = [slot.lo if slot else 0 for slot in live]
        # A row that rides along writes its dummy token where nothing is kept: a free slot anywhere, a row waiting
        # at a barrier just past its adopted tokens (`filled`), where its next extension writes first; never over
        # its own prompt, which the other rows' steps would otherwise overwrite while it waits.
        col = [slot.base + slot.fed if slot else self.slots[s].filled for s, slot in zip(computed, live, strict=True)]
        base = [slot.base if slot else c for slot, c in zip(live, col, strict=True)]
        width = max(col) + 1
        dev = self.device
        lo_t, base_t, col_t = (torch.tensor(x, device=dev)[:, None] for x in (lo, base, col))
        columns = torch.arange(width, device=dev)
        allowed = (columns < lo_t) | ((columns >= base_t) & (columns <= col_t))  # [rows computed, width]
        self.cache.point(torch.tensor(computed, device=dev), col_t, width,
                         contiguous=computed[-1] == len(computed) - 1)
        position = torch.tensor([slot.lo + slot.fed if slot else 0 for slot in live], device=dev)
        self._route([self.slots[s].task.row.variant if self.slots[s].task is not None else 0 for s in computed])
        out = self.model(input_ids=torch.tensor(feed, device=dev)[:, None], attention_mask=self._mask(allowed[:, None, None]),
                         position_ids=position[:, None], use_cache=True, **{self.cache_kw: self.cache})
        self.passes += 1
        pulse.beat(len(busy), len(busy), len(computed))
        at = {s: b for b, s in enumerate(computed)}
        logits = out.logits[:, -1] if len(computed) == len(busy) else out.logits[[at[s] for s in busy], -1]
        rows = [self.slots[s].task.row for s in busy]
        chosen, logp, logq = draw_each(logits.float(), [(r.temperature, r.top_k) for r in rows],
                                       [r.generator for r in rows])
        elapsed, shares = time.perf_counter() - start, self._shares(rows)
        ended = []
        for b, s in enumerate(busy):
            slot, req = self.slots[s], reqs[at[s]]
            task = slot.task
            req.append(chosen[b], logp[b], logq[b])
            slot.fed += 1
            task.decoded += 1
            task.passes += 1
            task.seconds += elapsed * shares[b]
            if chosen[b] in self.stops or len(req.tokens) >= req.limit:
                ended.append((task, req))
        return ended

    def _compact(self) -> None:
        """When no row waits, move the highest rows down into free slots below them.

        A free slot below the highest busy one rides along in every pass at a busy row's cost; moving a row
        costs one copy of its keys and values, about what one pass spends on one row, so it pays at once.
        """
        busy = [s for s, slot in enumerate(self.slots) if slot.task is not None]
        if not busy or len(busy) == busy[-1] + 1:
            return
        free = [s for s in range(busy[-1]) if self.slots[s].task is None]
        for dst, src in zip(free, reversed(busy), strict=False):
            if dst >= src:
                break
            moving = self.slots[src]
            self.cache.copy_slot(src, dst, max(moving.filled, moving.base + moving.fed))
            self.slots[dst], self.slots[src] = moving, Slot()
            self.where[id(moving.task.row)] = dst
