"""The engines that decode one extension at a time, each from scratch: the simplest there are, and the check on the
others.

`helpers.engines.reencode.ReencodeEngine` re-encodes prompt and prefix for every token (it also runs models without a
KV cache); `helpers.engines.generate.GenerateEngine` makes one `generate` call per extension, the published sampler's
cost pattern. A program that reaches a barrier is set aside until the rest of its group arrives; the next one runs.
"""

from __future__ import annotations

import time
from collections import deque

from helpers.engines.engine import Engine
from helpers.engines.protocol import Charge, Extension, Task


class SerialEngine(Engine):
    """Runs one program at a time, to its end or a barrier, one extension at a time; subclasses say how an
    extension is decoded (`_extend`)."""

    def open_run(self, tasks, stops, capacity, room) -> list[Charge]:
        self.ready: deque[tuple[Task, Extension]] = deque()
        return super().open_run(tasks, stops, capacity, room)

    def admit(self, waiting: deque[Task]) -> tuple[list[Task], Charge | None]:
        return ([waiting.popleft()] if waiting and not self.ready else []), None

    def extend(self, task: Task, request: Extension) -> None:
        if request.limit > 0:
            self.ready.append((task, request))

    def decoding(self) -> bool:
        return bool(self.ready)

    def step(self) -> tuple[list[tuple[Task, Extension]], Charge]:
        task, request = self.ready.popleft()
        start = time.perf_counter()
        prefill, passes = self._extend(request, self.stops)
        return [(task, request)], Charge([task], time.perf_counter() - start, [prefill], passes,
                                         tokens=len(request.tokens))

    def close_run(self) -> None:
        self.ready = deque()

    def _extend(self, req: Extension, stops: set[int]) -> tuple[int, int]:
        """Decode `req`; the context tokens encoded and the forward passes run."""
        raise NotImplementedError
