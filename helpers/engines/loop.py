"""The book's one decode loop, for every engine, written out so it can be read top to bottom (`run_programs`).

An engine decodes; it does not run programs. It offers the loop a small interface (`Engine`): take waiting rows
in (`admit`), decode a step (`step`, which hands back the extensions that ended), and hear what became of a
row (`extend`, `adopt`, `park`, `copy`, `end`): each an explicit message, the engine holding only what it was told
(`helpers.engines.engine`). The loop sends each program its reply, answers a request for no
tokens at once, meets barriers, turns a returned program into a completion, and charges every engine call's
wall time, prefill and passes to the rows it served (`charge`), the same way for every engine. The engine never
calls the loop and holds nothing of it; what one run needs of the engine (a KV buffer) it lets go in `close_run`.

The engines (`helpers.engines.registry` names them by kind): `helpers.engines.slot.SlotEngine` ('slot':
transformers' modules, many rows at once on KV slots), `helpers.engines.reencode.ReencodeEngine` (many rows at once,
each re-encoded whole for every token: the check on the others), `helpers.engines.generate.GenerateEngine` (one
extension at a time, one `generate` call each) and `helpers.engines.vllm.VLLMEngine`. Each hands back, per token,
the token, its log-probability under the model at T=1 and under the distribution it was drawn from.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Sequence

from helpers.core import budget
from helpers.core.pulse import Pulse
from helpers.engines.engine import Engine
from helpers.engines.protocol import (
    Adopt,
    Barrier,
    Charge,
    Checkpoint,
    Completion,
    Extension,
    OnCheckpoint,
    OnDone,
    Program,
    Row,
    Task,
)


def run_programs(engine: Engine, tasks: Sequence[tuple[Row, Program]], stops: set[int], capacity: int | None = None,
                 on_done: OnDone | None = None, room: int = 0, on_checkpoint: OnCheckpoint | None = None,
                 reach: int | None = None, pulse: Pulse | None = None) -> list[Completion]:
    """Run every (row, program) on `engine` to its end; `on_done(i, completion)` hears of each as soon as it ends,
    `on_checkpoint(i, state, spent)` of each checkpoint its program yields, `pulse` (a long run's progress log,
    `helpers.core.pulse`) of every engine step; where none is handed, one writing to the file the runner names
    (`Pulse.from_env`), so that a spent budget is said in one way, whoever started the loop.

    Each row draws at its own temperature and top-k. At most `capacity` rows run at once, admitted in the order
    given; `room` is how many positions past its prompt a row may need (its proposals included), `reach` how many
    its sequence may grow to (`room` where not given), which the engine checks first (`Engine.check_reach`).
    """
    todo = [Task(i, row, program) for i, (row, program) in enumerate(tasks)]
    if not todo:
        return []
    results: list[Completion | None] = [None] * len(todo)
    barriers = Barriers()
    pulse = Pulse.from_env() if pulse is None else pulse

    def resume(task: Task, reply: Extension | Barrier | None) -> None:
        """Send `reply` to the task's program (None: start it) until it asks for a decode, waits or ends."""
        while True:
            if isinstance(reply, Extension):
                task.decoded += len(reply.tokens)
            try:
                request = task.program.send(reply) if reply is not None else next(task.program)
            except StopIteration as stop:
                results[task.index] = done = task.finish(stop.value)
                engine.end(task)
                if on_done:
                    on_done(task.index, done)
                return
            if isinstance(request, Adopt):
                task.row.adopt(request.extension)
                engine.adopt(task, request.extension)
                reply = None
                continue
            if isinstance(request, Checkpoint):
                if on_checkpoint:
                    on_checkpoint(task.index, request.state, task.spent())
                reply = None
                continue
            if isinstance(request, Barrier):
                engine.park(task)
                members = barriers.arrive(task, request)
                if members:
                    start = time.perf_counter()
                    engine.copy(request.group.release())
                    charge(engine, Charge(members, time.perf_counter() - start, passes=0))
                    for member in members:
                        resume(member, request)
                return
            engine.extend(task, request)
            if request.limit > 0:
                return
            reply = request  # nothing to decode

    engine.check_reach(todo, room if reach is None else reach)
    waiting = deque(todo)
    try:
        for done in engine.open_run(todo, stops, capacity, room):
            charge(engine, done)
        while True:
            admitted, cost = engine.admit(waiting)
            if cost is not None:
                charge(engine, cost)
            for task in admitted:
                if task.row.restored is not None:
                    task.restore(task.row.restored)
                resume(task, None)
            if not engine.decoding():
                if admitted:
                    continue  # their programs ended or wait at a barrier: there may be room for more
                break
            ended, cost = engine.step()
            charge(engine, cost)
            for task, extension in ended:
                resume(task, extension)
            pulse.beat(cost.tokens, len(cost.rows), cost.computed)
            if budget.spent():  # after the rows that ended stored their records: the run ends here, and says why
                pulse.write(outcome=budget.SPENT)
                raise budget.BudgetSpent("the run's time budget is spent (run --budget); every finished record "
                                             "is stored, and the same command again goes on from there")
    finally:  # the run's state (a KV buffer of GBs at a full batch) goes with the run, not with the engine
        engine.close_run()
    barriers.check()
    return results


def charge(engine: Engine, cost: Charge) -> None:
    """Charge one engine call to its rows: its wall time split by their weights, its prefill as given, its passes
    to each; and add its prefill and passes to the engine's totals. The one place a row's cost grows, but for its
    decoded tokens, which the loop counts as each extension comes back."""
    rows = list(cost.rows)
    if not rows:
        return
    weights = cost.weights or [1.0] * len(rows)
    prefill = cost.prefill or [0] * len(rows)
    scale = cost.seconds / sum(weights)
    for task, weight, tokens in zip(rows, weights, prefill, strict=True):
        task.seconds += weight * scale
        task.prefill += tokens
        task.passes += cost.passes
    engine.prefill += sum(prefill)
    engine.passes += cost.passes if cost.model_passes is None else cost.model_passes
    if cost.prompts:
        engine.prefill_seconds += cost.seconds


class Barriers:
    """Rows waiting at their groups' barriers, for one run."""

    def __init__(self) -> None:
        self.waiting: dict[int, list[Task]] = {}  # id(group) -> the rows that have arrived

    def arrive(self, task: Task, barrier: Barrier) -> list[Task]:
        """The group's rows once the last has arrived (the loop then calls `release` and resumes them all);
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
            raise RuntimeError("Rows are waiting at a barrier that the rest of their group can never reach: every "
                               "row of a group must run in the same engine run, and at most `capacity` rows run at "
                               "once. Give a capacity that is a multiple of the group size.")
