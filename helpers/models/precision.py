"""Which floating-point type the model's weights and activations use: the one place that decides it.

The policy for `dtype="auto"`: bfloat16 on a CUDA GPU that computes it natively; on a CPU, bfloat16 only where a
measurement on this machine found the book's engine faster in it for this model (`python -m helpers bench dtype
--model M` measures both formats and records them here, `record_measurement`), float32 everywhere else. Without
native support PyTorch emulates bfloat16, at several times float32's cost; with it, the matrix units do more work
per cycle, but a whole decoding step need not be faster in proportion (the appendix measures it), so native support
is not taken for speed unmeasured. "float32" or "bfloat16" override the policy (a profile's or notebook's `dtype`
parameter, `-p dtype=...`, or `--dtype` on the command line).

Whatever the weights' type, log-probabilities, Metropolis–Hastings ratios, KL divergences and statistics are
computed in float32 from the logits. The type the model ran in is part of every stored run's identity
(`helpers.models.handle.ModelHandle.identity`), so a float32 run never reuses bfloat16 records or the reverse.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:  # torch is imported where it is used, so the command line's parser starts fast
    import torch

FORMATS = ("float32", "bfloat16")  # the formats a model runs in (what `auto` chooses between)
CHOICES = ("auto", *FORMATS)


def check(choice: object) -> str:
    """`choice` if it is one of CHOICES, else a ValueError that lists them."""
    if not isinstance(choice, str) or choice not in CHOICES:
        raise ValueError(f"dtype must be one of {', '.join(CHOICES)} ('auto': bfloat16 where the hardware computes "
                         f"it natively and, on a CPU, was measured faster; float32 elsewhere); got {choice!r}")
    return choice


# oneDNN's names for instruction sets that compute bfloat16 products (its `ONEDNN_MAX_CPU_ISA` values and above)
ONEDNN_BFLOAT16_ISAS = ("AVX512_CORE_BF16", "AVX512_CORE_FP16", "AVX10_1_512", "AVX512_CORE_AMX", "AVX10_1_512_AMX",
                        "AVX512_CORE_AMX_FP16", "AVX10_1_512_AMX_FP16", "AVX10_2_512", "AVX10_2_512_AMX_2", "ALL",
                        "DEFAULT")  # a name not here (AVX2, AVX512_CORE, a misspelling) counts as a cap: float32


def native_bfloat16(device: str) -> bool:
    """Whether `device` ('cpu', 'cuda', 'cuda:1', ...) computes bfloat16 in hardware rather than emulating it.

    On a CPU PyTorch's bfloat16 matrix products run in oneDNN, so a cap on oneDNN's instructions
    (`ONEDNN_MAX_CPU_ISA`, or its older name `DNNL_MAX_CPU_ISA`) below a bfloat16 set makes a native CPU emulate it:
    with the cap at AVX2 the CPU computes as an AVX2 machine does, and 'auto' takes float32 there as it would."""
    import torch

    kind = torch.device(device).type
    if kind == "cuda":
        return torch.cuda.is_available() and torch.cuda.is_bf16_supported(including_emulation=False)
    if kind == "cpu":
        return onednn_cap() is None and _bfloat16_units()
    return False


def onednn_cap() -> str | None:
    """The instruction set oneDNN is held to by the environment when that set lacks bfloat16 products (then even a
    native CPU emulates them), else None."""
    import os

    cap = (os.environ.get("ONEDNN_MAX_CPU_ISA") or os.environ.get("DNNL_MAX_CPU_ISA") or "ALL").strip().upper()
    return None if cap in ONEDNN_BFLOAT16_ISAS else cap


def _bfloat16_units() -> bool:
    import torch

    return any(getattr(torch.cpu, probe, lambda: False)() for probe in ("_is_avx512_bf16_supported",
                                                                         "_is_amx_tile_supported"))


MEASURED_FILE = "dtype-measurements.json"  # in the converted models' folder: this machine's measured decode rates


def machine_key() -> str:
    """What a format's speed depends on besides the model: the CPU, its native bfloat16 units, torch and threads."""
    import platform

    import torch

    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as fh:
            cpu = next((line.split(":", 1)[1].strip() for line in fh if line.startswith("model name")), cpu)
    except OSError:
        pass
    return f"{cpu} | native bf16: {native_bfloat16('cpu')} | torch {torch.__version__} | {torch.get_num_threads()} threads"


