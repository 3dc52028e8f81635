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
The algorithm is written once over an engine: `CachedEngine` runs many chains in one batch and reuses each
chain's KV cache up to its cut point; `ReencodeEngine` re-encodes every prefix (the reference's cost).
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
# Engines: how sequences are extended from the proposal
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


@dataclass
class Chain:
    """One MH chain: its prompt, the current completion with per-token scalars, its RNG and engine state."""

    prompt: list[int]
    generator: torch.Generator
    tokens: list[int] = field(default_factory=list)
    logp: list[float] = field(default_factory=list)
    logq: list[float] = field(default_factory=list)
    state: object = None
    finished: bool = False
    decoded: int = 0
    acceptance: list[float] = field(default_factory=list)
    moves: list[tuple[int, bool]] = field(default_factory=list)


@dataclass
class Extension:
    """A request to extend `chain` from its first `keep` generated tokens by at most `limit` new ones."""

    chain: Chain
    keep: int
    limit: int
    tokens: list[int] = field(default_factory=list)
    logp: list[float] = field(default_factory=list)
    logq: list[float] = field(default_factory=list)
    state: object = None


class Engine:
    """What every engine counts: forward passes, and context tokens run besides the newest one of each pass."""

    def __init__(self, model):
        self.model = model
        self.device = next(model.parameters()).device
        self.prefill = 0
        self.passes = 0

    def start(self, chains: list[Chain]) -> None:
        """Prepare the chains' engine state before their first extension (nothing by default)."""


class SerialEngine(Engine):
    """Extends one chain at a time and keeps nothing between proposals: each one re-encodes its whole prefix.

    With `cache_within_proposal` the proposal then decodes with a KV cache, as one `generate` call does: the
    published implementation's cost pattern. Without it every token re-encodes everything: the simplest
    possible engine, against which the others are checked (it also runs models without a KV cache).
    """

    cache_within_proposal = False

    def extend(self, requests: list[Extension], cfg: PowerConfig, stops: set[int]) -> None:
        for req in requests:
            seq = req.chain.prompt + req.chain.tokens[:req.keep]
            cache = DynamicCache() if self.cache_within_proposal else None
            todo = seq
            while len(req.tokens) < req.limit:
                x = torch.tensor([todo], dtype=torch.long, device=self.device)
                with torch.inference_mode():
                    out = self.model(input_ids=x, past_key_values=cache, use_cache=cache is not None)
                self.prefill += len(todo) - 1
                self.passes += 1
                token, lp, lq = _draw(out.logits[0, -1].float(), cfg.temperature, cfg.proposal_top_k,
                                      req.chain.generator)
                req.tokens.append(token)
                req.logp.append(lp)
                req.logq.append(lq)
                if token in stops:
                    break
                seq.append(token)
                todo = [token] if cache is not None else seq


class ReencodeEngine(SerialEngine):
    """Every token re-encodes prompt and prefix (no cache at all)."""


class PrefillEngine(SerialEngine):
    """The reference's pattern: every proposal re-encodes its prefix, then decodes with a cache."""

    cache_within_proposal = True


