"""Power sampling: block-wise Metropolis–Hastings towards p^α (Karan & Du), in two modes.

The proposal is the model at temperature 1/α. A chain grows block by block; after each block it makes N
MH moves, each of which picks a cut point, regenerates the suffix from the proposal and accepts or rejects.

* `exact`: a correct MH chain for p^α over completions of at most `max_new_tokens` tokens. EOS ends a
  completion (absorbing); a proposal runs to EOS or to the current block's end, so it may be longer or
  shorter than the current state; the ratio covers both full suffixes; the cut point is uniform over the
  current state's positions, so the Hastings term log(t_x) − log(t_y) corrects for the two lengths.
* `reference`: what the published code does: a top-k 50 proposal, a suffix regenerated only up to the
  current length, the ratio over the proposal's length, no cut-point correction, EOS checked after each
  block (in the generated tokens only).

Only per-token scalars are kept: the sampled token, log p under the model at T=1, log q under the proposal.
The algorithm is written once over a `Stepper`: `CachedStepper` reuses the chain's KV cache up to the cut
point, `ReencodeStepper` re-encodes the whole prefix at every step (the reference's cost, and a check).
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field

import torch
from transformers import DynamicCache

MODES = ("exact", "reference")


@dataclass
class PowerConfig:
    """Settings of one power-sampling run; `validate` explains what is wrong with bad values."""

    alpha: float = 4.0
    block_size: int = 192
    mcmc_steps: int = 10
    max_new_tokens: int = 3072
    top_k: int = 0  # 0 = off; the reference mode always uses 50
    mode: str = "exact"

    def validate(self) -> PowerConfig:
        if not isinstance(self.alpha, int | float) or not self.alpha > 0 or math.isinf(self.alpha):
            raise ValueError(f"alpha must be a positive number (the target is p^alpha), got {self.alpha!r}")
        if not isinstance(self.block_size, int) or self.block_size < 1:
            raise ValueError(f"block_size must be an integer of at least 1, got {self.block_size!r}")
        if not isinstance(self.mcmc_steps, int) or self.mcmc_steps < 0:
            raise ValueError(f"mcmc_steps must be an integer of at least 0, got {self.mcmc_steps!r}")
        if not isinstance(self.max_new_tokens, int) or self.max_new_tokens < self.block_size:
            raise ValueError(f"max_new_tokens must be an integer of at least block_size ({self.block_size}), "
                             f"got {self.max_new_tokens!r}")
        if self.mode not in MODES:
            raise ValueError(f"mode must be one of {MODES}, got {self.mode!r}")
        if not isinstance(self.top_k, int) or self.top_k < 0:
            raise ValueError(f"top_k must be 0 (off) or a positive integer, got {self.top_k!r}")
        return self

    @property
    def temperature(self) -> float:
        return 1.0 / self.alpha

    @property
    def proposal_top_k(self) -> int:
        return 50 if self.mode == "reference" else self.top_k


@dataclass
class PowerResult:
    """One chain's final completion and what it cost."""

    tokens: list[int]
    logp: list[float]
    logq: list[float]
    stopped: bool
    acceptance: list[float]  # acceptance rate of each block's MH moves
    decoded_tokens: int = 0  # every sampled token, rejected proposals included
    prefill_tokens: int = 0  # context tokens run through the model besides the newest one of each pass
    forward_passes: int = 0
    seconds: float = 0.0
    moves: list[tuple[int, bool]] = field(default_factory=list)  # (cut position, accepted) per MH move


# --------------------------------------------------------------------------------------------------
# Steppers: how the next-token logits of a growing sequence are computed
# --------------------------------------------------------------------------------------------------


class ReencodeStepper:
    """Runs the whole sequence through the model at every step (no cache): simple, slow, a reference."""

    def __init__(self, model):
        self.model = model
        self.device = next(model.parameters()).device
        self.prefill = 0
        self.passes = 0

    def start(self, tokens: list[int]):
        return list(tokens)

    def logits(self, state) -> torch.Tensor:
        x = torch.tensor([state], dtype=torch.long, device=self.device)
        with torch.inference_mode():
            out = self.model(input_ids=x, use_cache=False).logits[0, -1].float()
        self.prefill += len(state) - 1
        self.passes += 1
        return out

    def push(self, state, token: int):
        return [*state, token]

    def fork(self, state, length: int):
        return list(state[:length])


class CachedStepper:
    """Keeps a KV cache per sequence; a fork at length n reuses the first n−1 cached positions (no copy)."""

    def __init__(self, model):
        self.model = model
        self.device = next(model.parameters()).device
        self.prefill = 0
        self.passes = 0

    def start(self, tokens: list[int]):
        return {"tokens": list(tokens), "cache": DynamicCache(), "cached": 0}

    def logits(self, state) -> torch.Tensor:
        todo = state["tokens"][state["cached"]:]
        x = torch.tensor([todo], dtype=torch.long, device=self.device)
        positions = torch.arange(state["cached"], len(state["tokens"]), device=self.device)[None]
        with torch.inference_mode():
            out = self.model(input_ids=x, position_ids=positions, past_key_values=state["cache"], use_cache=True)
        self.prefill += len(todo) - 1
        self.passes += 1
        state["cached"] = len(state["tokens"])
        return out.logits[0, -1].float()

    def push(self, state, token: int):
        state["tokens"].append(token)
        return state

    def fork(self, state, length: int):
        """A new sequence = the first `length` tokens; cache slices are views, new tokens concatenate anew."""
        keep = min(length - 1, state["cached"])
        cache = DynamicCache()
        for index, layer in enumerate(state["cache"].layers):
            if layer.get_seq_length() > 0:
                cache.update(layer.keys[..., :keep, :], layer.values[..., :keep, :], index)
        return {"tokens": list(state["tokens"][:length]), "cache": cache, "cached": keep}


