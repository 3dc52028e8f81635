"""A language model small enough to enumerate: every completion's probability, p^α, and low temperature.

`ToyLM` is a random second-order Markov model over a few tokens (token 0 is EOS) that answers the same
`model(input_ids=...).logits` call as a transformers model, so the samplers run on it unchanged.
"""

from __future__ import annotations

import itertools
import math
from collections import Counter
from collections.abc import Iterable, Sequence
from types import SimpleNamespace

import numpy as np
import torch
from torch import nn

EOS = 0


class ToyLM(nn.Module):
    """Next-token logits depend on the last two tokens and the position; `sharpness` scales them."""

    def __init__(self, vocab: int = 3, max_len: int = 16, seed: int = 0, sharpness: float = 1.5):
        super().__init__()
        g = torch.Generator().manual_seed(seed)
        self.vocab = vocab
        self.table = nn.Parameter(sharpness * torch.randn(vocab + 1, vocab + 1, max_len, vocab, generator=g),
                                  requires_grad=False)

    def forward(self, input_ids: torch.Tensor, **_) -> SimpleNamespace:
        ids = input_ids.clamp(max=self.vocab)
        prev = torch.cat([torch.full_like(ids[:, :1], self.vocab), ids[:, :-1]], dim=1)
        pos = torch.arange(ids.shape[1], device=ids.device).expand_as(ids).clamp(max=self.table.shape[2] - 1)
        return SimpleNamespace(logits=self.table[prev, ids, pos])


def completions(vocab: int, max_new_tokens: int) -> list[tuple[int, ...]]:
    """Every completion: a run of non-EOS tokens ended by EOS, or `max_new_tokens` non-EOS tokens."""
    body = range(1, vocab)
    out = []
    for n in range(max_new_tokens):
        out += [(*seq, EOS) for seq in itertools.product(body, repeat=n)]
    out += list(itertools.product(body, repeat=max_new_tokens))
    return out


@torch.inference_mode()
def sequence_logprob(model, prompt: Sequence[int], completion: Sequence[int], temperature: float = 1.0) -> float:
    """log of the probability that sampling at `temperature` produces exactly `completion` after `prompt`."""
    ids = torch.tensor([[*prompt, *completion]])
    logits = model(input_ids=ids).logits[0, len(prompt) - 1:-1].float() / temperature
    logp = torch.log_softmax(logits, -1)
    return float(logp.gather(-1, torch.tensor(completion)[:, None]).sum())


def exact_distributions(model, prompt: Sequence[int], max_new_tokens: int, alpha: float) -> dict[str, dict]:
    """p, p^α (normalised) and low-temperature sampling (T = 1/α) over every completion."""
    seqs = completions(model.vocab, max_new_tokens)
    logp = torch.tensor([sequence_logprob(model, prompt, s) for s in seqs])
    lowt = torch.tensor([sequence_logprob(model, prompt, s, 1.0 / alpha) for s in seqs])
    power = torch.softmax(alpha * logp, 0)
    return {"p": dict(zip(seqs, logp.exp().tolist(), strict=True)),
            "power": dict(zip(seqs, power.tolist(), strict=True)),
            "low_temperature": dict(zip(seqs, lowt.exp().tolist(), strict=True))}


def empirical(samples: Iterable[Sequence[int]]) -> dict[tuple[int, ...], float]:
    """Relative frequencies of sampled completions."""
    counts = Counter(tuple(s) for s in samples)
    total = sum(counts.values())
    return {k: v / total for k, v in counts.items()}


def tv_distance(a: dict, b: dict) -> float:
    """Total-variation distance between two distributions given as {outcome: probability}."""
    return 0.5 * sum(abs(a.get(k, 0.0) - b.get(k, 0.0)) for k in set(a) | set(b))


def draw_exact(law: dict, n: int, rng) -> list:
    """`n` independent draws from a distribution given as {outcome: probability} (a numpy Generator's choice)."""
    keys = list(law)
    weights = np.array([law[k] for k in keys])
    return [keys[i] for i in rng.choice(len(keys), size=n, p=weights / weights.sum())]


def noise_floor(law: dict, n: int, repeats: int = 20, seed: int = 0) -> float:
    """The mean total-variation distance that `n` exact draws from `law` leave by chance (over `repeats` tries)."""
    rng = np.random.default_rng(seed)
    return float(np.mean([tv_distance(empirical(draw_exact(law, n, rng)), law) for _ in range(repeats)]))



# --------------------------------------------------------------------------------------------------
# The published MH loop's law, enumerated (independent of the sampler's code, to test it against)
# --------------------------------------------------------------------------------------------------


