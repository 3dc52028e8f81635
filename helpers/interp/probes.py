"""Residual erasure and integrated gradients on the papers' probes, one stored record per probe and map: computed
here, so that chapter 01 and the release's audit compute them by one function."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch

from helpers.interp.attribution import integrated_gradients
from helpers.interp.erasure import erasure_map


def probe_rows(n_layers: int, stride: int) -> list[int]:
    """The boundaries a probe's maps are computed at: every `stride`-th of 0..L."""
    return list(range(0, n_layers + 1, stride))


def probe_unit(kind: str, stride: int, component: str | None = None) -> str:
    """The name a probe's record is keyed under (with its sequence's digest): 'erasure-<stride>' or
    'ig-<component>-<stride>'."""
    return f"erasure-{stride}" if kind == "erasure" else f"ig-{component}-{stride}"


def parse_unit(name: str) -> tuple[str, str | None, int]:
    """(kind, component, stride) of a `probe_unit` name; a ValueError for anything else."""
    parts = name.split("-")
    if parts[0] == "erasure" and len(parts) == 2:
        return "erasure", None, int(parts[1])
    if parts[0] == "ig" and len(parts) >= 3:
        return "ig", "-".join(parts[1:-1]), int(parts[-1])
    raise ValueError(f"{name!r} names no probe record (erasure-<stride> or ig-<component>-<stride>)")


def probe_record(model, ids: Sequence[int], start: int, kind: str, component: str | None, rows: Sequence[int],
                 baseline: torch.Tensor | None = None, ig_steps: int = 32) -> list[list[float]]:
    """One stored map of a probe: the erasure map at `rows` (boundaries not computed are -1: JSON has no NaN), or
    the integrated gradients of `component` at the layers among `rows`."""
    if kind == "erasure":
        return np.nan_to_num(erasure_map(model, ids, baseline, start, boundaries=rows), nan=-1.0).tolist()
    n_layers = model.config.num_hidden_layers
    return integrated_gradients(model, ids, start, component, steps=ig_steps,
                                layers=[r for r in rows if r < n_layers]).tolist()
