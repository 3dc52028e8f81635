"""One batched decode loop, written out so it can be read top to bottom.

Prompts of different lengths are left-padded into one batch; every step feeds one token per live row,
keeps only per-token scalars (the chosen token, its log-probability under the model at T=1 and under
the sampling distribution), and drops rows from the batch as soon as they emit a stop token.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field

import torch
from transformers import DynamicCache


@dataclass
class Completion:
    """A finished row: generated tokens (stop token included when one was emitted) and their log-probs."""

    tokens: list[int]
    logp: list[float]  # log p(token | prefix) under the model at temperature 1
    logq: list[float]  # log of the probability the token was drawn with (0 for greedy)
    stopped: bool  # True when the completion ended with a stop token

    @property
    def sum_logp(self) -> float:
        return float(sum(self.logp))


@dataclass
class DecodeStats:
    """What a run cost: tokens decoded and prefilled, forward passes, wall time."""

    decoded_tokens: int = 0
    prefill_tokens: int = 0
    forward_passes: int = 0
    seconds: float = 0.0
    extra: dict = field(default_factory=dict)

    def add(self, other: DecodeStats) -> None:
        self.decoded_tokens += other.decoded_tokens
        self.prefill_tokens += other.prefill_tokens
        self.forward_passes += other.forward_passes
        self.seconds += other.seconds

    def as_dict(self) -> dict:
        return {"decoded_tokens": self.decoded_tokens, "prefill_tokens": self.prefill_tokens,
                "forward_passes": self.forward_passes, "seconds": round(self.seconds, 4), **self.extra}


def left_pad(prompts: Sequence[Sequence[int]], pad_id: int, device) -> tuple[torch.Tensor, torch.Tensor]:
    """Stack token lists into (ids, attention_mask), padding on the left."""
    width = max(len(p) for p in prompts)
    ids = torch.full((len(prompts), width), pad_id, dtype=torch.long)
    mask = torch.zeros((len(prompts), width), dtype=torch.long)
    for row, prompt in enumerate(prompts):
        ids[row, width - len(prompt):] = torch.tensor(list(prompt), dtype=torch.long)
        mask[row, width - len(prompt):] = 1
    return ids.to(device), mask.to(device)


MIN_SHARED_PREFIX = 16


def shared_prefix_length(prompts: Sequence[Sequence[int]]) -> int:
    """Length of the common prefix of all prompts, leaving at least one token of each to prefill."""
    first, limit = prompts[0], min(len(p) for p in prompts) - 1
    n = 0
    while n < limit and all(p[n] == first[n] for p in prompts):
        n += 1
    return n


def choose_tokens(logits: torch.Tensor, temperature: float, top_k: int, generator: torch.Generator | None
                  ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Pick one token per row from float32 `logits` [B, V]; return (token, log p at T=1, log q of the draw).

    temperature 0 means greedy (log q = 0). `top_k` > 0 restricts the draw to the k most likely tokens.
    """
    logp_all = torch.log_softmax(logits, dim=-1)
    if temperature == 0:
        token = logits.argmax(dim=-1)
        return token, logp_all.gather(-1, token[:, None])[:, 0], torch.zeros_like(token, dtype=logits.dtype)
    scaled = logits / temperature
    if top_k and top_k < scaled.shape[-1]:
        kth = torch.topk(scaled, top_k, dim=-1).values[:, -1:]
        scaled = scaled.masked_fill(scaled < kth, float("-inf"))
    logq_all = torch.log_softmax(scaled, dim=-1)
    token = torch.multinomial(logq_all.exp(), 1, generator=generator)[:, 0]
    return token, logp_all.gather(-1, token[:, None])[:, 0], logq_all.gather(-1, token[:, None])[:, 0]


