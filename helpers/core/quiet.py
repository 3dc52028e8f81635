"""The known, harmless chatter of transformers and torch, quieted where the book runs, never by importing it.

A library leaves its host alone: importing `helpers` changes no warning filter, logger or environment variable.
The library quiets only inside its own calls (`quiet_transformers` while a model loads, `logger_quiet` around a
grader that logs each call); the book's own entry points quiet their process as a whole with `quiet_host`: the
command line (`helpers.cli.main`) and a chapter's first call (`helpers.chapters.start`), so that executed notebooks
keep no stray stderr.
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
import warnings

_KNOWN_WARNINGS = (
    r".*`torch_dtype` is deprecated.*",
    r".*attention mask.*",
    r".*legacy.*behaviour.*",
    r".*generation flags are not valid.*",
    r".*TypedStorage is deprecated.*",
)


_QUIET_LOGGERS = ("transformers", "transformers.modeling_utils", "accelerate", "huggingface_hub")


def silence_known_warnings() -> None:
    """Filter the warnings known to be harmless (`_KNOWN_WARNINGS`): inside a `warnings.catch_warnings()` block, or
    for a whole process through `quiet_host`."""
    for pattern in _KNOWN_WARNINGS:
        warnings.filterwarnings("ignore", message=pattern)


def quiet_host() -> None:
    """Quiet this process as the book's entry points want it: the known warnings, the chatty libraries' loggers at
    errors only, and the tokenizers' fork warning off (TOKENIZERS_PARALLELISM, where the host has not set it). For
    the command line and the notebooks' first call, never at import."""
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    silence_known_warnings()
    warnings.filterwarnings("ignore", category=FutureWarning, module=r"vllm\.")
    for name in _QUIET_LOGGERS:
        logging.getLogger(name).setLevel(logging.ERROR)


_QUIETED: dict[str, tuple[int, int]] = {}  # logger -> (callers inside `logger_quiet`, its level before the first)
_QUIET_LOCK = threading.Lock()


@contextlib.contextmanager
def logger_quiet(name: str, level: int = logging.ERROR):
    """Within the block (in any thread): the logger `name` passes only records at `level` and above; its own level
    comes back when the last block using it ends."""
    logger = logging.getLogger(name)
    with _QUIET_LOCK:
        count, before = _QUIETED.get(name, (0, logger.level))
        _QUIETED[name] = (count + 1, before)
        logger.setLevel(max(level, before))
    try:
        yield
    finally:
        with _QUIET_LOCK:
            count, before = _QUIETED[name]
            if count == 1:
                del _QUIETED[name]
                logger.setLevel(before)
            else:
                _QUIETED[name] = (count - 1, before)


@contextlib.contextmanager
def quiet_transformers():
    """Within the block: transformers logs only errors and shows no progress bars."""
    from transformers.utils import logging as hf_logging

    previous = hf_logging.get_verbosity()
    bars = hf_logging.is_progress_bar_enabled()
    hf_logging.set_verbosity_error()
    hf_logging.disable_progress_bar()
    try:
        with warnings.catch_warnings():
            silence_known_warnings()
            yield
    finally:
        hf_logging.set_verbosity(previous)
        if bars:
            hf_logging.enable_progress_bar()


@contextlib.contextmanager
def no_gguf_bar():
    """Within the block: transformers' GGUF reader draws no tqdm bar.

    It uses `tqdm.auto` directly, outside transformers' own progress-bar switch; in a notebook that bar is a
    widget, which an executed chapter would keep (a stale bar in the built page).
    """
    import importlib

    try:
        module = importlib.import_module("transformers.modeling_gguf_pytorch_utils")
    except ImportError:
        yield
        return
    original = getattr(module, "tqdm", None)
    if original is None:
        yield
        return
    module.tqdm = lambda *args, **kwargs: original(*args, **{**kwargs, "disable": True})
    try:
        yield
    finally:
        module.tqdm = original


@contextlib.contextmanager
def native_stderr_held():
    """Hold what native code writes to file descriptor 2 (past Python's streams) in a file; show it only when
    the block fails. vLLM's start-up writes such warnings (NUMA binding, Triton)."""
    import sys
    import tempfile

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
