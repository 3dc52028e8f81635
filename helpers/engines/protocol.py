"""The book's one decode loop, written out so it can be read top to bottom.

Every method decodes through an engine that runs *programs*: a program is a generator that asks for
extensions of its row (`Extension`: keep the first k generated tokens, then decode at most `limit` more) and
gets each one back filled in. Plain decoding is a program of one extension (`helpers.samplers.plain`); a power-sampling
chain asks for one per block and one per Metropolis–Hastings move (`helpers.samplers.power`).

This module holds the protocol and the serial engines; it imports no engine above it.

Engines, all behind `Engine.run`: `helpers.engines.slot.CachedEngine` (the transformers decode loop, many
programs at once on KV slots), `ReencodeEngine` here (re-encodes every prefix; the check on the others) and
`helpers.engines.vllm.VLLMEngine` (vLLM, with prefix caching). Each engine hands back, per token, the token, its
log-probability under the model at T=1 and under the distribution it was drawn from.

A program may also yield a `Barrier`: its row then waits until every row of its `Group` has arrived, the group
may make some rows copies of others (resampling, `helpers.samplers.smc`), and the engine copies their decoding state
(the KV cache of `CachedEngine`) before every row goes on.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable, Generator, Sequence
from dataclasses import dataclass, field
from typing import ClassVar

import torch

from helpers.engines.categorical import draw

MIN_SHARED_PREFIX = 16


@dataclass
class Completion:
    """What one row produced and what it cost: the result type of a plain decode (samplers extend it with what
    their rows did besides: `helpers.samplers.power.ChainCompletion`, `helpers.samplers.smc.SMCCompletion`).

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

    @property
    def sum_logp(self) -> float:
        return float(sum(self.logp))


