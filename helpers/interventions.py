"""Causal interventions on the residual stream, many per batch, and what they change downstream.

An edit is applied to one row of a batch that repeats the same sequence:
* `Skip(layer, part, start, stop)` removes block `layer`'s write (part 'layer'), or only its attention or MLP
  output, at positions [start, stop); the other positions run as usual (Csordás et al., section 3.2);
* `Erase(boundary, position)` replaces the residual at one boundary (0 = the embedding, l = the output of block
  l − 1, L = the final residual) and one position with a baseline vector (section 3.3).

`effects` compares each edited row with the clean run: the relative change of every block's contribution
c_l = h_{l+1} − h_l, ‖c − c'‖/‖c‖ per position, and the L2 distance between output distributions per position.
`integrated_gradients` attributes the gold answer's probability to the positions of one layer's output.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from contextlib import contextmanager
from dataclasses import dataclass

import numpy as np
import torch

from helpers.adapter import Adapter, adapter, hidden_of
from helpers.hooks import COMPONENT_POINTS, hooked, recorder

PARTS = ("layer", "attn", "mlp")
EPS = 1e-6


@dataclass(frozen=True)
class Skip:
    """Skip block `layer` (or only its attention / MLP output) at positions [start, stop); stop None = the end."""

    layer: int
    part: str = "layer"
    start: int = 1
    stop: int | None = None


@dataclass(frozen=True)
class Erase:
    """Replace the residual at `boundary` (0..L) and `position` by the baseline vector of that boundary."""

    boundary: int
    position: int


Edit = Skip | Erase | None


@dataclass
class Reference:
    """The clean run of one sequence, everything an edited run needs to resume from any block.

    inputs[l] is the residual entering block l (inputs[L] the final residual), contributions[l] = c_l, probs
    the output distribution, and block_kwargs[l] what the model passed to block l besides the hidden state
    (masks, rotary tables), so a run can start at block l with exactly the same computation.
    """

    inputs: torch.Tensor  # [L + 1, T, D]
    contributions: torch.Tensor  # [L, T, D] float32
    probs: torch.Tensor  # [T, V] float32
    block_kwargs: list[dict]


@dataclass
class Effects:
    """Per edited row: relative change of every block's contribution [B, L, T]; output change norm [B, T]."""

    relative: np.ndarray
    output: np.ndarray


def _check(edits: Sequence[Edit], n_layers: int, T: int, baseline: torch.Tensor | None) -> None:
    for e in edits:
        if isinstance(e, Skip):
            if e.part not in PARTS:
                raise ValueError(f"part must be one of {PARTS}, got {e.part!r}")
            if not 0 <= e.layer < n_layers:
                raise ValueError(f"skipped layer must lie in 0..{n_layers - 1}, got {e.layer}")
            if not 0 <= e.start <= (T if e.stop is None else e.stop) <= T:
                raise ValueError(f"skip positions [{e.start}, {e.stop}) do not fit a sequence of {T} tokens")
        elif isinstance(e, Erase):
            if baseline is None:
                raise ValueError("Erase edits need a baseline (see mean_residual)")
            if not 0 <= e.boundary <= n_layers or not 0 <= e.position < T:
                raise ValueError(f"erase boundary must lie in 0..{n_layers} and position in 0..{T - 1}, got {e}")
        elif e is not None:
            raise TypeError(f"an edit is a Skip, an Erase or None, got {type(e).__name__}")


def _positions(edits: Sequence[Edit], T: int, device) -> dict[tuple[str, int], torch.Tensor]:
    """Masks [B, T, 1] of the edited positions, keyed by (part, layer) for skips and ('erase', boundary)."""
    masks: dict[tuple[str, int], torch.Tensor] = {}
    for b, e in enumerate(edits):
        if isinstance(e, Skip):
            key, lo, hi = (e.part, e.layer), e.start, T if e.stop is None else e.stop
        elif isinstance(e, Erase):
            key, lo, hi = ("erase", e.boundary), e.position, e.position + 1
        else:
            continue
        mask = masks.setdefault(key, torch.zeros((len(edits), T, 1), dtype=torch.bool, device=device))
        mask[b, lo:hi] = True
    return masks


