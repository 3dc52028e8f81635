"""What decoding programs and engines say to each other: the rows, the requests and the results.

Every method decodes through an engine that runs *programs*: a program is a generator that asks for
extensions of its row (`Extension`: keep the first k generated tokens, then decode at most `limit` more) and
gets each one back filled in. Plain decoding is a program of one extension (`helpers.samplers.plain`); a
power-sampling chain asks for one per block and one per Metropolis–Hastings move (`helpers.samplers.power`).
A program says that its row takes an extension's tokens by yielding `Adopt(extension)` (an MH move accepted, a
block grown): the loop applies it to the row and tells the engine, which moves what it keeps of those tokens into
place. A long program may yield `Checkpoint(state)` where it could go on from `state` later (an MH chain between
blocks): the loop hands the state and the row's costs so far to whoever stores them; a row built again from them
(`Row.restored`) goes on with those costs. A program may also yield a `Barrier`: its row then waits until every
row of its `Group` has arrived, the group may make some rows copies of others (resampling,
`helpers.samplers.smc`), and the engine copies their decoding state before every row goes on.

The loop that runs programs on an engine is `helpers.engines.loop`; this module imports no engine.
"""

from __future__ import annotations

from collections.abc import Callable, Generator, Sequence
from dataclasses import dataclass, field

import torch

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


def ends_with_stop(tokens: Sequence[int], stops: set[int] | frozenset[int]) -> bool:
    """The one rule for a completion that stopped: its last token is a stop token."""
    return bool(tokens) and tokens[-1] in stops


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


def shared_prefix_length(prompts: Sequence[Sequence[int]]) -> int:
    """Length of the common prefix of all prompts, leaving at least one token of each to prefill."""
    first, limit = prompts[0], min(len(p) for p in prompts) - 1
    n = 0
    while n < limit and all(p[n] == first[n] for p in prompts):
        n += 1
    return n


@dataclass(frozen=True)
class Spent:
    """What a row has cost so far (`Task`'s counters): saved with a checkpoint, so that a row restored from it
    (`Row.restored`) reports the cost of its whole decode, not what its restoring cost."""

    decoded: int = 0
    prefill: int = 0
    passes: int = 0
    seconds: float = 0.0

    @classmethod
    def read(cls, saved: object) -> Spent:
        """Costs read back from a checkpoint, checked (ValueError for anything but counts and seconds)."""
        fields = ("decoded", "prefill", "passes", "seconds")
        if not (isinstance(saved, dict) and set(saved) == set(fields)
                and all(isinstance(saved[f], int | float) and not isinstance(saved[f], bool) and saved[f] >= 0
                        for f in fields)
                and all(isinstance(saved[f], int) for f in fields[:3])):
            raise ValueError(f"saved costs must be {fields} as counts and seconds, got {saved!r}")
        return cls(**saved)


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
    restored: Spent | None = None  # a row rebuilt from a checkpoint: its tokens were decoded before, at this cost

    def adopt(self, req: Extension) -> None:
        """Take a finished extension's tokens in place of everything after its first `keep` generated ones."""
        self.tokens = self.tokens[:req.keep] + req.tokens
        self.logp = self.logp[:req.keep] + req.logp
        self.logq = self.logq[:req.keep] + req.logq


@dataclass
class Extension:
    """A request to extend `row` from its first `keep` generated tokens by at most `limit` new ones."""

    row: Row
    keep: int
    limit: int
    tokens: list[int] = field(default_factory=list)
    logp: list[float] = field(default_factory=list)
    logq: list[float] = field(default_factory=list)

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


@dataclass
class Adopt:
    """A program's message that its row takes `extension`'s tokens (`Row.adopt`); the loop applies it, tells the
    engine (`Engine.adopt`) and resumes the program at once."""

    extension: Extension


@dataclass
class Checkpoint:
    """A program's message that it could go on from `state` (JSON-able) if the run stopped here; the loop hands it
    on (`run_programs`' `on_checkpoint`) with the row's costs so far and resumes the program at once."""

    state: dict


Program = Generator[Extension | Barrier | Adopt | Checkpoint, Extension | Barrier | None, Completion]


@dataclass
class Task:
    """A program being run, and what its row has cost so far."""

    index: int
    row: Row
    program: Program
    decoded: int = 0
    prefill: int = 0
    passes: int = 0
    seconds: float = 0.0

    def spent(self) -> Spent:
        return Spent(self.decoded, self.prefill, self.passes, self.seconds)

    def restore(self, spent: Spent) -> None:
        """Go on from a checkpoint's costs: what re-encoding the restored row cost is the interruption's."""
        self.decoded, self.prefill, self.passes, self.seconds = spent.decoded, spent.prefill, spent.passes, spent.seconds

    def finish(self, completion: Completion) -> Completion:
        completion.decoded_tokens, completion.prefill_tokens = self.decoded, self.prefill
        completion.forward_passes, completion.seconds = self.passes, self.seconds
        return completion


OnDone = Callable[[int, Completion], None]
OnCheckpoint = Callable[[int, dict, Spent], None]


@dataclass
class Charge:
    """What one engine call did, for the loop (`helpers.engines.loop`) to charge to its rows: `seconds` of wall
    time shared by `rows` (in proportion to `weights`, equal when None), the context tokens it encoded for each
    (`prefill`), and the forward passes each took part in (`passes`) and the model ran (`model_passes`, the same
    when None). `prompts`: it encoded prompts (the engine's `prefill_seconds`). `tokens`: the tokens it decoded,
    and `computed`: the rows its pass computed (rows in flight plus any riding along; None: just its rows), for the
    run's pulse (`helpers.core.pulse`)."""

    rows: Sequence[Task]
    seconds: float
    prefill: Sequence[int] | None = None
    passes: int = 1
    model_passes: int | None = None
    weights: Sequence[float] | None = None
    prompts: bool = False
    tokens: int = 0
    computed: int | None = None
