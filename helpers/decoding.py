"""The book's one decode loop, written out so it can be read top to bottom.

Every method decodes through an engine that runs *programs*: a program is a generator that asks for
extensions of its row (`Extension`: keep the first k generated tokens, then decode at most `limit` more) and
gets each one back filled in. Plain decoding is a program of one extension; a power-sampling chain asks for
one per block and one per Metropolis–Hastings move (`helpers.power`).

`CachedEngine` runs many programs at once. Each row owns a slot of a preallocated KV buffer (`SlotCache`);
every step feeds one token per busy slot and keeps only per-token scalars (the chosen token, its
log-probability under the model at T=1 and under the distribution it was drawn from). A cut costs nothing:
a proposal's keys and values go after the row's current ones, and only an accepted proposal is moved into
place. A row whose extension ends asks its program for the next one at once, and a row whose program ends
hands its slot to the next waiting row, so the batch stays full. Each row has its own random generator, so a
sample does not depend on which other rows share its batch, or when.

A program may also yield a `Barrier`: its row then waits until every row of its `Group` has arrived, the group
may make some rows copies of others (resampling, `helpers.smc`), and the engine copies their decoding state
(the KV cache of `CachedEngine`) before every row goes on.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable, Generator, Sequence
from dataclasses import dataclass, field

import torch

from helpers.multinomial import draw_rows

MIN_SHARED_PREFIX = 16


@dataclass
class Completion:
    """What one row produced and what it cost: the result type of a plain decode and of a power-sampling chain.

    A forward pass shared by several rows counts once for each of them (`forward_passes`), while its wall time
    is split over them (`seconds`), so that the rows' seconds add up to the run's. A prefix encoded once for all
    rows is split over them in `prefill_tokens` too.
    """

    tokens: list[int]  # generated tokens (the stop token included when one was emitted)
    logp: list[float]  # log p(token | prefix) under the model at temperature 1
    logq: list[float]  # log of the probability the token was drawn with (0 for greedy)
    stopped: bool  # True when the completion ended with a stop token
    decoded_tokens: int = 0  # every sampled token, rejected proposals included
    prefill_tokens: int = 0  # context tokens run through the model besides the newest one of each pass
    forward_passes: int = 0  # forward passes this row took part in
    seconds: float = 0.0
    acceptance: list[float] = field(default_factory=list)  # power sampling: acceptance rate of each block's moves
    moves: list[tuple[int, bool]] = field(default_factory=list)  # power sampling: (cut position, accepted)

    @property
    def sum_logp(self) -> float:
        return float(sum(self.logp))


def split_evenly(total: int, n: int) -> list[int]:
    """`total` split into `n` integer shares that differ by at most one and add up to it exactly."""
    return [total // n + (1 if i < total % n else 0) for i in range(n)]


def total(completions: Sequence[Completion], name: str) -> float:
    """The sum of one cost field over completions (a batch's total)."""
    return sum(getattr(c, name) for c in completions)


def shared_prefix_length(prompts: Sequence[Sequence[int]]) -> int:
    """Length of the common prefix of all prompts, leaving at least one token of each to prefill."""
    first, limit = prompts[0], min(len(p) for p in prompts) - 1
    n = 0
    while n < limit and all(p[n] == first[n] for p in prompts):
        n += 1
    return n


def draw(logits: torch.Tensor, temperature: float, top_k: int, generators: Sequence[torch.Generator | None]
         ) -> tuple[list[int], list[float], list[float]]:
    """One token per row of float32 `logits` [B, V]: (tokens, log p at T=1, log q of the draw), as lists.

    Temperature 0 is greedy (log q = 0). `top_k` > 0 restricts a draw to the k most likely tokens. Row b draws
    with `generators[b]` (CPU generators, so a seed means the same thing on every device).
    """
    logp_all = torch.log_softmax(logits, dim=-1)
    if temperature == 0:
        token = logits.argmax(dim=-1)
        return token.tolist(), logp_all.gather(-1, token[:, None])[:, 0].tolist(), [0.0] * len(token)
    scaled = logits / temperature
    if top_k and top_k < scaled.shape[-1]:
        kth = torch.topk(scaled, top_k, dim=-1).values[:, -1:]
        scaled = scaled.masked_fill(scaled < kth, float("-inf"))
    logq_all = torch.log_softmax(scaled, dim=-1)
    probs = torch.softmax(scaled, dim=-1).cpu()  # not logq_all.exp(): exp is ~70x slower where results are denormal
    token = draw_rows(probs, generators).to(logits.device)  # = torch.multinomial(probs[b], 1) per row, faster
    return (token.tolist(), logp_all.gather(-1, token[:, None])[:, 0].tolist(),
            logq_all.gather(-1, token[:, None])[:, 0].tolist())


@dataclass
class Row:
    """A sequence being decoded: its prompt, generated tokens with per-token scalars, and its RNG."""

    prompt: list[int]
    generator: torch.Generator | None = None
    tokens: list[int] = field(default_factory=list)
    logp: list[float] = field(default_factory=list)
    logq: list[float] = field(default_factory=list)
    state: object = None  # set to an extension's `state` when the row adopts that extension's tokens

    def adopt(self, req: Extension) -> None:
        """Take a finished extension's tokens in place of everything after its first `keep` generated ones."""
        self.tokens = self.tokens[:req.keep] + req.tokens
        self.logp = self.logp[:req.keep] + req.logp
        self.logq = self.logq[:req.keep] + req.logq
        self.state = req.state


@dataclass
class Extension:
    """A request to extend `row` from its first `keep` generated tokens by at most `limit` new ones."""

    row: Row
    keep: int
    limit: int
    tokens: list[int] = field(default_factory=list)
    logp: list[float] = field(default_factory=list)
    logq: list[float] = field(default_factory=list)
    state: object = None  # the engine's token for "this extension": a row that adopts it copies it to row.state

    def append(self, token: int, logp: float, logq: float) -> None:
        self.tokens.append(token)
        self.logp.append(logp)
        self.logq.append(logq)

    @property
    def prefix_last(self) -> int:
        """The token the extension starts from: the last kept token, or the prompt's last."""
        return self.row.tokens[self.keep - 1] if self.keep else self.row.prompt[-1]


class Group:
    """Rows that meet at barriers: when all `size` have yielded a `Barrier`, the engine calls `release`.

    `release` may change rows (copy one row's tokens into another) and returns the (source, destination) pairs
    whose engine state the engine must copy too, so that a destination continues exactly as its source would.
    """

    size: int

    def release(self) -> list[tuple[Row, Row]]:
        raise NotImplementedError


@dataclass
class Barrier:
    """A program's request to wait for the rest of its group; the engine sends the barrier back to resume it."""

    group: Group


Program = Generator[Extension | Barrier, Extension | Barrier, Completion]


@dataclass
class Task:
    """A program being run, and what its row has cost so far."""

    index: int
    row: Row
    program: Program
    request: Extension | None = None  # None while the row waits at a barrier
    reply: Extension | Barrier | None = None  # what to send the program when it resumes (serial engines)
    decoded: int = 0
    prefill: int = 0
    passes: int = 0
    seconds: float = 0.0

    def finish(self, completion: Completion) -> Completion:
        completion.decoded_tokens, completion.prefill_tokens = self.decoded, self.prefill
        completion.forward_passes, completion.seconds = self.passes, self.seconds
        return completion


OnDone = Callable[[int, Completion], None]


class Engine:
    """Runs programs. Every engine counts forward passes and prefill (context tokens run through the model
    besides the newest one of each pass)."""

    def __init__(self, model):
        self.model = model
        self.device = next(model.parameters()).device
        self.prefill = 0
        self.passes = 0

    def run(self, tasks: Sequence[tuple[Row, Program]], temperature: float, top_k: int, stops: set[int],
            capacity: int | None = None, on_done: OnDone | None = None, room: int = 0) -> list[Completion]:
        """Run every (row, program) to its end; `on_done(i, completion)` hears of each as soon as it ends.

        At most `capacity` rows run at once; `room` is how many positions past its prompt a row may need.
        """
        raise NotImplementedError


class SerialEngine(Engine):
    """Runs one program at a time, one extension at a time; subclasses say how an extension is decoded.

    A program that reaches a barrier is set aside until the rest of its group arrives; the next one runs.
    """

    def run(self, tasks, temperature, top_k, stops, capacity=None, on_done=None, room=0) -> list[Completion]:
        out: list[Completion | None] = [None] * len(tasks)
        queue = deque(Task(index, row, program) for index, (row, program) in enumerate(tasks))
        arrived: dict[int, list[Task]] = {}
        while queue:
            task = queue.popleft()
            start, prefill, passes = time.perf_counter(), self.prefill, self.passes
            try:
                req = task.program.send(task.reply) if task.reply is not None else next(task.program)
                while isinstance(req, Extension):
                    self._extend(req, temperature, top_k, stops)
                    task.decoded += len(req.tokens)
                    req = task.program.send(req)
                completion = None
            except StopIteration as stop:
                completion = stop.value
            task.prefill += self.prefill - prefill
            task.passes += self.passes - passes
            task.seconds += time.perf_counter() - start
            if completion is not None:
                out[task.index] = task.finish(completion)
                if on_done:
                    on_done(task.index, out[task.index])
                continue
            task.reply = req  # a barrier: wait for the group
            members = arrived.setdefault(id(req.group), [])
            members.append(task)
            if len(members) == req.group.size:
                del arrived[id(req.group)]
                req.group.release()  # nothing is kept between passes, so there is no state to copy
                queue.extend(members)
        if arrived:
            raise RuntimeError(_STRANDED)
        return out

    def _extend(self, req: Extension, temperature: float, top_k: int, stops: set[int]) -> None:
        raise NotImplementedError


_STRANDED = ("Rows are waiting at a barrier that the rest of their group can never reach: every row of a group "
             "must run in the same engine run, and at most `capacity` rows run at once. Give a capacity that is a "
             "multiple of the group size.")


class ReencodeEngine(SerialEngine):
    """Keeps nothing between passes: every token re-encodes prompt and prefix.

    The simplest possible engine, against which the others are checked; it also runs models without a KV cache.
    """

    @torch.inference_mode()
    def _extend(self, req: Extension, temperature: float, top_k: int, stops: set[int]) -> None:
        seq = req.row.prompt + req.row.tokens[:req.keep]
        while len(req.tokens) < req.limit:
            out = self.model(input_ids=torch.tensor([seq], device=self.device), use_cache=False)
            self.prefill += len(seq) - 1
            self.passes += 1
            (token,), (lp,), (lq,) = draw(out.logits[:, -1].float(), temperature, top_k, [req.row.generator])
            req.append(token, lp, lq)
            if token in stops:
                break
            seq.append(token)


class SlotCache:
    """The KV memory of `CachedEngine`: per layer, keys and values of `slots` rows, written in place.

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
        self.keys = torch.zeros(shape, dtype=param.dtype, device=param.device)
        self.values = torch.zeros_like(self.keys)
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
            pad = self.keys.new_zeros((*self.keys.shape[:3], extra, self.keys.shape[4]))
            self.keys, self.values = torch.cat([self.keys, pad], 3), torch.cat([self.values, pad], 3)

    def point(self, rows: torch.Tensor, cols: torch.Tensor, width: int, contiguous: bool) -> None:
        """Where the next pass writes: row b's q new tokens go to columns cols[b] of slot rows[b]."""
        self.rows, self.cols, self.width, self.contiguous = rows[:, None], cols, width, contiguous

    def update(self, key: torch.Tensor, value: torch.Tensor, layer_idx: int, cache_kwargs=None):
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

    def copy_slot(self, src: int, dst: int, n: int) -> None:
        """The first n columns of slot `src`, copied to slot `dst`."""
        for store in (self.keys, self.values):
            store[:, dst, :, :n] = store[:, src, :, :n]


class CachedEngine(Engine):
    """The decode loop: one slot per running row, all busy slots decoding together, finished ones refilled.

    Per slot it tracks `filled` (columns holding the keys and values of the row's adopted sequence, all but
    its last token) and, for the extension under way, `lo` (columns of the kept prefix), `base` (the first
    column of the extension's own tokens, after the adopted ones so that a rejected proposal overwrites
    nothing) and `fed` (tokens fed so far). A pass attends over columns [0, lo) and [base, base + fed].
    """

    prefill_seconds = 0.0  # wall time spent encoding prompts, the rest of a run's time is decoding

    @torch.inference_mode()
    def run(self, tasks, temperature, top_k, stops, capacity=None, on_done=None, room=0) -> list[Completion]:
        if not tasks:
            return []
        self.temperature, self.top_k, self.stops, self.on_done = temperature, top_k, stops, on_done
        todo = [Task(i, row, program) for i, (row, program) in enumerate(tasks)]
        n_slots = min(capacity or len(todo), len(todo))
        longest = max(len(t.row.prompt) for t in todo)
        self.cache = SlotCache(self.model, n_slots + 1, longest + max(room, 16) + 1)  # + a slot for the shared prefix
        self.slots: list[Task | None] = [None] * n_slots
        self.filled, self.lo, self.base, self.fed = ([0] * n_slots for _ in range(4))
        self.results: list[Completion | None] = [None] * len(todo)
        self.eager = getattr(self.model.config, "_attn_implementation", None) == "eager"
        self.arrived: dict[int, list[Task]] = {}  # group -> rows waiting at its barrier
        self._encode_shared_prefix(todo)
        waiting = deque(todo)
        self._admit(waiting)
        while any(self.slots):
            if all(task is None or task.request is None for task in self.slots):
                raise RuntimeError(_STRANDED)
            self._step()
            self._admit(waiting)
        return self.results

    # ---- prompts -------------------------------------------------------------------------------------

    def _encode_shared_prefix(self, todo: list[Task]) -> None:
        """Encode the prefix all prompts share (the few-shot examples) once, into the spare last slot."""
        prompts = [t.row.prompt[:-1] for t in todo if len(t.row.prompt) > 1]
        shared = shared_prefix_length(prompts) if len(prompts) > 1 else 0
        self.shared = prompts[0][:shared] if shared >= MIN_SHARED_PREFIX else []
        if not self.shared:
            return
        start = time.perf_counter()
        spare = len(self.slots)
        self._forward([spare], [self.shared], [0])
        users = [t for t in todo if len(t.row.prompt) > 1]  # every one of them starts with the shared prefix
        seconds = (time.perf_counter() - start) / len(users)
        for task, share in zip(users, split_evenly(len(self.shared), len(users)), strict=True):
            task.prefill, task.passes, task.seconds = share, 1, seconds
        self.prefill += len(self.shared)
        self.passes += 1
        self.prefill_seconds += time.perf_counter() - start

    def _admit(self, waiting: deque) -> None:
        """Give free slots to waiting rows, prefill their prompts in one pass, and start their programs."""
        free = [s for s, task in enumerate(self.slots) if task is None]
        group = [(s, waiting.popleft()) for s in free[:len(waiting)]]
        if not group:
            self._compact()
            return
        start = time.perf_counter()
        todo = []
        for s, task in group:
            self.slots[s] = task
            prompt, n = task.row.prompt, len(self.shared)
            self.filled[s] = 0
            if n and len(prompt) > 1:  # `_encode_shared_prefix` found these n tokens at the start of every prompt
                self.cache.copy_slot(len(self.slots), s, n)
                self.filled[s] = n
            if len(prompt) - 1 > self.filled[s]:
                todo.append((s, task))
        if todo:
            self._forward([s for s, _ in todo], [t.row.prompt[self.filled[s]:-1] for s, t in todo],
                          [self.filled[s] for s, _ in todo])
            seconds = (time.perf_counter() - start) / len(todo)
            for s, task in todo:
                task.prefill += len(task.row.prompt) - 1 - self.filled[s]
                task.passes += 1
                task.seconds += seconds
                self.prefill += len(task.row.prompt) - 1 - self.filled[s]
            self.passes += 1
            self.prefill_seconds += time.perf_counter() - start
        for s, task in group:
            self.filled[s] = len(task.row.prompt) - 1
            self._resume(s, None)

    def _forward(self, slots: list[int], chunks: list[list[int]], starts: list[int]) -> None:
        """Encode token chunks into slots (row b's chunk at columns starts[b]..), causally, in one pass."""
        q = max(len(c) for c in chunks)
        width = max(starts) + q
        self.cache.grow(width)
        ids = torch.tensor([c + [0] * (q - len(c)) for c in chunks], device=self.device)
        begin = torch.tensor(starts, device=self.device)[:, None]
        cols = begin + torch.arange(q, device=self.device)
        mask = torch.arange(width, device=self.device) <= cols[:, :, None]  # [B, q, width]
        self.cache.point(torch.tensor(slots, device=self.device), cols, width, contiguous=False)
        self.model(input_ids=ids, attention_mask=self._mask(mask[:, None]), position_ids=cols,
                   past_key_values=self.cache, use_cache=True, logits_to_keep=1)

    def _mask(self, allowed: torch.Tensor) -> torch.Tensor:
        """A boolean mask for SDPA-style attention, or an additive one for the eager implementation."""
        if not self.eager:
            return allowed
        dtype = self.cache.keys.dtype
        return torch.zeros(allowed.shape, dtype=dtype, device=allowed.device).masked_fill(
            ~allowed, torch.finfo(dtype).min)

    # ---- programs ------------------------------------------------------------------------------------

    def _resume(self, s: int, finished: Extension | Barrier | None) -> None:
        """Hand a finished extension (or a passed barrier) back to slot s's program (None: start it) and set up
        its next request."""
        task = self.slots[s]
        marker = None
        while True:
            if isinstance(finished, Extension):
                finished.state = marker = object()
            try:
                req = task.program.send(finished) if finished is not None else next(task.program)
            except StopIteration as stop:
                self.results[task.index] = done = task.finish(stop.value)
                self.slots[s] = None
                if self.on_done:
                    self.on_done(task.index, done)
                return
            if marker is not None and task.row.state is marker:  # adopted: its tokens take their place
                m = len(finished.tokens)
                if m and self.base[s] != self.lo[s]:
                    self.cache.move(s, self.base[s], self.lo[s], m)
                self.filled[s] = self.lo[s] + m
            if isinstance(req, Barrier):
                task.request = None
                self.lo[s] = self.base[s] = self.filled[s]
                self.fed[s] = 0
                self._arrive(task, req)
                return
            self.lo[s] = len(req.row.prompt) + req.keep - 1
            self.base[s], self.fed[s] = self.filled[s], 0
            task.request = req
            if req.limit > 0:
                self.cache.grow(self.base[s] + req.limit + 1)
                return
            finished = req  # nothing to decode

    def _arrive(self, task: Task, barrier: Barrier) -> None:
        """A row reached its group's barrier; when the last one arrives, the group releases them all.

        A destination row of the release gets its source's keys and values, so that it continues exactly as the
        source would; the copies' wall time is split over the group's rows.
        """
        group = barrier.group
        members = self.arrived.setdefault(id(group), [])
        members.append(task)
        if len(members) < group.size:
            return
        del self.arrived[id(group)]
        start = time.perf_counter()
        slot_of = {id(t.row): s for s, t in enumerate(self.slots) if t is not None}
        for source, destination in group.release():
            src, dst = slot_of[id(source)], slot_of[id(destination)]
            self.cache.copy_slot(src, dst, self.filled[src])
            for name in ("filled", "lo", "base"):
                getattr(self, name)[dst] = getattr(self, name)[src]
        seconds = (time.perf_counter() - start) / len(members)
        for member in members:
            member.seconds += seconds
        for member in members:
            self._resume(slot_of[id(member.row)], barrier)

    def _step(self) -> None:
        """One forward pass over slots 0..hi-1: a token for every busy slot (free slots ride along, masked)."""
        start = time.perf_counter()
        busy = [s for s, task in enumerate(self.slots) if task is not None and task.request is not None]
        hi = busy[-1] + 1
        reqs = [self.slots[s].request if self.slots[s] is not None else None for s in range(hi)]  # None: idle
        feed = [r.prefix_last if r is not None else 0 for r in reqs]
        lo = [self.lo[s] if reqs[s] is not None else 0 for s in range(hi)]
        base = [self.base[s] if reqs[s] is not None else 0 for s in range(hi)]
        col = [b + self.fed[s] if reqs[s] is not None else 0 for s, b in enumerate(base)]
        for s in busy:  # after the first token, an extension feeds its own previous token
            if self.fed[s]:
                feed[s] = reqs[s].tokens[-1]
        width = max(col) + 1
        dev = self.device
        lo_t, base_t, col_t = (torch.tensor(x, device=dev)[:, None] for x in (lo, base, col))
        columns = torch.arange(width, device=dev)
        allowed = (columns < lo_t) | ((columns >= base_t) & (columns <= col_t))  # [hi, width]
        self.cache.point(torch.arange(hi, device=dev), col_t, width, contiguous=True)
        position = torch.tensor([lo[s] + self.fed[s] if reqs[s] is not None else 0 for s in range(hi)], device=dev)
        out = self.model(input_ids=torch.tensor(feed, device=dev)[:, None], attention_mask=self._mask(allowed[:, None, None]),
                         position_ids=position[:, None], past_key_values=self.cache, use_cache=True)
        self.passes += 1
        logits = out.logits[busy, -1] if len(busy) < hi else out.logits[:, -1]
        chosen, logp, logq = draw(logits.float(), self.temperature, self.top_k,
                                  [self.slots[s].row.generator for s in busy])
        seconds = (time.perf_counter() - start) / len(busy)
        for b, s in enumerate(busy):
            task, req = self.slots[s], reqs[s]
            req.append(chosen[b], logp[b], logq[b])
            self.fed[s] += 1
            task.decoded += 1
            task.passes += 1
            task.seconds += seconds
            if chosen[b] in self.stops or len(req.tokens) >= req.limit:
                self._resume(s, req)

    def _compact(self) -> None:
        """When no row waits, move the highest rows down into free slots below them.

        A free slot below the highest busy one rides along in every pass at a busy row's cost; moving a row
        costs one copy of its keys and values, about what one pass spends on one row, so it pays at once.
        """
        busy = [s for s, task in enumerate(self.slots) if task is not None]
        if not busy or len(busy) == busy[-1] + 1:
            return
        free = [s for s in range(busy[-1]) if self.slots[s] is None]
        for dst, src in zip(free, reversed(busy), strict=False):
            if dst >= src:
                break
            used = max(self.filled[src], self.base[src] + self.fed[src])
            self.cache.copy_slot(src, dst, used)
            self.slots[dst], self.slots[src] = self.slots[src], None
            for name in ("filled", "lo", "base", "fed"):
                values = getattr(self, name)
                values[dst] = values[src]


def decode(model, prompts: Sequence[Sequence[int]], max_new_tokens: int, stop_ids: Sequence[int],
           temperature: float = 0.0, top_k: int = 0, seeds: Sequence[int] | None = None,
           engine: Engine | None = None, batch_size: int | None = None,
           on_done: OnDone | None = None) -> list[Completion]:
    """Decode every prompt (greedy at temperature 0); row b samples with seed `seeds[b]`.

    At most `batch_size` rows decode at once (all of them by default); `on_done(b, completion)` hears of each
    row as soon as it ends.
    """
    if not isinstance(max_new_tokens, int) or max_new_tokens < 1:
        raise ValueError(f"max_new_tokens must be an integer of at least 1, got {max_new_tokens!r}.")
    if not prompts or any(len(p) == 0 for p in prompts):
        raise ValueError("Every prompt needs at least one token.")
    if temperature < 0:
        raise ValueError(f"temperature must be 0 (greedy) or positive, got {temperature!r}.")
    seeds = list(range(len(prompts))) if seeds is None else list(seeds)
    if len(seeds) != len(prompts):
        raise ValueError(f"give one seed per prompt: {len(prompts)} prompts, {len(seeds)} seeds.")
    rows = [Row(list(p), torch.Generator().manual_seed(int(s)) if temperature > 0 else None)
            for p, s in zip(prompts, seeds, strict=True)]
    stops = set(stop_ids)
    tasks = [(row, _extend_once(row, max_new_tokens, stops)) for row in rows]
    return (engine or CachedEngine(model)).run(tasks, temperature, top_k, stops, batch_size, on_done,
                                               room=max_new_tokens)


def _extend_once(row: Row, limit: int, stops: set[int]) -> Program:
    """The program of plain decoding: one extension of the prompt."""
    req = yield Extension(row, 0, limit)
    return Completion(req.tokens, req.logp, req.logq, bool(req.tokens) and req.tokens[-1] in stops)