class CachedEngine(Engine):
    """Extends many chains in one lockstep batch, reusing each chain's KV cache up to its cut point.

    A chain's state is its compact cache: per layer, keys and values of prompt + completion except the last
    token. A batch left-pads the kept prefixes, decodes one token per live row per step, and rows stop at a
    stop token or at their limit. Only the sampled token and two log-probabilities are kept per step.
    """

    def start(self, chains: list[Chain]) -> None:
        """Encode every prompt except its last token, in one batch; a prefix shared by all is encoded once."""
        from helpers.decoding import MIN_SHARED_PREFIX, left_pad, shared_prefix_length

        todo = [c for c in chains if len(c.prompt) > 1]
        for chain in chains:
            chain.state = []
        if not todo:
            return
        prompts = [c.prompt[:-1] for c in todo]
        shared = shared_prefix_length(prompts) if len(prompts) > 1 else 0
        shared = shared if shared >= MIN_SHARED_PREFIX else 0
        cache = DynamicCache()
        with torch.inference_mode():
            if shared:
                self.model(input_ids=torch.tensor([prompts[0][:shared]], device=self.device), past_key_values=cache,
                           use_cache=True)
                cache.batch_repeat_interleave(len(prompts))
                self.passes += 1
            ids, suffix_mask = left_pad([p[shared:] for p in prompts], 0, self.device)
            mask = torch.cat([torch.ones((len(prompts), shared), dtype=torch.long, device=self.device), suffix_mask], 1)
            positions = shared + (suffix_mask.cumsum(-1) - 1).clamp(min=0)
            self.model(input_ids=ids, attention_mask=mask, position_ids=positions, past_key_values=cache,
                       use_cache=True)
        self.passes += 1
        self.prefill += shared + sum(len(p) - shared for p in prompts)
        for row, chain in enumerate(todo):
            cols = mask[row].bool().nonzero()[:, 0]
            chain.state = [(layer.keys[row][:, cols].clone(), layer.values[row][:, cols].clone()) for layer in cache.layers]

    def extend(self, requests: list[Extension], cfg: PowerConfig, stops: set[int]) -> None:
        if not requests:
            return
        n_layers = len(self.model.model.layers)
        B = len(requests)
        kept = [len(r.chain.prompt) + r.keep - 1 for r in requests]  # cached positions each row starts from
        width = max(kept)
        cache = DynamicCache()
        template = next((r.chain.state for r in requests if r.chain.state), None)
        if width > 0:
            for index in range(n_layers):
                k0, v0 = template[index]
                keys = k0.new_zeros((B, k0.shape[0], width, k0.shape[-1]))
                values = v0.new_zeros((B, v0.shape[0], width, v0.shape[-1]))
                for row, req in enumerate(requests):
                    if kept[row]:
                        k, v = req.chain.state[index]
                        keys[row, :, width - kept[row]:] = k[:, :kept[row]]
                        values[row, :, width - kept[row]:] = v[:, :kept[row]]
                cache.update(keys, values, index)
        mask = torch.zeros((B, width), dtype=torch.long, device=self.device)
        for row in range(B):
            mask[row, width - kept[row]:] = 1
        last = [(r.chain.prompt + r.chain.tokens[:r.keep])[-1] for r in requests]
        token = torch.tensor(last, dtype=torch.long, device=self.device)
        position = torch.tensor(kept, dtype=torch.long, device=self.device)
        rows = [i for i, r in enumerate(requests) if r.limit > 0]  # batch row -> request index
        if len(rows) < B:
            keep = torch.tensor(rows, dtype=torch.long, device=self.device)
            cache.batch_select_indices(keep)
            mask, token, position = mask[keep], token[keep], position[keep]
        while rows:
            mask = torch.cat([mask, torch.ones_like(mask[:, :1])], dim=1)
            with torch.inference_mode():
                out = self.model(input_ids=token[:, None], attention_mask=mask, position_ids=position[:, None],
                                 past_key_values=cache, use_cache=True)
            self.passes += 1
            logits = out.logits[:, -1].float()
            token = token.clone()
            still = []
            for b, i in enumerate(rows):
                req = requests[i]
                tok, lp, lq = _draw(logits[b], cfg.temperature, cfg.proposal_top_k, req.chain.generator)
                req.tokens.append(tok)
                req.logp.append(lp)
                req.logq.append(lq)
                token[b] = tok
                if tok in stops or len(req.tokens) >= req.limit:  # done: keep its cache columns (last token unfed)
                    cols = mask[b].bool().nonzero()[:, 0]
                    req.state = [(cache.layers[l].keys[b][:, cols].clone(), cache.layers[l].values[b][:, cols].clone())
                                 for l in range(n_layers)]
                else:
                    still.append(b)
            position = position + 1
            if len(still) < len(rows):
                keep = torch.tensor(still, dtype=torch.long, device=self.device)
                rows = [rows[b] for b in still]
                if rows:
                    cache.batch_select_indices(keep)
                    mask, token, position = mask[keep], token[keep], position[keep]
        for i, req in enumerate(requests):
            if req.limit <= 0:  # nothing decoded: the state is the kept prefix
                req.state = [(k[:, :kept[i]].clone(), v[:, :kept[i]].clone()) for k, v in req.chain.state] if req.chain.state else []


# --------------------------------------------------------------------------------------------------
# The sampler: one MH driver for every engine
# --------------------------------------------------------------------------------------------------


