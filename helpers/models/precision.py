"""Which floating-point type the model's weights and activations use: the one place that decides it.

The policy: bfloat16 where the hardware computes it natively (a CUDA GPU that supports it, or a CPU with
AVX512-BF16 or AMX tiles), float32 everywhere else. Without native support PyTorch emulates bfloat16, which
on a 2-core AVX2 CPU makes a Qwen2.5-0.5B forward pass about 8x slower than float32, not faster.
`dtype="auto"` applies the policy; "float32" or "bfloat16" override it (a profile's or notebook's `dtype`
parameter, `-p dtype=...`, or `--dtype` on the command line).

Whatever the weights' type, log-probabilities, Metropolis–Hastings ratios, KL divergences and statistics are
computed in float32 from the logits. The type the model ran in is part of every stored run's identity
(`helpers.results.identity.model_identity`), so a float32 run never reuses bfloat16 records or the reverse.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:  # torch is imported where it is used, so the command line's parser starts fast
    import torch

CHOICES = ("auto", "float32", "bfloat16")
_chosen = "auto"  # this process's choice, set by `use`


def check(choice: object) -> str:
    """`choice` if it is one of CHOICES, else a ValueError that lists them."""
    if not isinstance(choice, str) or choice not in CHOICES:
        raise ValueError(f"dtype must be one of {', '.join(CHOICES)} ('auto': bfloat16 where the hardware computes "
                         f"it natively, float32 elsewhere); got {choice!r}")
    return choice


def native_bfloat16(device: str) -> bool:
    """Whether `device` ('cpu', 'cuda', 'cuda:1', ...) computes bfloat16 in hardware rather than emulating it."""
    import torch

    kind = torch.device(device).type
    if kind == "cuda":
        return torch.cuda.is_available() and torch.cuda.is_bf16_supported(including_emulation=False)
    if kind == "cpu":
        cpu = torch.cpu
        return any(getattr(cpu, probe, lambda: False)() for probe in ("_is_avx512_bf16_supported",
                                                                       "_is_amx_tile_supported"))
    return False


def describe(device: str) -> str:
    """Whether `device` computes bfloat16 natively and what 'auto' means there, in words (run pages, benches)."""
    if native_bfloat16(device):
        return f"native bfloat16 on {device} (auto = bfloat16)"
    return f"no native bfloat16 on {device} (auto = float32)"


def use(choice: str) -> str:
    """Set this process's dtype choice (what `resolve(None, ...)` and `load_model` use); returns it."""
    global _chosen
    _chosen = check(choice)
    return _chosen


def chosen() -> str:
    """This process's dtype choice ('auto' unless `use` changed it)."""
    return _chosen


def resolve(choice: str | torch.dtype | None, device: str) -> torch.dtype:
    """The torch dtype for `choice` on `device`: None means this process's choice, 'auto' the policy."""
    import torch

    types = {"float32": torch.float32, "bfloat16": torch.bfloat16}
    if isinstance(choice, torch.dtype):
        if choice not in types.values():
            raise ValueError(f"dtype must be torch.float32 or torch.bfloat16, got {choice}")
        return choice
    choice = check(_chosen if choice is None else choice)
    if choice == "auto":
        return torch.bfloat16 if native_bfloat16(device) else torch.float32
    return types[choice]


def name(dtype: torch.dtype) -> str:
    """'float32' for torch.float32: how records and figures name a dtype."""
    return str(dtype).replace("torch.", "")
