"""A sampler's programs, made apart from the engine run that carries them, so that one run can carry the rows of
several samplers: chapter 04 decodes every method of a depth in one run (`run_together`), and the engine's
batches stay full until the last rows end, where one run per method would drain its batch at each method's end.

Each sampler builds a `Work` (`helpers.samplers.plain.decode_work`, `helpers.samplers.power.chain_work`,
`helpers.samplers.smc.smc_work`); its rows carry their own temperature and top-k (`helpers.engines.protocol.Row`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from helpers.core.checks import is_count
from helpers.core.pulse import Pulse
from helpers.engines.engine import Engine
from helpers.engines.loop import run_programs
from helpers.engines.protocol import Completion, Program, Row, Spent

Collect = Callable[[int, Completion], "tuple[int, Completion] | None"]


def check_prompts(prompts: Sequence[Sequence[int]], seeds: Sequence[int], sampler: str) -> None:
    """Every sampler's rule for its inputs: at least one prompt, none empty, and one seed per prompt."""
    if not prompts or any(len(p) == 0 for p in prompts):
        raise ValueError(f"The prompt is empty: {sampler} needs at least one prompt token in every prompt.")
    if len(seeds) != len(prompts):
        raise ValueError(f"give one seed per prompt: {len(prompts)} prompts, {len(seeds)} seeds.")
OnJobDone = Callable[[int, int, Completion], None]
OnJobCheckpoint = Callable[[int, int, dict, Spent], None]


@dataclass
class Work:
    """One sampler's share of an engine run.

    `tasks` are its (row, program) pairs, in the order they are admitted; `jobs` is how many results it returns;
    `room` is how many positions past its prompt a row may write, `reach` how long its sequence may grow (`room`
    where not given: an MH chain writes a proposal after the state it may replace); `group` is how many consecutive rows must run
    at once (an SMC problem's particles meet after every block); `collect(task, completion)` turns a finished task
    into a finished job, (job, completion), or None while the job still runs (None: task i is job i).
    """

    tasks: list[tuple[Row, Program]]
    jobs: int
    room: int
    group: int = 1
    collect: Collect | None = None
    reach: int | None = None


def check_batch_size(batch_size: int) -> None:
    """The rule for rows at once: a whole number of at least 1 (callers may check it early, before any work)."""
    if not is_count(batch_size, 1):
        raise ValueError(f"batch_size must be an integer of at least 1, got {batch_size!r}")


def capacity(batch_size: int | None, works: Sequence[Work]) -> int | None:
    """Rows at once: `batch_size` rounded down to whole groups of the largest group, and never below one group,
    so that a group's rows can always all be running (admission is in order, so at most one group is ever
    part-admitted, and the rows beside it end and make room for the rest)."""
    if batch_size is None:
        return None
    check_batch_size(batch_size)
    group = max(w.group for w in works)
    return max(batch_size // group, 1) * group


def run_together(engine: Engine, works: Sequence[Work], stops: set[int], batch_size: int | None = None,
                 on_done: OnJobDone | None = None, on_checkpoint: OnJobCheckpoint | None = None,
                 pulse: Pulse | None = None) -> list[list[Completion]]:
    """Run every work's tasks in one engine run, at most `batch_size` rows at once (see `capacity`); returns each
    work's jobs' completions in order. `on_done(work, job, completion)` hears of each job as soon as it ends,
    `on_checkpoint(work, task, state, spent)` of each checkpoint of a task whose job is itself (`collect` None);
    `pulse` of every engine step (`run_programs`)."""
    works = list(works)
    if not works:
        return []
    results: list[list[Completion | None]] = [[None] * w.jobs for w in works]
    owner: list[tuple[int, int]] = []  # task of the run -> (work, task of the work)
    for w, work in enumerate(works):
        owner += [(w, i) for i in range(len(work.tasks))]

    def task_done(index: int, completion: Completion) -> None:
        w, i = owner[index]
        collect = works[w].collect
        done = (i, completion) if collect is None else collect(i, completion)
        if done is not None:
            results[w][done[0]] = done[1]
            if on_done:
                on_done(w, *done)

    def task_checkpoint(index: int, state: dict, spent: Spent) -> None:
        w, i = owner[index]
        if on_checkpoint and works[w].collect is None:
            on_checkpoint(w, i, state, spent)

    run_programs(engine, [task for work in works for task in work.tasks], stops, capacity(batch_size, works), task_done,
                 room=max(w.room for w in works), on_checkpoint=task_checkpoint,
                 reach=max(w.room if w.reach is None else w.reach for w in works), pulse=pulse)
    return results  # type: ignore[return-value]: every job ended, or the run raised


def one_work(on_done: Callable[[int, Completion], None] | None) -> OnJobDone | None:
    """`on_done(job, completion)` of a run of one work, as `run_together` calls it."""
    return None if on_done is None else (lambda _, job, completion: on_done(job, completion))