def _measurements_path():
    from helpers.models.registry import cache_dir

    return cache_dir() / MEASURED_FILE


def measured(model: str | None) -> dict | None:
    """This machine's recorded decode rates of `model` ({'float32': tokens/s, 'bfloat16': tokens/s}), or None: no
    measurement, or a file that is not one this code wrote (read, never trusted unchecked)."""
    from helpers.core.jsonfile import JSONFileError, read_json

    path = _measurements_path()
    if model is None or not path.is_file():
        return None
    try:
        entry = read_json(path).get(machine_key(), {}).get(model)
    except (JSONFileError, AttributeError):
        return None
    ok = isinstance(entry, dict) and all(isinstance(entry.get(k), int | float) and not isinstance(entry.get(k), bool)
                                         and entry[k] > 0 for k in FORMATS)
    return {k: float(entry[k]) for k in FORMATS} if ok else None


def record_measurement(model: str, rates: dict[str, float]) -> str:
    """Record `model`'s decode rates in both formats on this machine; the format `auto` now takes for it."""
    import json

    from helpers.core.jsonfile import JSONFileError, read_json

    path = _measurements_path()
    try:
        table = read_json(path) if path.is_file() else {}
    except JSONFileError:
        table = {}
    table = table if isinstance(table, dict) else {}
    table.setdefault(machine_key(), {})[model] = {k: float(rates[k]) for k in FORMATS}
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(table, indent=1) + "\n")
    return auto_name("cpu", model)


def auto_name(device: str, model: str | None = None) -> str:
    """The format 'auto' takes for `model` on `device` (`resolve`'s policy), by name."""
    kind = device.split(":")[0]
    if not native_bfloat16(device):
        return "float32"
    if kind == "cuda":
        return "bfloat16"
    rates = measured(model)
    return "bfloat16" if rates is not None and rates["bfloat16"] > rates["float32"] else "float32"


def describe(device: str, model: str | None = None) -> str:
    """Whether `device` computes bfloat16 natively and what 'auto' means there, in words (run pages, benches)."""
    if not native_bfloat16(device):
        cap = onednn_cap() if device.split(":")[0] == "cpu" and _bfloat16_units() else None
        held = f": its bfloat16 units are there, but the environment holds oneDNN to {cap}" if cap else ""
        return f"no native bfloat16 on {device}{held} (auto = float32)"
    if device.split(":")[0] == "cuda":
        return f"native bfloat16 on {device} (auto = bfloat16)"
    if model is None:  # a machine's line, for benches of several models
        return (f"native bfloat16 on {device} (auto, per model: bfloat16 where `python -m helpers bench dtype --model M` "
                "measured it faster on this machine)")
    rates = measured(model)
    if rates is None:
        return (f"native bfloat16 on {device}, but no measurement of {model} in both formats on this "
                "machine (auto = float32; `python -m helpers bench dtype --model M` measures it)")
    return (f"native bfloat16 on {device}; measured decode {rates['float32']:.1f} tokens/s in float32 and "
            f"{rates['bfloat16']:.1f} in bfloat16 for {model} (auto = {auto_name(device, model)})")


def resolve(choice: str | torch.dtype, device: str, model: str | None = None) -> torch.dtype:
    """The torch dtype for `choice` on `device`: 'auto' is the policy (for `model`, whose measured rates on this
    machine decide it on a CPU with native bfloat16). The choice is always passed, never read from the process:
    a chapter passes its `dtype` parameter to every model it loads."""
    import torch

    types = {"float32": torch.float32, "bfloat16": torch.bfloat16}
    if isinstance(choice, torch.dtype):
        if choice not in types.values():
            raise ValueError(f"dtype must be torch.float32 or torch.bfloat16, got {choice}")
        return choice
    choice = check(choice)
    if choice == "auto":
        return types[auto_name(device, model)]
    return types[choice]


def name(dtype: torch.dtype) -> str:
    """'float32' for torch.float32: how records and figures name a dtype."""
    return str(dtype).replace("torch.", "")