@torch.inference_mode()
def decode(model, prompts: Sequence[Sequence[int]], max_new_tokens: int, stop_ids: Sequence[int],
           pad_id: int, temperature: float = 0.0, top_k: int = 0,
           generator: torch.Generator | None = None) -> tuple[list[Completion], DecodeStats]:
    """Decode all `prompts` in one lockstep batch; rows leave the batch when they stop."""
    if max_new_tokens < 1:
        raise ValueError(f"max_new_tokens must be at least 1, got {max_new_tokens}.")
    if not prompts or any(len(p) == 0 for p in prompts):
        raise ValueError("Every prompt needs at least one token.")
    start = time.perf_counter()
    device = next(model.parameters()).device
    stats = DecodeStats()
    stops = torch.tensor(sorted(set(stop_ids)), dtype=torch.long, device=device)
    cache = DynamicCache()
    shared = shared_prefix_length(prompts) if len(prompts) > 1 else 0
    if shared < MIN_SHARED_PREFIX:
        shared = 0
    if shared:  # encode the common prefix once, then copy its cache to every row
        model(input_ids=torch.tensor([list(prompts[0][:shared])], device=device), past_key_values=cache,
              use_cache=True)
        cache.batch_repeat_interleave(len(prompts))
        stats.forward_passes += 1
    ids, suffix_mask = left_pad([p[shared:] for p in prompts], pad_id, device)
    positions = shared + (suffix_mask.cumsum(-1) - 1).clamp(min=0)
    mask = torch.cat([torch.ones((len(prompts), shared), dtype=torch.long, device=device), suffix_mask], dim=1)
    out = model(input_ids=ids, attention_mask=mask, position_ids=positions, past_key_values=cache, use_cache=True)
    stats.prefill_tokens += shared + sum(len(p) - shared for p in prompts)
    stats.forward_passes += 1
    logits = out.logits[:, -1, :].float()
    next_pos = positions[:, -1] + 1
    live = torch.arange(len(prompts), device=device)  # original row index of each batch row
    results: list[Completion | None] = [None] * len(prompts)
    tokens = [[] for _ in prompts]
    logps = [[] for _ in prompts]
    logqs = [[] for _ in prompts]
    for step in range(max_new_tokens):
        token, logp, logq = choose_tokens(logits, temperature, top_k, generator)
        stats.decoded_tokens += len(live)
        token_l, logp_l, logq_l = token.tolist(), logp.tolist(), logq.tolist()
        stopped = torch.isin(token, stops)
        for b, row in enumerate(live.tolist()):
            tokens[row].append(token_l[b])
            logps[row].append(logp_l[b])
            logqs[row].append(logq_l[b])
        done = stopped | (step == max_new_tokens - 1)
        for b in done.nonzero()[:, 0].tolist():
            row = int(live[b])
            results[row] = Completion(tokens[row], logps[row], logqs[row], bool(stopped[b]))
        if bool(done.all()):
            break
        keep = (~done).nonzero()[:, 0]
        if len(keep) < len(live):
            cache.batch_select_indices(keep)
            live, token, mask, next_pos = live[keep], token[keep], mask[keep], next_pos[keep]
        mask = torch.cat([mask, torch.ones_like(mask[:, :1])], dim=1)
        out = model(input_ids=token[:, None], attention_mask=mask, position_ids=next_pos[:, None],
                    past_key_values=cache, use_cache=True)
        stats.forward_passes += 1
        logits = out.logits[:, -1, :].float()
        next_pos = next_pos + 1
    stats.seconds = time.perf_counter() - start
    return [r for r in results if r is not None], stats


def decode_in_batches(model, prompts: Sequence[Sequence[int]], max_new_tokens: int, stop_ids: Sequence[int],
                      pad_id: int, batch_size: int = 16, temperature: float = 0.0, top_k: int = 0,
                      seed: int | None = None) -> tuple[list[Completion], DecodeStats]:
    """`decode` over chunks of similar-length prompts (less padding); results come back in input order."""
    order = sorted(range(len(prompts)), key=lambda i: len(prompts[i]))
    generator = None
    if temperature > 0:
        generator = torch.Generator(device=next(model.parameters()).device)
        generator.manual_seed(0 if seed is None else seed)
    results: list[Completion | None] = [None] * len(prompts)
    total = DecodeStats()
    for lo in range(0, len(order), batch_size):
        chunk = order[lo:lo + batch_size]
        completions, stats = decode(model, [prompts[i] for i in chunk], max_new_tokens, stop_ids, pad_id,
                                    temperature, top_k, generator)
        total.add(stats)
        for i, completion in zip(chunk, completions, strict=True):
            results[i] = completion
    return results, total  # type: ignore[return-value]
