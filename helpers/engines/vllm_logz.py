"""log Z of every token vLLM samples, recorded where vLLM computes its logits and read back by the engine.

The MH ratio and SMC's weights need, for each proposed token x, log p(x) (the model at T = 1) and log q(x) (the law
it was drawn from, at temperature T and top-k). vLLM returns one kind of log-probability per engine: the engine
takes the raw one (log p), and `LogNormaliser`, a vLLM `LogitsProcessor`, records for each sampled row
log Z = logsumexp over the allowed tokens of (l / T) − logsumexp(l) / T from the raw float32 logits, so that
log q(x) = log p(x) / T − log Z exactly.

The processor runs wherever vLLM runs the model: in this process, or in the engine cores that vLLM's data
parallelism starts in other processes (one per GPU). Either way it appends its records to a file of its own
(one per process) in the folder named by `SVD_VLLM_LOGZ_DIR`, which an engine sets before vLLM starts and its
processes inherit; `LogZReader` reads them back. A record is written before vLLM hands the token to its output,
so by the time a request is seen finished here, its records are on disk. Only imported where vLLM is installed.
"""

from __future__ import annotations

import os
from pathlib import Path

import torch
from vllm.v1.sample.logits_processor import BatchUpdate, LogitsProcessor, MoveDirectionality

from helpers.core import env

LOGZ_KEY = "svd_logz"  # SamplingParams.extra_args key: the request id whose draws are recorded


def logsumexp(x: torch.Tensor) -> torch.Tensor:
    """torch.logsumexp over the last axis, much faster on a CPU where logits spread widely (as at T < 1; the
    performance page, "vLLM beside the slot engine", has both times): terms below e^-80 of the largest are raised to
    e^-80 before exp, whose results would otherwise be subnormal and slow. The sum moves by at most V e^-80 < 1e-29
    of itself, far below float32's resolution."""
    top = x.amax(-1, keepdim=True)
    return (x - top).clamp_(min=-80.0).exp_().sum(-1).log_() + top[..., 0]


class LogNormaliser(LogitsProcessor):
    """Records log Z_T per sampled row and generated-token index; changes no logit. Not argmax-invariant on
    purpose: vLLM then applies it to the raw float32 logits, before temperature."""

    def __init__(self, vllm_config, device, is_pin_memory) -> None:
        self.rows: dict[int, tuple[str, float, int, list[int]]] = {}  # batch index -> (id, T, top-k, outputs)
        self.folder = os.environ.get(env.VLLM_LOGZ_DIR)
        self.out = None  # opened at the first record: the engine cores' processes write files of their own

    def is_argmax_invariant(self) -> bool:
        return False

    def update_state(self, batch_update: BatchUpdate | None) -> None:
        if batch_update is None:
            return
        for index in batch_update.removed:
            self.rows.pop(index, None)
        for index, params, _, outputs in batch_update.added:
            rid = (params.extra_args or {}).get(LOGZ_KEY) if params is not None else None
            if rid is None:
                self.rows.pop(index, None)
            else:
                self.rows[index] = (rid, params.temperature, params.top_k, outputs)
        for a, b, direction in batch_update.moved:
            first, second = self.rows.pop(a, None), self.rows.pop(b, None)
            if first is not None:
                self.rows[b] = first
            if second is not None and direction == MoveDirectionality.SWAP:
                self.rows[a] = second

    def apply(self, logits: torch.Tensor) -> torch.Tensor:
        if not self.rows:
            return logits
        if self.folder is None:
            raise RuntimeError(f"{env.VLLM_LOGZ_DIR} is not set: build vLLM through helpers.engines.vllm.VLLMEngine")
        index = list(self.rows)
        raw = logits[index].float()
        entries = [self.rows[i] for i in index]
        temperature = raw.new_tensor([t for _, t, _, _ in entries])[:, None]
        scaled = raw / temperature
        for b, (_, _, k, _) in enumerate(entries):
            if 0 < k < scaled.shape[-1]:
                kth = torch.topk(scaled[b], k).values[-1]
                scaled[b] = scaled[b].masked_fill(scaled[b] < kth, float("-inf"))
        logz = (logsumexp(scaled) - logsumexp(raw) / temperature[:, 0]).tolist()
        if self.out is None:
            self.out = open(Path(self.folder) / f"{os.getpid()}.logz", "a", encoding="ascii")  # noqa: SIM115
        self.out.write("".join(f"{rid} {len(outputs)} {z.hex()}\n"
                               for (rid, _, _, outputs), z in zip(entries, logz, strict=True)))
        self.out.flush()  # before vLLM samples and hands the token on
        return logits


class LogZReader:
    """Reads the processors' records back: `read()` what they have written since the last call (call it after
    requests are seen finished), then `take(request id)` gives {token index: log Z} (a repeated draw of the same
    index keeps the last)."""

    def __init__(self, folder: str | Path) -> None:
        self.folder = Path(folder)
        self.offsets: dict[Path, int] = {}
        self.records: dict[str, dict[int, float]] = {}

    def take(self, rid: str) -> dict[int, float]:
        return self.records.pop(rid, {})

    def read(self) -> None:
        for path in sorted(self.folder.glob("*.logz")):
            with path.open("rb") as f:
                f.seek(self.offsets.get(path, 0))
                data = f.read()
            whole = data[:data.rfind(b"\n") + 1]  # a line still being written waits for the next read
            self.offsets[path] = self.offsets.get(path, 0) + len(whole)
            for line in whole.decode("ascii").splitlines():
                rid, index, z = line.split()
                self.records.setdefault(rid, {})[int(index)] = float.fromhex(z)
