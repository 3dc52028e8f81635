"""Where a job's time goes: one run under cProfile, its self time summed per function and per kind of work.

The benchmarks say how fast a job is; this says why, so that an optimisation starts from a measurement. The kinds
are named for what a decode spends its time on: the weight matmuls of the model's linear layers, attention, the
sampling and scoring of tokens, moving KV-cache and row state, other torch operators, and the rest (Python: the
engine's, the samplers' and transformers' code; built-ins that are not torch operators). A torch operator's kind
goes by its name alone, so an operator that serves two kinds (`exp` in a sampler's draws) counts under one.
"""

from __future__ import annotations

import cProfile
import pstats
import re
import time
from collections.abc import Callable
from typing import Any

# What each kind of work holds, by the name of a torch operator as cProfile reports it (`<built-in method X ...>`
# or `<method 'X' of 'torch._C.TensorBase' objects>`); the first kind that matches takes it
KINDS: dict[str, re.Pattern] = {
    "weight matmuls": re.compile(r"^(linear|addmm|mm|matmul)$"),
    "attention": re.compile(r"^(scaled_dot_product_attention|bmm|baddbmm|softmax|_softmax)$"),
    "sampling and scoring": re.compile(
        r"^(log_softmax|logsumexp|multinomial|topk|argmax|sort|cumsum|gather|exponential_|searchsorted|where)$"),
    "KV cache and row moves": re.compile(r"^(index_copy_?|index_put_?|index_select|copy_|cat|stack|narrow|"
                                         r"select_scatter|slice_scatter|masked_fill_?|clone|contiguous)$"),
}
OTHER_TORCH = "other torch operators"
PYTHON = "Python and the rest"
_FUNCTION = re.compile(r"^<built-in method torch\.(?:[\w]+\.)*(\w+)>$")  # torch.cat, torch._C._nn.linear
_METHOD = re.compile(r"^<method '(\w+)' of 'torch\._C\.\w+' objects>$")  # Tensor.copy_


def operator_name(function: tuple[str, int, str]) -> str | None:
    """The torch operator a cProfile entry stands for (None for Python code): `linear` for the entry of
    `torch._C._nn.linear`, `copy_` for `Tensor.copy_`."""
    filename, _line, name = function
    found = (_FUNCTION.match(name) or _METHOD.match(name)) if filename == "~" else None
    return found.group(1) if found else None


def kind_of(function: tuple[str, int, str]) -> str:
    """The kind of work (a key of `KINDS`, `OTHER_TORCH` or `PYTHON`) of one cProfile entry."""
    op = operator_name(function)
    if op is None:
        return PYTHON
    return next((kind for kind, pattern in KINDS.items() if pattern.match(op)), OTHER_TORCH)


def where_time_goes(job: Callable[[], Any], top: int = 8) -> tuple[Any, dict]:
    """Run `job` once under cProfile: its result, and a report of the wall seconds, the self seconds of each kind
    of work (with its share of their sum) and the `top` functions by self time. The profiler slows Python code
    (each call is counted), so the Python share reads high; the shares of torch's operators are the ones to trust."""
    profiler = cProfile.Profile()
    start = time.perf_counter()
    profiler.enable()
    try:
        result = job()
    finally:
        profiler.disable()
    wall = time.perf_counter() - start
    stats = pstats.Stats(profiler).stats  # {function: (calls, primitive calls, self time, cumulative, callers)}
    kinds: dict[str, float] = dict.fromkeys([*KINDS, OTHER_TORCH, PYTHON], 0.0)
    for function, (_calls, _primitive, own, _cumulative, _callers) in stats.items():
        kinds[kind_of(function)] += own
    measured = sum(kinds.values()) or 1.0
    functions = sorted(stats.items(), key=lambda item: -item[1][2])[:top]
    report = {"wall_seconds": round(wall, 2), "profiled_seconds": round(measured, 2),
              "kinds": {k: {"seconds": round(s, 4), "share": round(s / measured, 3)} for k, s in kinds.items()},
              "top": [{"function": _label(f), "kind": kind_of(f),
                       "calls": calls, "seconds": round(own, 4)} for f, (calls, _p, own, _c, _r) in functions]}
    return result, report


def _label(function: tuple[str, int, str]) -> str:
    """A short name for a cProfile entry: the operator, `module.py:function`, or a built-in's own name."""
    filename, _line, name = function
    return operator_name(function) or (name if filename == "~" else f"{filename.rsplit('/', 1)[-1]}:{name}")