def split_evenly(total: int, n: int) -> list[int]:
    """`total` split into `n` integer shares that differ by at most one and add up to it exactly."""
    return [total // n + (1 if i < total % n else 0) for i in range(n)]


def total(completions: Sequence[Completion], name: str) -> float:
    """The sum of one cost field over completions (a batch's total)."""
    return sum(getattr(c, name) for c in completions)


def shared_prefix(prompts: Sequence[Sequence[int]]) -> list[int]:
    """The context (all of a prompt but its last token) that every prompt of several begins with, when it is long
    enough to be worth encoding once (`MIN_SHARED_PREFIX`, the few-shot examples), else []. Prompts of one token
    have no context and are left out."""
    contexts = [p[:-1] for p in prompts if len(p) > 1]
    n = shared_prefix_length(contexts) if len(contexts) > 1 else 0
    return list(contexts[0][:n]) if n >= MIN_SHARED_PREFIX else []


def split_cost(tasks: Sequence[Task], prefill: int, seconds: float, passes: int = 0) -> None:
    """Charge work done once for several rows (a shared prefix encoded once) to them: the prefill tokens in integer
    shares that add up (`split_evenly`), the wall time in equal parts, and `passes` forward passes to each."""
    for task, share in zip(tasks, split_evenly(prefill, len(tasks)), strict=True):
        task.prefill += share
        task.passes += passes
        task.seconds += seconds / len(tasks)


def shared_prefix_length(prompts: Sequence[Sequence[int]]) -> int:
    """Length of the common prefix of all prompts, leaving at least one token of each to prefill."""
    first, limit = prompts[0], min(len(p) for p in prompts) - 1
    n = 0
    while n < limit and all(p[n] == first[n] for p in prompts):
        n += 1
    return n


@dataclass
class Row:
    """A sequence being decoded: its prompt, generated tokens with per-token scalars, its RNG, and the law its
    tokens are drawn from (temperature 0 is greedy; `top_k` > 0 keeps the k most likely tokens). Each row carries
    its own, so that rows of different samplers can share an engine run and its batches. `variant` says which
    model the row runs where the engine's model is several at once (`helpers.models.depth_mix`; 0 elsewhere)."""

    prompt: list[int]
    generator: torch.Generator | None = None
    temperature: float = 0.0
    top_k: int = 0
    variant: int = 0
    tokens: list[int] = field(default_factory=list)
    logp: list[float] = field(default_factory=list)
    logq: list[float] = field(default_factory=list)
    state: object = None  # set to an extension's `state` when the row adopts that extension's tokens
    long: ClassVar[bool] = False  # a row that runs for many times its answer's length (an MH chain): see `draining`

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
    besides the newest one of each pass).

    An engine decodes extensions and keeps its decoding state; running the programs themselves is the `Driver`'s,
    which calls the engine back through the hooks below: `_requested` (a program asks for an extension), `_submit`
    (decode this one: it asks for tokens), `_adopted` (the row took an extension's tokens), `_waiting` (a row
    stops at a barrier), `_released` (a group passed its barrier; copy state from source to destination rows)
    and `_ended` (a row's program returned).
    """

    def __init__(self, model):
        self.model = model
        self.device = next(model.parameters()).device
        self.prefill = 0
        self.passes = 0

    def run(self, tasks: Sequence[tuple[Row, Program]], stops: set[int], capacity: int | None = None,
            on_done: OnDone | None = None, room: int = 0) -> list[Completion]:
        """Run every (row, program) to its end; `on_done(i, completion)` hears of each as soon as it ends.

        Each row draws at its own temperature and top-k. At most `capacity` rows run at once, admitted in the
        order given; `room` is how many positions past its prompt a row may need.
        """
        raise NotImplementedError

    def _requested(self, task: Task, request: Extension) -> None:
        """The row's program asks for `request` (one of no tokens included, which is answered at once)."""

    def _submit(self, task: Task, request: Extension) -> None:
        """Decode `request`, then hand it back with `Driver.advance`."""
        raise NotImplementedError

    def _adopted(self, task: Task, extension: Extension) -> None:
        """The row has taken `extension`'s tokens in place of those after its first `keep`."""

    def _waiting(self, task: Task) -> None:
        """The row waits at a barrier (its engine state stays as it is)."""

    def _released(self, members: list[Task], copies: list[tuple[Row, Row]]) -> None:
        """A group's rows passed their barrier; each destination row must continue as its source row would."""

    def _ended(self, task: Task) -> None:
        """The row's program returned its completion."""


class Driver:
    """The one loop that runs programs, for every engine: it sends each program its reply, turns a returned
    program into a finished completion, meets barriers and releases their groups, and answers an extension that
    asks for nothing at once. The engine hears of each event through its hooks (see `Engine`)."""

    def __init__(self, engine: Engine, tasks: Sequence[Task], on_done: OnDone | None = None):
        self.engine, self.on_done = engine, on_done
        self.results: list[Completion | None] = [None] * len(tasks)
        self.barriers = Barriers()

    def advance(self, task: Task, reply: Extension | Barrier | None) -> None:
        """Send `reply` to the task's program (None: start it) until it asks for a decode, waits or ends."""
        while True:
            if isinstance(reply, Extension):
                reply.state = object()  # a row that adopts the extension takes this token with its tokens
            try:
                request = task.program.send(reply) if reply is not None else next(task.program)
            except StopIteration as stop:
                task.request = None
                self.results[task.index] = done = task.finish(stop.value)
                self.engine._ended(task)
                if self.on_done:
                    self.on_done(task.index, done)
                return
            if isinstance(reply, Extension) and task.row.state is reply.state:
                self.engine._adopted(task, reply)
            if isinstance(request, Barrier):
                task.request = None
                self.engine._waiting(task)
                members = self.barriers.arrive(task, request)
                if members:
                    self.engine._released(members, request.group.release())
                    for member in members:
                        self.advance(member, request)
                return
            task.request = request
            self.engine._requested(task, request)
            if request.limit > 0:
                self.engine._submit(task, request)
                return
            reply = request  # nothing to decode

    def stranded(self) -> RuntimeError:
        """The error for rows left waiting at a barrier the rest of their group can never reach."""
        return RuntimeError(_STRANDED)


class SerialEngine(Engine):
    """Runs one program at a time, one extension at a time; subclasses say how an extension is decoded.

    A program that reaches a barrier is set aside until the rest of its group arrives; the next one runs.
    """

    def run(self, tasks, stops, capacity=None, on_done=None, room=0) -> list[Completion]:
        todo = [Task(index, row, program) for index, (row, program) in enumerate(tasks)]
        driver = Driver(self, todo, on_done)
        self._ready: deque[tuple[Task, Extension]] = deque()
        for task in todo:
            driver.advance(task, None)
            while self._ready:  # the row's program first, to its end or a barrier
                task, req = self._ready.popleft()
                start, prefill, passes = time.perf_counter(), self.prefill, self.passes
                self._extend(req, stops)
                task.decoded += len(req.tokens)
                task.prefill += self.prefill - prefill
                task.passes += self.passes - passes
                task.seconds += time.perf_counter() - start
                driver.advance(task, req)
        driver.barriers.check()
        return driver.results

    def _submit(self, task: Task, request: Extension) -> None:
        self._ready.appendleft((task, request))

    def _extend(self, req: Extension, stops: set[int]) -> None:
        raise NotImplementedError


class Barriers:
    """Rows waiting at their groups' barriers, for an engine's run."""

    def __init__(self) -> None:
        self.waiting: dict[int, list[Task]] = {}  # id(group) -> the rows that have arrived

    def arrive(self, task: Task, barrier: Barrier) -> list[Task]:
        """The group's rows once the last has arrived (the engine then calls `release` and resumes them all);
        until then, an empty list."""
        members = self.waiting.setdefault(id(barrier.group), [])
        members.append(task)
        if len(members) < barrier.group.size:
            return []
        del self.waiting[id(barrier.group)]
        return members

    def check(self) -> None:
        """Raise if rows wait for a group whose other rows will never come."""
        if self.waiting:
            raise RuntimeError(_STRANDED)


_STRANDED = ("Rows are waiting at a barrier that the rest of their group can never reach: every row of a group "
             "must run in the same engine run, and at most `capacity` rows run at once. Give a capacity that is a "
             "multiple of the group size.")


class ReencodeEngine(SerialEngine):
    """Keeps nothing between passes: every token re-encodes prompt and prefix.

    The simplest possible engine, against which the others are checked; it also runs models without a KV cache.
    """

    @torch.inference_mode()
    def _extend(self, req: Extension, stops: set[int]) -> None:
        row = req.row
        seq = req.row.prompt + req.row.tokens[:req.keep]
        route = getattr(self.model, "route_rows", None)  # a depth mix (`helpers.models.depth_mix`): this row's model
        while len(req.tokens) < req.limit:
            if route is not None:
                route([row.variant])
            out = self.model(input_ids=torch.tensor([seq], device=self.device), use_cache=False)
            self.prefill += len(seq) - 1
            self.passes += 1
            (token,), (lp,), (lq,) = draw(out.logits[:, -1].float(), row.temperature, row.top_k, [row.generator])
            req.append(token, lp, lq)
            if token in stops:
                break
            seq.append(token)