def _edit_handlers(ad: Adapter, masks: dict, baseline: torch.Tensor | None, record: list | None = None) -> dict:
    """Hook handlers that apply the edits and, if `record` is a list, collect each block's contribution in it."""
    inputs: dict[int, torch.Tensor] = {}

    def erase(boundary: int):
        def handler(h: torch.Tensor, kwargs: dict) -> torch.Tensor:
            mask = masks.get(("erase", boundary))
            new = h if mask is None else torch.where(mask, baseline[boundary].to(h.dtype), h)
            if boundary < ad.n_layers:
                inputs[boundary] = new
            return new
        return handler

    def skip_and_record(l: int):
        def handler(out: torch.Tensor, kwargs: dict) -> torch.Tensor:
            mask = masks.get(("layer", l))
            if mask is not None:
                out = torch.where(mask, inputs[l], out)
            if record is not None:
                record.append(out - inputs[l])
            del inputs[l]
            return out
        return handler

    def zero(part: str, l: int):
        def handler(out: torch.Tensor, kwargs: dict) -> torch.Tensor | None:
            mask = masks.get((part, l))
            return None if mask is None else torch.where(mask, torch.zeros((), dtype=out.dtype), out)
        return handler

    handlers: dict = {("final_input", 0): erase(ad.n_layers)}
    for l in range(ad.n_layers):
        handlers.update({("block_input", l): erase(l), ("attn_output", l): zero("attn", l),
                         ("mlp_output", l): zero("mlp", l), ("block_output", l): skip_and_record(l)})
    return handlers


def _first_block(edit: Edit) -> int:
    """The first block whose computation an edit can change (the run starts there)."""
    if isinstance(edit, Skip):
        return edit.layer
    if isinstance(edit, Erase):
        return edit.boundary
    return 0


@torch.no_grad()  # not inference mode: integrated gradients differentiate through runs that reuse these tensors
def reference_run(model, ids: Sequence[int]) -> Reference:
    """The clean run, recording each block's input, contribution and call arguments, and the output distribution."""
    ad = adapter(model)
    x = torch.as_tensor(list(ids), dtype=torch.long, device=next(model.parameters()).device)[None]
    if x.shape[1] == 0:
        raise ValueError("the sequence is empty")
    kwargs: list = [None] * ad.n_layers
    inputs: list = [None] * (ad.n_layers + 1)

    def keep(l: int):
        def handler(h: torch.Tensor, kw: dict) -> None:
            inputs[l] = h
            if l < ad.n_layers:
                kwargs[l] = dict(kw)
        return handler

    handlers = {("block_input", l): keep(l) for l in range(ad.n_layers)}
    handlers[("final_input", 0)] = keep(ad.n_layers)
    with hooked(ad, handlers):
        hidden = model.model(input_ids=x, use_cache=False).last_hidden_state
    for kw in kwargs:
        kw.pop("hidden_states", None)
    stacked = torch.stack([h[0] for h in inputs])
    contributions = (stacked[1:] - stacked[:-1]).float()
    return Reference(stacked, contributions, torch.softmax(ad.unembed(hidden[0]).float(), -1), kwargs)


