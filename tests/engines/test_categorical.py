"""The decode loop's draw: the law it samples, the log-probabilities it returns, and what it refuses."""

from __future__ import annotations

import math
from types import SimpleNamespace

import pytest
import torch

from helpers.engines import categorical
from helpers.engines.categorical import CHUNK, draw


def chisquare(observed: torch.Tensor, expected: torch.Tensor) -> SimpleNamespace:
    """Pearson's goodness-of-fit test; its p-value by the Wilson-Hilferty normal approximation (no SciPy here)."""
    stat = float(((observed - expected) ** 2 / expected).sum())
    df = len(observed) - 1
    z = ((stat / df) ** (1 / 3) - (1 - 2 / (9 * df))) / math.sqrt(2 / (9 * df))
    return SimpleNamespace(statistic=stat, pvalue=0.5 * math.erfc(z / math.sqrt(2)))


def _logits(rows: int, vocab: int, seed: int, spread: float = 3.0) -> torch.Tensor:
    return torch.randn(rows, vocab, generator=torch.Generator().manual_seed(seed)) * spread


def _counts(logits_row: torch.Tensor, temperature: float, top_k: int, n: int, seed: int) -> torch.Tensor:
    """How often each token is drawn in n draws from one row (as n rows with generators of their own)."""
    rows = logits_row.expand(n, -1).contiguous()
    tokens, _, _ = draw(rows, temperature, top_k, [torch.Generator().manual_seed(seed + i) for i in range(n)])
    return torch.bincount(torch.tensor(tokens), minlength=logits_row.shape[-1]).double()


def _law(logits_row: torch.Tensor, temperature: float) -> torch.Tensor:
    return torch.softmax(logits_row.double() / temperature, dim=-1)


@pytest.mark.parametrize(("vocab", "temperature"), [(7, 1.0), (7, 0.5), (3 * CHUNK + 5, 0.5), (2 * CHUNK, 2.0)])
def test_draws_follow_softmax_at_the_temperature(vocab, temperature):
    """A chi-square test of 20,000 draws against softmax(logits/T), with the mass spread over several chunks when
    the vocabulary is larger than one; the same test rejects the law at another temperature (it has power)."""
    row = _logits(1, vocab, seed=vocab, spread=1.0 if vocab > 10 else 2.0)[0]
    if vocab > 10:  # a few likely tokens in different chunks, so both searches matter
        row[[3, CHUNK + 1, vocab - 2, vocab - 1]] += 6.0
    counts = _counts(row, temperature, 0, 20_000, seed=1)
    law = _law(row, temperature)
    likely = law * 20_000 >= 5  # chi-square's rule of thumb; the rest pooled into one cell
    observed = torch.cat([counts[likely], counts[~likely].sum()[None]])
    expected = torch.cat([law[likely], law[~likely].sum()[None]]) * 20_000
    keep = expected > 0
    assert chisquare(observed[keep], expected[keep]).pvalue > 1e-4
    wrong = _law(row, temperature * 1.5)
    expected_wrong = torch.cat([wrong[likely], wrong[~likely].sum()[None]]) * 20_000
    assert chisquare(observed[keep], expected_wrong[keep] * observed[keep].sum() / expected_wrong[keep].sum()
                     ).pvalue < 1e-6


def test_top_k_draws_only_the_k_most_likely_in_proportion():
    row = _logits(1, 500, seed=3)[0]
    counts = _counts(row, 0.5, 5, 10_000, seed=7)
    top = torch.topk(row, 5).indices
    assert counts[top].sum() == 10_000
    law = torch.softmax(row[top].double() / 0.5, dim=-1)
    assert chisquare(counts[top], law * 10_000).pvalue > 1e-4