@torch.inference_mode()
def _next_logprobs(model, ids: tuple[int, ...], temperature: float, top_k: int) -> tuple[list[float], list[float]]:
    """log p (T = 1) and log q (temperature, then top-k) of every next token after `ids`."""
    logits = model(input_ids=torch.tensor([ids])).logits[0, -1].double()
    logp = torch.log_softmax(logits, -1)
    scaled = logits / temperature
    if 0 < top_k < scaled.numel():
        scaled = scaled.masked_fill(scaled < torch.topk(scaled, top_k).values[-1], -math.inf)
    return logp.tolist(), torch.log_softmax(scaled, -1).tolist()


def reference_law(model, prompt: Sequence[int], alpha: float, block_size: int, mcmc_steps: int,
                  max_new_tokens: int, top_k: int = 50, growth: str = "extend",
                  blocks: int = 0) -> dict[tuple[int, ...], float]:
    """The exact law of the published power-sampling loop (reference mode) over completions, by enumeration.

    Each block extends the chain by `block_size` tokens from its current length (`growth="extend"`, the published
    loop; `"cap"` grows it to (k+1)·B instead, the schedule this book's reference mode ran before), then makes
    `mcmc_steps` moves: a cut i uniform over the generated positions, a suffix from the proposal (T = 1/α, top-k)
    of at most t − i tokens, accepted with probability min(1, r), r over the proposal's length; after a block's
    moves a chain holding EOS ends there, and so does one at `max_new_tokens` tokens. It runs `blocks` blocks
    (0: max_new_tokens / B). Every path is summed, so this is exact for a model small enough
    (vocabulary and `max_new_tokens` of a few tokens).
    """
    if growth not in ("extend", "cap"):
        raise ValueError(f"growth must be 'extend' or 'cap', got {growth!r}")
    prompt = tuple(prompt)
    memo: dict[tuple[int, ...], tuple[list[float], list[float]]] = {}

    def step(ids):
        if ids not in memo:
            memo[ids] = _next_logprobs(model, prompt + ids, 1.0 / alpha, top_k)
        return memo[ids]

    def suffixes(prefix: tuple[int, ...], n: int) -> list[tuple[tuple[int, ...], float, float]]:
        """Every proposal of at most n tokens after `prefix`: (tokens, log q, log p), stopping at EOS."""
        out, frontier = [], [((), 0.0, 0.0)]
        while frontier:
            grown = []
            for y, lq, lp in frontier:
                if len(y) == n or (y and y[-1] == EOS):
                    out.append((y, lq, lp))
                    continue
                logp, logq = step(prefix + y)
                grown += [((*y, v), lq + logq[v], lp + logp[v]) for v in range(len(logq)) if logq[v] > -math.inf]
            frontier = grown
        return out

    def token_logs(x: tuple[int, ...]) -> tuple[list[float], list[float]]:
        logp, logq = zip(*((step(x[:j])[0][x[j]], step(x[:j])[1][x[j]]) for j in range(len(x))), strict=True) \
            if x else ((), ())
        return list(logp), list(logq)

    law = {(): 1.0}
    finished: dict[tuple[int, ...], float] = {}
    for block in range(blocks or math.ceil(max_new_tokens / block_size)):
        grown: dict[tuple[int, ...], float] = {}
        for x, w in law.items():
            end = len(x) + block_size if growth == "extend" else (block + 1) * block_size
            for y, lq, _ in suffixes(x, min(end, max_new_tokens) - len(x)):
                grown[x + y] = grown.get(x + y, 0.0) + w * math.exp(lq)
        law = grown
        for _ in range(mcmc_steps):
            moved: dict[tuple[int, ...], float] = {}
            for x, w in law.items():
                t = len(x)
                logp, logq = token_logs(x)
                for i in range(t):
                    for y, lq, lp in suffixes(x[:i], t - i):
                        s = len(y)
                        log_r = alpha * lp - alpha * sum(logp[i:i + s]) + sum(logq[i:i + s]) - lq
                        move = w / t * math.exp(lq)
                        accept = min(1.0, math.exp(min(log_r, 0.0)))
                        moved[x[:i] + y] = moved.get(x[:i] + y, 0.0) + move * accept
                        moved[x] = moved.get(x, 0.0) + move * (1.0 - accept)
            law = moved
        for x, w in list(law.items()):
            if EOS in x or len(x) >= max_new_tokens:
                finished[x] = finished.get(x, 0.0) + w
                del law[x]
    for x, w in law.items():
        finished[x] = finished.get(x, 0.0) + w
    return finished
