"""What the decode loop asks of an engine (`Engine`), the interface every engine implements.

An engine decodes; it does not run programs. It offers the loop (`helpers.engines.loop.run_programs`) a small
interface: take waiting rows in (`admit`), decode a step (`step`, which hands back the extensions that ended), and
hear what became of a row (`extend`, `adopt`, `park`, `copy`, `end`): each an explicit message, the engine holding
only what it was told. The engines by kind (`helpers.engines.registry`): 'slot' is `helpers.engines.slot.SlotEngine`,
'reencode' `helpers.engines.reencode.ReencodeEngine` (many rows at once, each re-encoded whole for every token),
'generate' `helpers.engines.generate.GenerateEngine` (one extension at a time, one `generate` call each), 'vllm'
`helpers.engines.vllm.VLLMEngine`.
"""

from __future__ import annotations

from collections import deque

from helpers.engines.protocol import Charge, Extension, Row, Task
from helpers.models.depth_mix import DepthMix


class Engine:
    """What the loop asks of an engine. Every engine counts forward passes and prefill (context tokens run
    through the model besides the newest one of each pass); the loop adds them up (`charge`)."""

    prefill_seconds = 0.0  # wall time spent encoding prompts: the rest of a run's time is decoding

    def __init__(self, model):
        """`model`: a transformers model, or a depth mix (`helpers.models.depth_mix.DepthMix`: several truncations
        in one batch) for the engines that route rows (the slot and re-encoding engines)."""
        self.mix = model if isinstance(model, DepthMix) else None
        self.model = model.model if self.mix is not None else model
        self.device = next(self.model.parameters()).device
        self.prefill = 0
        self.passes = 0

    def open_run(self, tasks: list[Task], stops: set[int], capacity: int | None, room: int) -> list[Charge]:
        """Get ready for a run of these rows: at most `capacity` at once, each needing at most `room` positions past
        its prompt, ending at a token of `stops`; what was done ahead for them (a prefix they share, encoded)."""
        self.stops = stops
        return []

    def refuse_variants_without_mix(self, tasks: list[Task]) -> None:
        """Refuse rows that ask for a model variant (a truncation of a depth mix) when the model is a single model."""
        variants = sorted({t.row.variant for t in tasks})
        if self.mix is None and variants != [0]:
            raise ValueError(f"rows ask for model variants {variants}, but this engine's model is a single model; "
                             "variants need a depth mix (helpers.models.depth_mix.DepthMix).")

    def check_reach(self, tasks: list[Task], reach: int) -> None:
        """Refuse, before any work, rows this engine cannot run exactly when each sequence may reach `reach`
        positions past its prompt (a ValueError that says what to change); every row is fine by default."""

    def admit(self, waiting: deque[Task]) -> tuple[list[Task], Charge | None]:
        """Take waiting rows in, in order, while there is room; the rows taken, and what taking them cost."""
        raise NotImplementedError

    def extend(self, task: Task, request: Extension) -> None:
        """The row's program asks for `request` (one of no tokens is answered by the loop at once, but the engine
        hears of it: the row's prefix is now its first `keep` tokens)."""
        raise NotImplementedError

    def decoding(self) -> bool:
        """Whether some row has an extension under way."""
        raise NotImplementedError

    def step(self) -> tuple[list[tuple[Task, Extension]], Charge]:
        """Decode: the rows whose extension ended (a stop token, or its limit), and what the step cost."""
        raise NotImplementedError

    def adopt(self, task: Task, extension: Extension) -> None:
        """The row took `extension`'s tokens in place of those after its first `keep`."""

    def park(self, task: Task) -> None:
        """The row waits at a barrier (its engine state stays as it is)."""

    def copy(self, copies: list[tuple[Row, Row]]) -> None:
        """A group passed its barrier: each destination row must go on exactly as its source row would."""

    def end(self, task: Task) -> None:
        """The row's program returned: its place is free."""

    def close_run(self) -> None:
        """The run is over (or failed): let go of what it held."""