@pytest.mark.parametrize(("temperature", "top_k"), [(1.0, 0), (0.5, 0), (0.25, 0), (0.5, 50), (0.0, 0)])
def test_log_probabilities_are_log_softmax_of_the_drawn_tokens(temperature, top_k):
    logits = _logits(6, 3 * CHUNK + 17, seed=11, spread=8.0)  # wide: many exponents below the float32 range
    tokens, logp, logq = draw(logits, temperature, top_k, [torch.Generator().manual_seed(s) for s in range(6)])
    idx = torch.tensor(tokens)[:, None]
    expect_p = torch.log_softmax(logits.double(), -1).gather(-1, idx)[:, 0]
    assert torch.allclose(torch.tensor(logp, dtype=torch.float64), expect_p, atol=1e-5)
    if temperature == 0:
        assert tokens == logits.argmax(-1).tolist() and logq == [0.0] * 6
        return
    scaled = logits.double() / temperature
    if top_k:
        scaled = scaled.masked_fill(logits < torch.topk(logits, top_k, -1).values[:, -1:], float("-inf"))
    expect_q = torch.log_softmax(scaled, -1).gather(-1, idx)[:, 0]
    assert torch.allclose(torch.tensor(logq, dtype=torch.float64), expect_q, atol=1e-5)


def test_a_rows_draw_does_not_depend_on_its_batch_and_takes_one_number_from_its_generator():
    logits = _logits(5, 2 * CHUNK + 3, seed=5)
    together, _, _ = draw(logits, 0.5, 0, [torch.Generator().manual_seed(s) for s in range(5)])
    alone = [draw(logits[b:b + 1], 0.5, 0, [torch.Generator().manual_seed(b)])[0][0] for b in range(5)]
    assert together == alone
    used, fresh = torch.Generator().manual_seed(9), torch.Generator().manual_seed(9)
    draw(logits[:1], 0.5, 0, [used])
    torch.rand((), dtype=torch.float64, generator=fresh)
    assert torch.equal(used.get_state(), fresh.get_state())


def test_a_smaller_vocabulary_after_a_larger_one_never_draws_past_its_end():
    """The work buffers are reused between calls: padding left by a larger vocabulary must not be drawn."""
    draw(torch.zeros(4, CHUNK), 1.0, 0, [None] * 4)
    logits = torch.full((400, CHUNK - 30), -20.0)
    logits[:, -1] = 0.0  # nearly all mass on the last real token, right before the padding
    tokens, _, _ = draw(logits, 1.0, 0, [torch.Generator().manual_seed(s) for s in range(400)])
    assert max(tokens) == CHUNK - 31


@pytest.mark.parametrize("bad", [float("nan"), float("inf")])
def test_non_finite_logits_are_refused(bad):
    logits = _logits(2, 10, seed=0)
    logits[1, 3] = bad
    with pytest.raises(RuntimeError, match="NaN or infinite"):
        draw(logits, 0.5, 0, [None, None])
    with pytest.raises(RuntimeError, match="NaN or infinite"):
        draw(torch.full((1, 4), float("-inf")), 1.0, 0, [None])


def test_shapes_and_temperature_are_checked():
    with pytest.raises(ValueError, match="one generator per row"):
        draw(torch.zeros(2, 5), 1.0, 0, [None])
    with pytest.raises(ValueError, match="temperature"):
        draw(torch.zeros(1, 5), -1.0, 0, [None])


def test_buffers_made_in_inference_mode_serve_a_draw_outside_it():
    """The reused buffers are made by whichever call comes first; a later call outside inference mode (or inside
    it, after one outside) must draw as well."""
    categorical._buffers.clear()
    with torch.inference_mode():
        draw(torch.zeros(2, CHUNK + 7), 1.0, 0, [None, None])
    tokens, _, _ = draw(torch.zeros(2, CHUNK + 7), 1.0, 0, [torch.Generator().manual_seed(1)] * 2)
    categorical._buffers.clear()
    draw(torch.zeros(2, CHUNK + 7), 1.0, 0, [None, None])
    with torch.inference_mode():
        again, _, _ = draw(torch.zeros(2, CHUNK + 7), 1.0, 0, [torch.Generator().manual_seed(1)] * 2)
    assert len(tokens) == len(again) == 2
