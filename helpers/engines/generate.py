"""The published power sampler's cost pattern, as an engine: the benchmarks' baseline (Karan & Du's code, described in words).

Their code proposes every suffix with one batch-1 `generate` call on the whole prefix, which `generate`
re-encodes, sampling at T = 1/α with the library's default top-k of 50 and keeping every step's processed
scores and raw logits; the two per-token log-probabilities of the MH ratio are read from those (log q from
the scores, α log p from the logits). `GenerateEngine` does exactly that for each extension, and
`helpers.samplers.power.run_chains` in `reference` mode supplies the published moves (cut range, proposal length,
ratio, per-block EOS check), so the baseline is the published algorithm at the published cost.
"""

from __future__ import annotations

import time
from collections import deque

import torch

from helpers.engines.engine import Engine
from helpers.engines.protocol import Charge, Extension, Task


class GenerateEngine(Engine):
    """Each extension is one `generate` call at batch 1 on the re-encoded prefix, scores and logits kept: one program
    runs at a time, to its end or a barrier (where it is set aside until the rest of its group arrives, and the next
    one runs)."""

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

    @torch.inference_mode()
    def _extend(self, req: Extension, stops: set[int]) -> tuple[int, int]:
        """Decode `req` with one `generate` call; the context tokens encoded and the forward passes run."""
        temperature, top_k = req.row.temperature, req.row.top_k
        prefix = req.row.prompt + req.row.tokens[:req.keep]
        ids = torch.tensor([prefix], device=self.device)
        torch.manual_seed(int(torch.randint(2**62, (1,), generator=req.row.generator)))  # generate draws globally
        pad = self.model.generation_config.pad_token_id
        out = self.model.generate(
            input_ids=ids, attention_mask=torch.ones_like(ids), max_new_tokens=req.limit, do_sample=True,
            temperature=temperature, top_k=top_k, top_p=1.0, eos_token_id=sorted(stops) or None,
            pad_token_id=pad if pad is not None else (min(stops) if stops else 0),
            return_dict_in_generate=True, output_scores=True, output_logits=True)
        new = out.sequences[0, len(prefix):]
        scores = torch.stack(out.scores)[:, 0].float()  # [steps, V], after temperature and top-k
        logits = torch.stack(out.logits)[:, 0].float()  # [steps, V], raw
        logq = torch.log_softmax(scores, -1).gather(-1, new[:, None])[:, 0]
        logp = torch.log_softmax(logits, -1).gather(-1, new[:, None])[:, 0]
        for token, lp, lq in zip(new.tolist(), logp.tolist(), logq.tolist(), strict=True):
            req.append(token, lp, lq)
            if token in stops:
                break
        return len(prefix) - 1, len(req.tokens)