def _adopt(chain: Chain, req: Extension) -> None:
    chain.tokens = chain.tokens[:req.keep] + req.tokens
    chain.logp = chain.logp[:req.keep] + req.logp
    chain.logq = chain.logq[:req.keep] + req.logq
    chain.state = req.state


def run_chains(engine, prompts: list[list[int]], stop_ids, cfg: PowerConfig, seeds: list[int]) -> list[PowerResult]:
    """Power-sample one chain per (prompt, seed) pair, all chains moving in lockstep through the blocks."""
    cfg.validate()
    if len(prompts) != len(seeds):
        raise ValueError("give one seed per prompt")
    if not prompts or any(not p for p in prompts):
        raise ValueError("The prompt is empty: power sampling needs at least one prompt token.")
    start = time.perf_counter()
    stops = set(stop_ids)
    alpha = cfg.alpha
    chains = [Chain(list(p), torch.Generator().manual_seed(int(s))) for p, s in zip(prompts, seeds, strict=True)]
    engine.start(chains)
    n_blocks = math.ceil(cfg.max_new_tokens / cfg.block_size)
    for block in range(n_blocks):
        cap = min((block + 1) * cfg.block_size, cfg.max_new_tokens)
        active = [c for c in chains if not c.finished]
        if not active:
            break
        grow = [Extension(c, len(c.tokens), cap - len(c.tokens)) for c in active
                if not (c.tokens and c.tokens[-1] in stops)]  # exact mode: EOS is absorbing
        engine.extend(grow, cfg, stops)
        for req in grow:
            req.chain.decoded += len(req.tokens)
            _adopt(req.chain, req)
        accepted = {id(c): 0 for c in active}
        for _ in range(cfg.mcmc_steps):
            proposals = []
            for c in active:
                t = len(c.tokens)
                i = int(torch.randint(t, (1,), generator=c.generator))  # cut: regenerate tokens i..
                proposals.append(Extension(c, i, (t - i) if cfg.mode == "reference" else (cap - i)))
            engine.extend(proposals, cfg, stops)
            for req in proposals:
                c, i, t, y = req.chain, req.keep, len(req.chain.tokens), req.tokens
                c.decoded += len(y)
                if cfg.mode == "reference":
                    s = len(y)  # the current window is cut to the proposal's length; no Hastings term
                    log_r = alpha * sum(req.logp) - alpha * sum(c.logp[i:i + s]) + sum(c.logq[i:i + s]) - sum(req.logq)
                else:
                    log_r = (alpha * sum(req.logp) - alpha * sum(c.logp[i:]) + sum(c.logq[i:]) - sum(req.logq)
                             + math.log(t) - math.log(i + len(y)))
                accept = math.log(float(torch.rand((), generator=c.generator)) + 1e-300) < log_r
                c.moves.append((i, accept))
                if accept:
                    accepted[id(c)] += 1
                    _adopt(c, req)
        for c in active:
            if cfg.mcmc_steps:
                c.acceptance.append(accepted[id(c)] / cfg.mcmc_steps)
            if cfg.mode == "reference" and any(tok in stops for tok in c.tokens):
                end = next(k for k, tok in enumerate(c.tokens) if tok in stops) + 1
                c.tokens, c.logp, c.logq, c.finished = c.tokens[:end], c.logp[:end], c.logq[:end], True
    seconds = time.perf_counter() - start
    share = 1.0 / len(chains)
    return [PowerResult(tokens=c.tokens, logp=c.logp, logq=c.logq, stopped=bool(c.tokens) and c.tokens[-1] in stops,
                        acceptance=c.acceptance, decoded_tokens=c.decoded,
                        prefill_tokens=round(engine.prefill * share), forward_passes=round(engine.passes * share),
                        seconds=seconds * share, moves=c.moves) for c in chains]


def power_sample(model, prompt: list[int], stop_ids, cfg: PowerConfig, seed: int = 0, cache: bool = True) -> PowerResult:
    """One power-sampling chain; `cache=False` re-encodes every prefix (the same numbers, at the reference's cost)."""
    engine = CachedEngine(model) if cache else ReencodeEngine(model)
    return run_chains(engine, [list(prompt)], stop_ids, cfg, [seed])[0]
