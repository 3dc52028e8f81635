"""How sharp a model's own distribution already is, read from its stored decodes: the premise of power sampling is
that a base model's distribution leaves room to sharpen, which instruction tuning may already have used up.

* agreement: the share of T = 1 answers that equal the greedy answer of the same problem (1: sampling at T = 1
  lands where greedy decoding does);
* entropy: the mean per-token entropy of the model's T = 1 decodes, estimated without the logits as the mean of
  −log p over the tokens it sampled (for tokens drawn from p, E[−log p] is the entropy), in nats;
* the gap between low-temperature (T = 1/α) and T = 1 accuracy: what sharpening each token alone buys.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class Sharpness:
    """One model at one depth: `agreement` (share), `entropy` (nats per token) and their sample counts."""

    agreement: float
    entropy: float
    samples: int
    tokens: int


def sharpness(greedy: Sequence[Sequence[dict]], warm: Sequence[Sequence[dict]]) -> Sharpness:
    """From records[problem][sample] of greedy and T = 1 decodes in one problem order (over the problems both ran):
    the share of T = 1 answers equal to greedy's on the same problem, and the tokens' mean −log p."""
    n = min(len(greedy), len(warm))
    pairs = [(g[0]["predicted"], t) for g, per in zip(greedy[:n], warm[:n], strict=True) for t in per]
    if not pairs:
        raise ValueError("sharpness needs T = 1 decodes of at least one problem that greedy decoding also ran")
    tokens = sum(t["n_tokens"] for _, t in pairs)
    agree = sum(1 for g, t in pairs if t["predicted"] is not None and t["predicted"] == g) / len(pairs)
    entropy = -sum(t["sum_logp"] for _, t in pairs) / tokens if tokens else float("nan")
    return Sharpness(agree, entropy, len(pairs), tokens)
