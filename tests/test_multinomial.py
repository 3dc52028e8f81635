"""The vectorised draw is torch.multinomial: same tokens, same generator states, same refusals."""

from __future__ import annotations

import pytest
import torch

from helpers import multinomial
from helpers.multinomial import draw_rows


def _peaked(rows: int, vocab: int, seed: int, temperature: float = 0.25) -> torch.Tensor:
    """Rows like a low-temperature softmax: a few likely tokens and many denormal ones."""
    logits = torch.randn(rows, vocab, generator=torch.Generator().manual_seed(seed)) * 8
    return torch.softmax(logits / temperature, dim=-1)


@pytest.mark.parametrize("vocab", [1, 2, 97, 4096, 49152])
def test_draws_the_tokens_torch_multinomial_draws(vocab):
    assert multinomial.vectorised_is_exact()
    probs = _peaked(6, vocab, seed=vocab)
    ours = [torch.Generator().manual_seed(s) for s in range(6)]
    torch_s = [torch.Generator().manual_seed(s) for s in range(6)]
    for _ in range(4):  # consecutive draws: the generators must also advance alike
        expected = torch.stack([torch.multinomial(probs[b], 1, generator=g)[0] for b, g in enumerate(torch_s)])
        assert torch.equal(draw_rows(probs, ours), expected)
    assert all(torch.equal(a.get_state(), b.get_state()) for a, b in zip(ours, torch_s, strict=True))


def test_unnormalised_rows_and_zeros_are_drawn_like_multinomial():
    probs = torch.tensor([[0.0, 3.0, 1.0, 0.0], [5.0, 0.0, 0.0, 5.0]])
    ours = [torch.Generator().manual_seed(1), torch.Generator().manual_seed(2)]
    torch_s = [torch.Generator().manual_seed(1), torch.Generator().manual_seed(2)]
    for _ in range(50):
        got = draw_rows(probs, ours)
        assert got.tolist() == [int(torch.multinomial(probs[b], 1, generator=g)) for b, g in enumerate(torch_s)]
        assert got[0].item() in (1, 2) and got[1].item() in (0, 3)


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), -0.5])
def test_invalid_probabilities_are_refused(bad):
    probs = _peaked(2, 10, seed=0)
    probs[1, 3] = bad
    with pytest.raises(RuntimeError, match="probability tensor"):
        draw_rows(probs, [None, None])


def test_all_zero_row_is_refused_and_shapes_are_checked():
    with pytest.raises(RuntimeError, match="sums to 0"):
        draw_rows(torch.zeros(1, 5), [None])
    with pytest.raises(ValueError, match="one generator per row"):
        draw_rows(torch.ones(2, 5), [None])


def test_falls_back_to_torch_where_the_fast_path_would_differ(monkeypatch):
    monkeypatch.setattr(multinomial, "_EXACT", False)
    probs = _peaked(3, 500, seed=3)
    ours = [torch.Generator().manual_seed(s) for s in range(3)]
    torch_s = [torch.Generator().manual_seed(s) for s in range(3)]
    expected = torch.stack([torch.multinomial(probs[b], 1, generator=g)[0] for b, g in enumerate(torch_s)])
    assert torch.equal(draw_rows(probs, ours), expected)