@torch.inference_mode()
def effects(model, ids: Sequence[int], edits: Sequence[Edit], reference: Reference | None = None,
            baseline: torch.Tensor | None = None, batch_size: int = 1, read_from: Sequence[int] | int = 0,
            read_to: int | None = None) -> Effects:
    """Run every edit on a copy of `ids` and compare it with the clean run, per block and position.

    The output distribution (the costly unembedding) is read only at positions read_from[i]..read_to − 1 of
    edit i; the output change elsewhere is reported as 0.

    An edited run starts at the first block the edit can change, from the clean run's residual and with the
    clean run's block arguments; blocks before it are unchanged by construction (their change is 0). With
    batch_size 1 every block computes exactly what the clean run computed wherever the edit cannot reach, so
    such changes are exactly zero; larger batches are faster but differ from the clean run by float noise.
    """
    ad = adapter(model)
    ids = list(ids)
    T = len(ids)
    _check(edits, ad.n_layers, T, baseline)
    ref = reference or reference_run(model, ids)
    ref_norm = ref.contributions.norm(dim=-1).clamp(min=EPS)  # [L, T]
    relative = np.zeros((len(edits), ad.n_layers, T), dtype=np.float32)
    output = np.zeros((len(edits), T), dtype=np.float32)
    starts = [read_from] * len(edits) if isinstance(read_from, int) else list(read_from)
    read_to = T if read_to is None else read_to
    if len(starts) != len(edits) or not all(0 <= r <= read_to <= T for r in starts):
        raise ValueError(f"read windows must lie within 0..{T} (one start per edit)")
    order = sorted(range(len(edits)), key=lambda i: _first_block(edits[i]))
    for lo in range(0, len(order), batch_size):
        rows = order[lo:lo + batch_size]
        chunk = [edits[i] for i in rows]
        start = min(_first_block(e) for e in chunk)
        record: list = []
        with hooked(ad, _edit_handlers(ad, _positions(chunk, T, ref.inputs.device), baseline, record)):
            h = ref.inputs[start].expand(len(chunk), -1, -1)
            for l in range(start, ad.n_layers):
                h = hidden_of(ad.blocks[l](h, **ref.block_kwargs[l]))
            hidden = ad.final_norm(h)
        for offset, c in enumerate(record):
            l = start + offset
            change = (c.float() - ref.contributions[l]).norm(dim=-1) / ref_norm[l]
            relative[rows, l] = change.cpu().numpy()
        for b, i in enumerate(rows):
            window = slice(starts[i], read_to)
            probs = torch.softmax(ad.unembed(hidden[b, window]).float(), -1)
            output[i, window] = (probs - ref.probs[window]).norm(dim=-1).cpu().numpy()
    return Effects(relative, output)


# --------------------------------------------------------------------------------------------------
# Layer-skip effects (current and future tokens)
# --------------------------------------------------------------------------------------------------


def future_splits(T: int, n: int = 4, seed: int = 123, step: int = 8, first: int = 8, margin: int = 4) -> list[int]:
    """Split positions as in Csordás et al.: `n` of first, first+step, … < T − margin, in a seeded random order."""
    candidates = list(range(first, T - margin, step))
    random.Random(seed).shuffle(candidates)
    if not candidates:
        raise ValueError(f"a sequence of {T} tokens is too short for split positions from {first} in steps of {step}")
    return sorted(candidates[:n])


@dataclass
class SkipEffects:
    """Skip effects of one sequence, reduced over positions with max (and mean) for each split position.

    matrix[k, s, l]: relative change of block l's contribution when block s is skipped before split k,
    measured on positions ≥ split k (all positions for the 'current' variant, split None);
    output[k, s]: the same for the output distribution (L2 distance, at most √2).
    """

    part: str
    splits: list[int | None]
    matrix: np.ndarray  # [K, L, L] max over positions
    output: np.ndarray  # [K, L] max over positions
    matrix_mean: np.ndarray  # [K, L, L] mean over positions
    output_mean: np.ndarray  # [K, L]

    def as_dict(self) -> dict:
        return {"part": self.part, "splits": self.splits, **{k: np.round(getattr(self, k), 6).tolist()
                for k in ("matrix", "output", "matrix_mean", "output_mean")}}

    @classmethod
    def from_dict(cls, d: dict) -> SkipEffects:
        return cls(d["part"], d["splits"], *(np.asarray(d[k]) for k in ("matrix", "output", "matrix_mean",
                                                                          "output_mean")))


