"""The slot engine's scheduler: one KV slot per running row, every busy slot decoding together.

`SlotEngine` is the book's own engine (`helpers.engines.engine.Engine`, kind 'slot'): it decodes, on a
transformers model, the rows the decode loop (`helpers.engines.loop`) admits, whether their programs are plain
decodes, power-sampling chains or SMC particle groups (the loop runs the programs). It has three small pieces: this
scheduler
(which rows hold which slots, which run in a pass, what each feeds), the KV buffer (`helpers.engines.kv_slots`)
and the model runner (`helpers.engines.slot_runner`). Each row owns a slot of a preallocated KV buffer; every step
feeds one token per busy slot and keeps only per-token scalars (the chosen token, its log-probability under the
model at T=1 and under the distribution it was drawn from). A cut costs nothing: a proposal's keys and values go
after the row's current ones, and only an accepted proposal is moved into place. A row whose extension ends is
handed back to the loop in the same step, which answers with its program's next extension, and a row whose program
has ended gives its slot to the next waiting row, so the batch stays full. Each row has its own random generator, so a sample does not depend on which other rows share
its batch, or when. An engine given a depth mix (several truncations at once, `helpers.models.depth_mix`) tells it
before each pass which of them each row runs, and keeps a shared-prefix slot per truncation.
"""

from __future__ import annotations

import time
from collections import deque

import torch

from helpers.engines.categorical import draw_each
from helpers.engines.engine import Engine
from helpers.engines.kv_slots import Slot, SlotCache
from helpers.engines.protocol import Charge, Extension, Row, Task, shared_prefix, split_evenly
from helpers.engines.slot_runner import SlotRunner


