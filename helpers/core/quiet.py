"""Silence the known, harmless chatter of transformers and torch so executed notebooks have no stray stderr."""

from __future__ import annotations

import contextlib
import logging
import os
import warnings

os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

_KNOWN_WARNINGS = (
    r".*`torch_dtype` is deprecated.*",
    r".*attention mask.*",
    r".*legacy.*behaviour.*",
    r".*generation flags are not valid.*",
    r".*TypedStorage is deprecated.*",
)


def silence_known_warnings() -> None:
    """Filter warnings we know to be harmless; called once at import of `helpers`."""
    for pattern in _KNOWN_WARNINGS:
        warnings.filterwarnings("ignore", message=pattern)
    for name in ("transformers", "transformers.modeling_utils", "accelerate", "huggingface_hub"):
        logging.getLogger(name).setLevel(logging.ERROR)


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