def skip_effects(model, ids: Sequence[int], part: str = "layer", splits: Sequence[int | None] = (None,),
                 reference: Reference | None = None, batch_size: int = 1, protect_first: int = 1) -> SkipEffects:
    """Skip every block (or its `part`) in turn, once per split position.

    With split t the skip covers positions [protect_first, t) and effects are read on positions ≥ t (future
    tokens); with t None it covers [protect_first, T) and effects are read everywhere (current tokens).
    """
    ids = list(ids)
    L, T = adapter(model).n_layers, len(ids)
    for t in splits:
        if t is not None and not protect_first < t < T:
            raise ValueError(f"split positions must lie in {protect_first + 1}..{T - 1}, got {t}")
    edits = [Skip(s, part, protect_first, t) for t in splits for s in range(L)]
    reads = [0 if t is None else t for t in splits for _ in range(L)]  # only where effects are measured
    eff = effects(model, ids, edits, reference, batch_size=batch_size, read_from=reads)
    rel = eff.relative.reshape(len(splits), L, L, T)
    out = eff.output.reshape(len(splits), L, T)
    K = len(splits)
    matrix, matrix_mean = np.zeros((K, L, L)), np.zeros((K, L, L))
    output, output_mean = np.zeros((K, L)), np.zeros((K, L))
    for k, t in enumerate(splits):
        cols = slice(0 if t is None else t, T)
        matrix[k], matrix_mean[k] = rel[k][..., cols].max(-1), rel[k][..., cols].mean(-1)
        output[k], output_mean[k] = out[k][..., cols].max(-1), out[k][..., cols].mean(-1)
    return SkipEffects(part, list(splits), matrix, output, matrix_mean, output_mean)


def later_layer_profile(matrix: np.ndarray) -> np.ndarray:
    """Each skipped layer's mean effect on the layers after it: Σ_l matrix[s, l] / max(1, L − 1 − s)."""
    L = matrix.shape[-1]
    return matrix.sum(-1) / np.maximum(1, L - 1 - np.arange(L))


def depth_score(profile: Sequence[float]) -> float:
    """Centre of mass of an effect profile over 0-based layer indices, Σ l·m_l / Σ m_l (Csordás et al.)."""
    m = np.asarray(profile, dtype=float)
    if m.sum() <= 0:
        raise ValueError("an effect profile with no positive mass has no depth score")
    return float((np.arange(len(m)) * m).sum() / m.sum())


# --------------------------------------------------------------------------------------------------
# Residual erasure
# --------------------------------------------------------------------------------------------------


@torch.inference_mode()
def mean_residual(model, sequences: Sequence[Sequence[int]]) -> torch.Tensor:
    """The baseline of erasure: the mean residual over all positions of `sequences` at every boundary [L + 1, D]."""
    from helpers.residual import capture

    total, count = None, 0
    for ids in sequences:
        cap = capture(model, ids, parts="io")
        states = torch.cat([cap.inputs, cap.outputs[-1:]], dim=0)  # boundaries 0..L
        total = states.sum(1) if total is None else total + states.sum(1)
        count += states.shape[1]
    if total is None:
        raise ValueError("mean_residual needs at least one sequence")
    return total / count


def erasure_map(model, ids: Sequence[int], baseline: torch.Tensor, answer_start: int,
                batch_size: int = 16, boundaries: Sequence[int] | None = None) -> np.ndarray:
    """[L + 1, T]: erase boundary l at position t; value = max over the positions predicting the answer of ‖p − p'‖.

    The answer occupies positions answer_start..T−1, so positions answer_start−1..T−2 predict it. Only the
    given `boundaries` are computed (all by default); the other rows are NaN.
    """
    ids = list(ids)
    L, T = adapter(model).n_layers, len(ids)
    if not 1 <= answer_start < T:
        raise ValueError(f"answer_start must lie in 1..{T - 1}, got {answer_start}")
    rows = list(range(L + 1)) if boundaries is None else sorted(set(boundaries))
    edits = [Erase(l, t) for l in rows for t in range(T)]
    eff = effects(model, ids, edits, baseline=baseline, batch_size=batch_size, read_from=answer_start - 1,
                  read_to=T - 1)
    grid = np.full((L + 1, T), np.nan, dtype=np.float32)
    grid[rows] = eff.output[:, answer_start - 1:T - 1].max(-1).reshape(len(rows), T)
    return grid