class SlotEngine(Engine):
    """The decode loop's scheduler: one `Slot` per running row, all busy slots decoding together, finished ones
    refilled. A pass attends over a slot's columns [0, lo) and [base, base + fed].
    """

    gather_above = 0.125  # run only the busy slots when more than this share of slots 0..hi-1 would ride along
    pack = True  # run them as slots 0..k-1, after moving them there (False: in place, their keys and values gathered)
    prefill_tokens = 8192  # most tokens, padding included, in one prompt pass: rows of like length share a pass

    def open_run(self, tasks, stops, capacity, room) -> list[Charge]:
        """Allocate the run's KV buffer (a slot per row that runs at once, and one per variant for the prefix all
        prompts share) and encode that prefix."""
        super().open_run(tasks, stops, capacity, room)
        n_slots = min(capacity or len(tasks), len(tasks))
        longest = max(len(t.row.prompt) for t in tasks)
        self.costs = self.mix.costs if self.mix is not None else None
        self.refuse_variants_without_mix(tasks)
        variants = sorted({t.row.variant for t in tasks})
        self.spare = {v: n_slots + i for i, v in enumerate(variants)}  # the shared prefix, encoded per variant
        self.cache = SlotCache(self.model, n_slots + len(variants), longest + max(room, 16) + 1)
        self.runner = SlotRunner(self.model, self.cache, self.mix.route if self.mix is not None else None)
        self.slots = [Slot() for _ in range(n_slots)]
        self.where: dict[int, int] = {}  # id(row) -> the slot it runs in
        return self._encode_shared_prefix(tasks)

    def close_run(self) -> None:
        self.cache = self.runner = None
        self.slots, self.where = [], {}

    # ---- prompts -------------------------------------------------------------------------------------

    def _encode_shared_prefix(self, todo: list[Task]) -> list[Charge]:
        """Encode the prefix all prompts share (the few-shot examples) once, into the spare last slot."""
        self.shared = shared_prefix([t.row.prompt for t in todo])
        costs = []
        for variant, spare in self.spare.items() if self.shared else ():  # one model: one variant (0)
            users = [t for t in todo if len(t.row.prompt) > 1 and t.row.variant == variant]
            if users:
                with torch.inference_mode():
                    start = time.perf_counter()
                    self.runner.encode([spare], [self.shared], [0], [variant])
                costs.append(Charge(users, time.perf_counter() - start, split_evenly(len(self.shared), len(users)),
                                    model_passes=1, prompts=True))
        return costs

    def admit(self, waiting: deque[Task]) -> tuple[list[Task], Charge | None]:
        """Give free slots to waiting rows and prefill their prompts, in passes of rows of like length."""
        free = [s for s, slot in enumerate(self.slots) if slot.task is None]
        group = [(s, waiting.popleft()) for s in free[:len(waiting)]]
        if not group:
            self._compact()
            return [], None
        start = time.perf_counter()
        todo, contexts = [], {}
        for s, task in group:
            slot = self.slots[s] = Slot(task)
            self.where[id(task.row)] = s
            prompt, n = task.row.prompt, len(self.shared)
            if n and len(prompt) > 1:  # `_encode_shared_prefix` found these n tokens at the start of every prompt
                self.cache.copy_slot(self.spare[task.row.variant], s, n)
                slot.filled = n
            contexts[s] = _context(task.row)
            if len(contexts[s]) - 1 > slot.filled:
                todo.append((s, slot))
        chunks = [contexts[s][slot.filled:-1] for s, slot in todo]
        passes = prompt_passes([len(c) for c in chunks], self.prefill_tokens)
        with torch.inference_mode():
            for part in passes:
                self.runner.encode([todo[i][0] for i in part], [chunks[i] for i in part],
                                   [todo[i][1].filled for i in part], [todo[i][1].task.row.variant for i in part])
        cost = Charge([slot.task for _, slot in todo], time.perf_counter() - start, [len(c) for c in chunks],
                      model_passes=len(passes), weights=self._shares([slot.task.row for _, slot in todo]), prompts=True) if todo else None
        for s, _ in group:
            self.slots[s].filled = len(contexts[s]) - 1
        return [task for _, task in group], cost

    def _shares(self, rows: list[Row]) -> list[float]:
        """Each row's weight in a pass's wall time: equal, or what its variant of a depth mix costs alone."""
        return [self.costs[r.variant] if self.costs else 1.0 for r in rows]

    # ---- what becomes of rows -------------------------------------------------------------------------

    def _slot(self, row: Row) -> int:
        return self.where[id(row)]

    def extend(self, task: Task, request: Extension) -> None:
        """Point the row's slot at the request (attend over the kept prefix, write after the adopted tokens) and
        make room for its tokens; every `step` then decodes one of them."""
        slot = self.slots[self._slot(task.row)]
        slot.lo = len(request.row.prompt) + request.keep - 1
        slot.base, slot.fed = slot.filled, 0
        slot.request = request if request.limit > 0 else None  # one of no tokens the loop answers at once
        if request.limit > 0:
            self.cache.grow(slot.base + request.limit + 1)

    def adopt(self, task: Task, extension: Extension) -> None:
        """The extension's tokens take their place: its keys and values move down to where its prefix ends."""
        s = self._slot(task.row)
        slot = self.slots[s]
        m = len(extension.tokens)
        if m and slot.base != slot.lo:
            self.cache.move(s, slot.base, slot.lo, m)
        slot.filled = slot.lo + m

    def park(self, task: Task) -> None:
        slot = self.slots[self._slot(task.row)]
        slot.lo = slot.base = slot.filled
        slot.fed, slot.request = 0, None

    def copy(self, copies: list[tuple[Row, Row]]) -> None:
        """A destination row gets its source's keys and values."""
        for source, destination in copies:
            src, dst = self._slot(source), self._slot(destination)
            self.cache.copy_slot(src, dst, self.slots[src].filled)
            self.slots[dst].take_place_of(self.slots[src])

    def end(self, task: Task) -> None:
        self.slots[self.where.pop(id(task.row))] = Slot()

    def decoding(self) -> bool:
        return any(slot.decoding for slot in self.slots)

    # ---- a pass ----------------------------------------------------------------------------------------

    @torch.inference_mode()
    def step(self) -> tuple[list[tuple[Task, Extension]], Charge]:
        """One forward pass that decodes a token for every busy slot; the rows whose extension ended.

        The pass runs slots 0..hi-1 as one contiguous batch, free and waiting slots riding along masked, unless more
        than `gather_above` of them would ride along (SMC particles waiting at a barrier for their group): then it
        runs the busy slots alone (the rows riding along would cost their share of the linear layers). With `pack`
        it first moves them into the lowest slots (`_pack`: a copy of each moved row's keys and values, once), so
        that the pass attends over views of the buffer; else it runs them where they are, their keys and values
        gathered in every layer of every pass until the waiting rows leave."""
        start = time.perf_counter()
        busy = [s for s, slot in enumerate(self.slots) if slot.decoding]
        computed = list(range(busy[-1] + 1))  # slots 0..hi-1, every one not busy riding along
        if len(computed) - len(busy) > self.gather_above * len(computed):
            busy = computed = self._pack(busy) if self.pack else busy
        live = [self.slots[s] if self.slots[s].decoding else None for s in computed]  # None: free or waiting
        reqs = [slot.request if slot else None for slot in live]
        # the first token of an extension feeds the prefix's last; later ones feed the extension's previous token
        feed = [(r.tokens[-1] if slot.fed else r.prefix_last) if slot else 0 for slot, r in zip(live, reqs, strict=True)]
        # A row that rides along writes its dummy token where nothing is kept: a free slot anywhere, a row waiting
        # at a barrier just past its adopted tokens (`filled`), where its next extension writes first; never over
        # its own prompt, which the other rows' steps would otherwise overwrite while it waits.
        col = [slot.base + slot.fed if slot else self.slots[s].filled for s, slot in zip(computed, live, strict=True)]
        logits = self.runner.decode(
            computed, feed, [slot.lo if slot else 0 for slot in live],
            [slot.base if slot else c for slot, c in zip(live, col, strict=True)], col,
            [self.slots[s].task.row.variant if self.slots[s].task is not None else 0 for s in computed])
        at = {s: b for b, s in enumerate(computed)}
        if len(computed) != len(busy):
            logits = logits[[at[s] for s in busy]]
        tasks = [self.slots[s].task for s in busy]
        rows = [task.row for task in tasks]
        chosen, logp, logq = draw_each(logits.float(), [(r.temperature, r.top_k) for r in rows],
                                       [r.generator for r in rows])
        ended = []
        for b, s in enumerate(busy):
            slot, req = self.slots[s], reqs[at[s]]
            req.append(chosen[b], logp[b], logq[b])
            slot.fed += 1
            if chosen[b] in self.stops or len(req.tokens) >= req.limit:
                ended.append((slot.task, req))
                slot.request = None  # the loop hands it to the row's program, which asks for what comes next
        return ended, Charge(tasks, time.perf_counter() - start, weights=self._shares(rows), tokens=len(busy),
                             computed=len(computed))

    def _pack(self, busy: list[int]) -> list[int]:
        """Move the decoding rows into slots 0..k-1 (k of them), each trading places with a waiting row or a free slot
        below k; the decoding slots after the move. Only rows out of place move, so a pass after one that packed
        moves only the rows that began or stopped waiting since."""
        k = len(busy)
        for hole, row in zip([s for s in range(k) if not self.slots[s].decoding], [s for s in busy if s >= k],
                             strict=True):
            self._trade(hole, row)
        return list(range(k))

    def _trade(self, a: int, b: int) -> None:
        """Slots a and b trade their rows: their keys and values, their places, and the rows' entries in `where`."""
        first, second = self.slots[a], self.slots[b]
        self.cache.trade(a, b, first.used, second.used)
        self.slots[a], self.slots[b] = second, first
        for s in (a, b):
            if self.slots[s].task is not None:
                self.where[id(self.slots[s].task.row)] = s

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
            self._trade(dst, src)  # a free slot holds nothing to move up


def _context(row: Row) -> list[int]:
    """What a row's slot holds keys and values for when it is admitted (all but the last token is encoded): its
    prompt, and the tokens a row restored from a checkpoint decoded before (`Row.restored`)."""
    return row.prompt + row.tokens if row.tokens else row.prompt


def prompt_passes(lengths: list[int], most: int) -> list[list[int]]:
    """Split rows (by index) into prompt passes of at most `most` tokens each once padded to the pass's longest row,
    longest rows first, so that a pass pads each row only to rows of about its length (a row restored from a
    checkpoint re-encodes the tokens it decoded: its length is far from a fresh prompt's) and a pass's activations
    stay bounded. A row longer than `most` runs alone."""
    passes: list[list[int]] = []
    for i in sorted(range(len(lengths)), key=lambda i: -lengths[i]):
        if passes and (len(passes[-1]) + 1) * lengths[passes[-1][0]] <= most:
            passes[-1].append(i)
        else:
            passes.append([i])
    return passes
