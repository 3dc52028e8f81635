"""The book's one decode loop, written out so it can be read top to bottom.

Every method decodes through `CachedEngine.extend`: greedy and temperature sampling extend each prompt once,
power sampling extends its chains again and again from cut points. Rows of different lengths are left-padded
into one batch; every step feeds one token per live row, keeps only per-token scalars (the chosen token, its
log-probability under the model at T=1 and under the distribution it was drawn from), and drops a row as soon
as it emits a stop token or reaches its limit. Each row has its own random generator, so a sample does not
depend on which other rows share its batch.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field

import torch
from transformers import DynamicCache

MIN_SHARED_PREFIX = 16


@dataclass
class Completion:
    """What one row produced and what it cost: the result type of a plain decode and of a power-sampling chain.

    Costs shared by a batch (prefill, forward passes, wall time) are split over its rows so that they add up
    to the batch's totals.
    """

    tokens: list[int]  # generated tokens (the stop token included when one was emitted)
    logp: list[float]  # log p(token | prefix) under the model at temperature 1
    logq: list[float]  # log of the probability the token was drawn with (0 for greedy)
    stopped: bool  # True when the completion ended with a stop token
    decoded_tokens: int = 0  # every sampled token, rejected proposals included
    prefill_tokens: int = 0  # context tokens run through the model besides the newest one of each pass
    forward_passes: int = 0
    seconds: float = 0.0
    acceptance: list[float] = field(default_factory=list)  # power sampling: acceptance rate of each block's moves
    moves: list[tuple[int, bool]] = field(default_factory=list)  # power sampling: (cut position, accepted)

    @property
    def sum_logp(self) -> float:
        return float(sum(self.logp))


def split_evenly(total: int, n: int) -> list[int]:
    """`total` split into `n` integer shares that differ by at most one and add up to it exactly."""
    return [total // n + (1 if i < total % n else 0) for i in range(n)]


def total(completions: Sequence[Completion], name: str) -> float:
    """The sum of one cost field over completions (a batch's total)."""
    return sum(getattr(c, name) for c in completions)


def left_pad(prompts: Sequence[Sequence[int]], pad_id: int, device) -> tuple[torch.Tensor, torch.Tensor]:
    """Stack token lists into (ids, attention_mask), padding on the left."""
    width = max(len(p) for p in prompts)
    ids = torch.full((len(prompts), width), pad_id, dtype=torch.long)
    mask = torch.zeros((len(prompts), width), dtype=torch.long)
    for row, prompt in enumerate(prompts):
        ids[row, width - len(prompt):] = torch.tensor(list(prompt), dtype=torch.long)
        mask[row, width - len(prompt):] = 1
    return ids.to(device), mask.to(device)


def shared_prefix_length(prompts: Sequence[Sequence[int]]) -> int:
    """Length of the common prefix of all prompts, leaving at least one token of each to prefill."""
    first, limit = prompts[0], min(len(p) for p in prompts) - 1
    n = 0
    while n < limit and all(p[n] == first[n] for p in prompts):
        n += 1
    return n


def draw(logits: torch.Tensor, temperature: float, top_k: int, generators: Sequence[torch.Generator | None]
         ) -> tuple[list[int], list[float], list[float]]:
    """One token per row of float32 `logits` [B, V]: (tokens, log p at T=1, log q of the draw), as lists.

    Temperature 0 is greedy (log q = 0). `top_k` > 0 restricts a draw to the k most likely tokens. Row b draws
    with `generators[b]` (CPU generators, so a seed means the same thing on every device).
    """
    logp_all = torch.log_softmax(logits, dim=-1)
    if temperature == 0:
        token = logits.argmax(dim=-1)
        return token.tolist(), logp_all.gather(-1, token[:, None])[:, 0].tolist(), [0.0] * len(token)
    scaled = logits / temperature
    if top_k and top_k < scaled.shape[-1]:
        kth = torch.topk(scaled, top_k, dim=-1).values[:, -1:]
        scaled = scaled.masked_fill(scaled < kth, float("-inf"))
    logq_all = torch.log_softmax(scaled, dim=-1)
    probs = logq_all.exp().cpu()
    token = torch.tensor([int(torch.multinomial(probs[b], 1, generator=g)) for b, g in enumerate(generators)],
                         device=logits.device)
    return (token.tolist(), logp_all.gather(-1, token[:, None])[:, 0].tolist(),
            logq_all.gather(-1, token[:, None])[:, 0].tolist())


@dataclass
class Row:
    """A sequence being decoded: its prompt, generated tokens with per-token scalars, RNG and engine state."""

    prompt: list[int]
    generator: torch.Generator | None = None
    tokens: list[int] = field(default_factory=list)
    logp: list[float] = field(default_factory=list)
    logq: list[float] = field(default_factory=list)
    state: object = None  # the engine's per-row memory (a compact KV cache for `CachedEngine`)


@dataclass
class Extension:
    """A request to extend `row` from its first `keep` generated tokens by at most `limit` new ones."""

    row: Row
    keep: int
    limit: int
    tokens: list[int] = field(default_factory=list)
    logp: list[float] = field(default_factory=list)
    logq: list[float] = field(default_factory=list)
    state: object = None

    def append(self, token: int, logp: float, logq: float) -> None:
        self.tokens.append(token)
        self.logp.append(logp)
        self.logq.append(logq)


class Engine:
    """How rows are extended. Every engine counts forward passes and prefill (context tokens run through the
    model besides the newest one of each pass)."""

    def __init__(self, model):
        self.model = model
        self.device = next(model.parameters()).device
        self.prefill = 0
        self.passes = 0

    def start(self, rows: list[Row]) -> None:
        """Prepare the rows' engine state before their first extension (nothing by default)."""

    def extend(self, requests: list[Extension], temperature: float, top_k: int, stops: set[int],
               keep_state: bool = True) -> None:
        raise NotImplementedError


class CachedEngine(Engine):
    """The decode loop: extends many rows in one lockstep batch, reusing each row's KV cache up to its cut.

    A row's state is its compact cache: per layer, keys and values of prompt + kept tokens except the last one.
    A batch left-pads these caches, feeds every row its last token, and decodes one token per live row per step.
    """

    @torch.inference_mode()
    def start(self, rows: list[Row]) -> None:
        """Encode every prompt except its last token, in one batch; a prefix shared by all is encoded once."""
        todo = [r for r in rows if len(r.prompt) > 1]
        for row in rows:
            row.state = []
        if not todo:
            return
        prompts = [r.prompt[:-1] for r in todo]
        shared = shared_prefix_length(prompts) if len(prompts) > 1 else 0
        shared = shared if shared >= MIN_SHARED_PREFIX else 0
        cache = DynamicCache()
        if shared:  # the few-shot examples: encode once, copy the cache to every row
            self.model(input_ids=torch.tensor([prompts[0][:shared]], device=self.device), past_key_values=cache,
                       use_cache=True)
            cache.batch_repeat_interleave(len(prompts))
            self.passes += 1
        ids, suffix_mask = left_pad([p[shared:] for p in prompts], 0, self.device)
        mask = torch.cat([torch.ones((len(prompts), shared), dtype=torch.long, device=self.device), suffix_mask], 1)
        positions = shared + (suffix_mask.cumsum(-1) - 1).clamp(min=0)
        self.model(input_ids=ids, attention_mask=mask, position_ids=positions, past_key_values=cache, use_cache=True)
        self.passes += 1
        self.prefill += shared + sum(len(p) - shared for p in prompts)
        for b, row in enumerate(todo):
            cols = mask[b].bool().nonzero()[:, 0]
            row.state = [(layer.keys[b][:, cols].clone(), layer.values[b][:, cols].clone()) for layer in cache.layers]

    def _batch_cache(self, requests: list[Extension], kept: list[int]) -> DynamicCache:
        """A left-padded cache holding each request's first `kept` cached positions."""
        cache, width = DynamicCache(), max(kept)
        template = next((r.row.state for r in requests if r.row.state), None)
        if width == 0 or template is None:
            return cache
        for index, (k0, v0) in enumerate(template):
            keys = k0.new_zeros((len(requests), k0.shape[0], width, k0.shape[-1]))
            values = v0.new_zeros((len(requests), v0.shape[0], width, v0.shape[-1]))
            for b, req in enumerate(requests):
                if kept[b]:
                    k, v = req.row.state[index]
                    keys[b, :, width - kept[b]:] = k[:, :kept[b]]
                    values[b, :, width - kept[b]:] = v[:, :kept[b]]
            cache.update(keys, values, index)
        return cache

    @torch.inference_mode()
    def extend(self, requests: list[Extension], temperature: float, top_k: int, stops: set[int],
               keep_state: bool = True) -> None:
        if not requests:
            return
        kept = [len(r.row.prompt) + r.keep - 1 for r in requests]  # cached positions each row starts from
        cache = self._batch_cache(requests, kept)
        mask = torch.zeros((len(requests), max(kept)), dtype=torch.long, device=self.device)
        for b, n in enumerate(kept):
            mask[b, mask.shape[1] - n:] = 1
        token = torch.tensor([(r.row.prompt + r.row.tokens[:r.keep])[-1] for r in requests], device=self.device)
        position = torch.tensor(kept, dtype=torch.long, device=self.device)
        live = list(range(len(requests)))  # batch row -> request index
        for req, n in zip(requests, kept, strict=True):
            if req.limit <= 0:  # nothing to decode: the state is the kept prefix
                req.state = [(k[:, :n].clone(), v[:, :n].clone()) for k, v in req.row.state] if keep_state else None
        while live:
            go = [b for b, i in enumerate(live) if len(requests[i].tokens) < requests[i].limit]
            if len(go) < len(live):  # compact the batch: drop rows that stopped or reached their limit
                index = torch.tensor(go, dtype=torch.long, device=self.device)
                live = [live[b] for b in go]
                if not live:
                    break
                cache.batch_select_indices(index)
                mask, token, position = mask[index], token[index], position[index]
            mask = torch.cat([mask, torch.ones_like(mask[:, :1])], dim=1)
            out = self.model(input_ids=token[:, None], attention_mask=mask, position_ids=position[:, None],
                             past_key_values=cache, use_cache=True)
            self.passes += 1
            chosen, logp, logq = draw(out.logits[:, -1].float(), temperature, top_k,
                                      [requests[i].row.generator for i in live])
            for b, i in enumerate(live):
                req = requests[i]
                req.append(chosen[b], logp[b], logq[b])
                if chosen[b] in stops:
                    req.limit = len(req.tokens)  # a stop token ends the extension
                if len(req.tokens) >= req.limit and keep_state:  # its cache, the last token not yet fed
                    cols = mask[b].bool().nonzero()[:, 0]
                    req.state = [(layer.keys[b][:, cols].clone(), layer.values[b][:, cols].clone())
                                 for layer in cache.layers]
            token = torch.tensor(chosen, device=self.device)
            position = position + 1


class SerialEngine(Engine):
    """Extends one row at a time and keeps nothing between extensions: each one re-encodes its whole prefix.

    With `cache_within_proposal` an extension then decodes with a KV cache, as one `generate` call does: the
    published power-sampling implementation's cost pattern. Without it every token re-encodes everything: the
    simplest possible engine, against which the others are checked (it also runs models without a KV cache).
    """

    cache_within_proposal = False

    @torch.inference_mode()
    def extend(self, requests: list[Extension], temperature: float, top_k: int, stops: set[int],
               keep_state: bool = True) -> None:
        for req in requests:
            seq = req.row.prompt + req.row.tokens[:req.keep]
            cache = DynamicCache() if self.cache_within_proposal else None
            todo = seq
            while len(req.tokens) < req.limit:
                out = self.model(input_ids=torch.tensor([todo], device=self.device), past_key_values=cache,
                                 use_cache=cache is not None)
                self.prefill += len(todo) - 1
                self.passes += 1
                (token,), (lp,), (lq,) = draw(out.logits[:, -1].float(), temperature, top_k, [req.row.generator])
                req.append(token, lp, lq)
                if token in stops:
                    break
                seq.append(token)
                todo = [token] if cache is not None else seq


class ReencodeEngine(SerialEngine):
    """Every token re-encodes prompt and prefix (no cache at all)."""


class PrefillEngine(SerialEngine):
    """The reference's pattern: every extension re-encodes its prefix, then decodes with a cache."""

    cache_within_proposal = True


def decode(model, prompts: Sequence[Sequence[int]], max_new_tokens: int, stop_ids: Sequence[int],
           temperature: float = 0.0, top_k: int = 0, seeds: Sequence[int] | None = None,
           engine: Engine | None = None) -> list[Completion]:
    """Decode all `prompts` in one lockstep batch (greedy at temperature 0); row b samples with seed `seeds[b]`."""
    if not isinstance(max_new_tokens, int) or max_new_tokens < 1:
        raise ValueError(f"max_new_tokens must be an integer of at least 1, got {max_new_tokens!r}.")
    if not prompts or any(len(p) == 0 for p in prompts):
        raise ValueError("Every prompt needs at least one token.")
    if temperature < 0:
        raise ValueError(f"temperature must be 0 (greedy) or positive, got {temperature!r}.")
    seeds = list(range(len(prompts))) if seeds is None else list(seeds)
    if len(seeds) != len(prompts):
        raise ValueError(f"give one seed per prompt: {len(prompts)} prompts, {len(seeds)} seeds.")
    start = time.perf_counter()
    engine = engine or CachedEngine(model)
    rows = [Row(list(p), torch.Generator().manual_seed(int(s)) if temperature > 0 else None)
            for p, s in zip(prompts, seeds, strict=True)]
    engine.start(rows)
    requests = [Extension(r, 0, max_new_tokens) for r in rows]
    stops = set(stop_ids)
    engine.extend(requests, temperature, top_k, stops, keep_state=False)
    seconds = (time.perf_counter() - start) / len(requests)
    return [Completion(q.tokens, q.logp, q.logq, bool(q.tokens) and q.tokens[-1] in stops, len(q.tokens), prefill,
                       passes, seconds)
            for q, prefill, passes in zip(requests, split_evenly(engine.prefill, len(requests)),
                                          split_evenly(engine.passes, len(requests)), strict=True)]
