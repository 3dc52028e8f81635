"""A language model small enough to enumerate: every completion's probability, p^α, and low temperature.

`ToyLM` is a random second-order Markov model over a few tokens (token 0 is EOS) that answers the same
`model(input_ids=...).logits` call as a transformers model, so the samplers run on it unchanged.
"""

from __future__ import annotations

import itertools
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

