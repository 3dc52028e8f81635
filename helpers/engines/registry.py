"""The engines by name: code above this package asks for an engine by what it is for, never by its class.

'slot' is the book's own engine, on transformers' modules (`slot.SlotEngine`: many rows at once on KV slots); 'reencode'
re-encodes every prefix (`reencode.ReencodeEngine`: the check on the others, and models without a KV cache);
'generate' is the published sampler's cost pattern, one `generate` call per extension (`generate.GenerateEngine`:
the benches' baseline); 'vllm' is vLLM on a checkpoint of the model (`vllm.VLLMEngine`, kept for the next call with
the same model and engine arguments). Each module is named by its kind; the interface they share is
`helpers.engines.engine.Engine`.
"""

from __future__ import annotations

from helpers.engines.engine import Engine
from helpers.models.depth_mix import DepthMix

ENGINES = ("slot", "reencode", "generate", "vllm")


def make_engine(kind: str, model) -> Engine:
    """The engine of `kind` (see `ENGINES`) for `model`: a `ModelHandle`, a transformers module or, for 'slot' and
    'reencode', a depth mix. vLLM needs the handle: it runs a checkpoint of the model, named by its identity and
    written with its tokenizer."""
    from helpers.models.handle import ModelHandle

    if kind == "vllm":
        if not isinstance(model, ModelHandle):
            raise ValueError("the vllm engine runs a checkpoint of a loaded model: pass its ModelHandle (load_model), "
                             f"not a {type(model).__name__}")
        from helpers.engines.vllm import VLLMEngine

        return VLLMEngine.for_model(model)
    module = model.module if isinstance(model, ModelHandle) else model
    if kind == "slot":
        from helpers.engines.slot import SlotEngine

        return SlotEngine(module)
    if kind == "reencode":
        from helpers.engines.reencode import ReencodeEngine

        return ReencodeEngine(module)
    if kind == "generate" and isinstance(module, DepthMix):
        raise ValueError("the generate engine runs one model, not a depth mix (helpers.models.depth_mix): decode each "
                         "truncation with its own engine.")
    if kind == "generate":
        from helpers.engines.generate import GenerateEngine

        return GenerateEngine(module)
    raise ValueError(f"engine kind must be one of {ENGINES}, got {kind!r}")


def release_engines() -> None:
    """Let go of the vLLM engine this process holds, if any (its memory is freed with it)."""
    import sys

    if "helpers.engines.vllm" in sys.modules:
        sys.modules["helpers.engines.vllm"].VLLMEngine.shutdown()