# --------------------------------------------------------------------------------------------------
# The sampler
# --------------------------------------------------------------------------------------------------


def _draw(logits: torch.Tensor, temperature: float, top_k: int, generator: torch.Generator) -> tuple[int, float, float]:
    """One token from softmax(logits / T) (top-k if set): (token, log p at T=1, log q of the draw)."""
    logp = torch.log_softmax(logits, -1)
    scaled = logits / temperature
    if top_k and top_k < scaled.shape[-1]:
        kth = torch.topk(scaled, top_k).values[-1]
        scaled = scaled.masked_fill(scaled < kth, float("-inf"))
    logq = torch.log_softmax(scaled, -1)
    token = int(torch.multinomial(logq.exp(), 1, generator=generator))
    return token, float(logp[token]), float(logq[token])


def _extend(stepper, state, limit: int, stops: set[int], cfg: PowerConfig, generator):
    """Sample from the proposal until a stop token or until the sequence has `limit` generated tokens."""
    tokens, logp, logq = [], [], []
    while len(tokens) < limit:
        token, lp, lq = _draw(stepper.logits(state), cfg.temperature, cfg.proposal_top_k, generator)
        state = stepper.push(state, token)
        tokens.append(token)
        logp.append(lp)
        logq.append(lq)
        if token in stops:
            break
    return state, tokens, logp, logq


def power_sample(model, prompt: list[int], stop_ids, cfg: PowerConfig, seed: int = 0, cache: bool = True,
                 stepper=None) -> PowerResult:
    """One power-sampling chain from `prompt`; `cache=False` re-encodes every prefix (same numbers, slower)."""
    cfg.validate()
    if not prompt:
        raise ValueError("The prompt is empty: power sampling needs at least one prompt token.")
    start = time.perf_counter()
    stepper = stepper or (CachedStepper(model) if cache else ReencodeStepper(model))
    generator = torch.Generator().manual_seed(seed)
    stops = set(stop_ids)
    P, alpha = len(prompt), cfg.alpha
    state = stepper.start(prompt)
    tokens: list[int] = []
    logp: list[float] = []
    logq: list[float] = []
    decoded, acceptance, moves = 0, [], []
    n_blocks = math.ceil(cfg.max_new_tokens / cfg.block_size)
    for block in range(n_blocks):
        cap = min((block + 1) * cfg.block_size, cfg.max_new_tokens)
        if tokens and tokens[-1] in stops:
            break  # exact mode: EOS is absorbing, nothing more to extend
        state, new, lp, lq = _extend(stepper, state, cap - len(tokens), stops, cfg, generator)
        tokens, logp, logq = tokens + new, logp + lp, logq + lq
        decoded += len(new)
        accepted = 0
        for _ in range(cfg.mcmc_steps):
            t = len(tokens)
            i = int(torch.randint(t, (1,), generator=generator))  # cut: regenerate tokens i..
            limit = (t - i) if cfg.mode == "reference" else (cap - i)
            prop_state, y, ylp, ylq = _extend(stepper, stepper.fork(state, P + i), limit, stops, cfg, generator)
            decoded += len(y)
            if cfg.mode == "reference":
                s = len(y)  # the current window is cut to the proposal's length; no Hastings term
                log_r = (alpha * sum(ylp) - alpha * sum(logp[i:i + s]) + sum(logq[i:i + s]) - sum(ylq))
            else:
                log_r = (alpha * sum(ylp) - alpha * sum(logp[i:]) + sum(logq[i:]) - sum(ylq)
                         + math.log(t) - math.log(i + len(y)))
            accept = math.log(float(torch.rand((), generator=generator)) + 1e-300) < log_r
            moves.append((i, accept))
            if accept:
                accepted += 1
                state = prop_state
                tokens, logp, logq = tokens[:i] + y, logp[:i] + ylp, logq[:i] + ylq
        if cfg.mcmc_steps:
            acceptance.append(accepted / cfg.mcmc_steps)
        if cfg.mode == "reference" and any(tok in stops for tok in tokens):
            end = next(k for k, tok in enumerate(tokens) if tok in stops) + 1
            tokens, logp, logq = tokens[:end], logp[:end], logq[:end]
            break
    return PowerResult(tokens=tokens, logp=logp, logq=logq, stopped=bool(tokens) and tokens[-1] in stops,
                       acceptance=acceptance, decoded_tokens=decoded, prefill_tokens=stepper.prefill,
                       forward_passes=stepper.passes, seconds=time.perf_counter() - start, moves=moves)