# --------------------------------------------------------------------------------------------------
# Integrated gradients
# --------------------------------------------------------------------------------------------------

COMPONENTS = ("layer", "attn", "mlp")


@contextmanager
def _frozen(model):
    """Parameters temporarily without gradients, so a backward pass only reaches the interpolated activation."""
    flags = [p.requires_grad for p in model.parameters()]
    for p in model.parameters():
        p.requires_grad_(False)
    try:
        yield
    finally:
        for p, f in zip(model.parameters(), flags, strict=True):
            p.requires_grad_(f)


def integrated_gradients(model, ids: Sequence[int], answer_start: int, component: str = "layer", steps: int = 32,
                         batch_size: int = 16, layers: Sequence[int] | None = None) -> np.ndarray:
    """[L, T] attributions of the gold answer's probability to each layer's output, position by position.

    For layer l the activation x (block output h_{l+1}, or a_l, or m_l) is replaced by baseline + r (x − baseline),
    r = k/steps for k = 0..steps−1, with the baseline its own per-channel mean over positions; the objective is
    the sum of the answer tokens' probabilities; attribution = Σ_channels mean_k ∇ ⊙ (x − baseline).
    """
    if component not in COMPONENTS:
        raise ValueError(f"component must be one of {COMPONENTS}, got {component!r}")
    if steps < 1:
        raise ValueError(f"steps must be at least 1, got {steps}")
    ad = adapter(model)
    ids = list(ids)
    T = len(ids)
    if not 1 <= answer_start < T:
        raise ValueError(f"answer_start must lie in 1..{T - 1}, got {answer_start}")
    device = next(model.parameters()).device
    targets = torch.tensor(ids[answer_start:], device=device)
    layers = list(range(ad.n_layers)) if layers is None else list(layers)
    out = np.zeros((ad.n_layers, T), dtype=np.float32)
    ref = reference_run(model, ids)
    with _frozen(model), torch.enable_grad():
        for l in layers:
            point_name = COMPONENT_POINTS[component]
            clean: dict = {}
            with torch.no_grad(), hooked(ad, {(point_name, l): recorder(clean, "x", lambda h: h[0].detach())}):
                ad.blocks[l](ref.inputs[l][None], **ref.block_kwargs[l])  # block l alone yields the clean activation
            x = clean["x"].float()
            base = x.mean(0, keepdim=True)
            total = torch.zeros(T, device=device)
            for lo in range(0, steps, batch_size):
                r = torch.arange(lo, min(steps, lo + batch_size), device=device, dtype=torch.float32) / steps
                point = (base + r[:, None, None] * (x - base)).requires_grad_(True)
                swap = {(point_name, l): lambda h, kw, point=point: point.to(h.dtype)}
                with hooked(ad, swap):  # blocks before l are not run: nothing upstream of the swap matters
                    h = ref.inputs[l].expand(len(r), -1, -1)
                    for k in range(l, ad.n_layers):
                        h = hidden_of(ad.blocks[k](h, **ref.block_kwargs[k]))
                logits = ad.unembed(ad.final_norm(h[:, answer_start - 1:T - 1])).float()
                probs = torch.softmax(logits, -1)
                objective = probs.gather(-1, targets.expand(len(r), -1)[..., None]).sum()
                (grad,) = torch.autograd.grad(objective, point)
                total += (grad * (x - base)).sum(-1).sum(0)
            out[l] = (total / steps).detach().cpu().numpy()
    return out
