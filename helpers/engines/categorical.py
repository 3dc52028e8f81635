"""The decode loop's draw: one token per row of float32 logits, with its log-probabilities at T = 1 and as drawn.

Inverse-CDF sampling with one uniform number per row, from the row's own generator: the row's weights
exp((logit − max)/T) are summed in chunks of `CHUNK` vocabulary entries, the uniform picks a chunk by the chunks'
running total (float64) and then a token inside it by the chunk's own running total. That is an exact draw from
softmax(logits/T), up to float32 rounding of the weights (a relative 1e-7).

Why not `torch.multinomial`: its CPU kernel fills one float64 of exponential noise per vocabulary entry and row,
which with the full `log_softmax` tensors beside it made the draw a large share of a decoding step at a vocabulary
of 152k tokens; this one makes two passes over the logits into reused buffers (the performance page, "The draw",
gives both costs). Exponents are floored at `FLOOR` before `exp`: below about −87 a float32 exp is subnormal and
takes a far slower path, and weights under e^−80 of the largest carry less than 1e−29 of the mass over any
vocabulary this book meets. Tokens outside the top k (when `top_k` > 0) get weight exactly 0.

A row's draw depends only on its logits and its generator, never on which other rows share the batch.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

CHUNK = 1024  # vocabulary entries per partial sum: the second search reads one chunk
FLOOR = -80.0  # exponents are clamped here: e^-80 is a normal float32, e^-88 is not

_buffers: dict[tuple[str, int, torch.device], torch.Tensor] = {}  # reused: fresh 40 MB tensors cost page faults per step


def _buffer(name: str, rows: int, cols: int, like: torch.Tensor) -> torch.Tensor:
    """A [rows, cols] float32 work tensor on `like`'s device, kept between calls (grown when too small)."""
    key = (name, cols, like.device)
    have = _buffers.get(key)
    if have is None or have.shape[0] < rows:
        have = _buffers[key] = torch.empty(rows, cols, dtype=torch.float32, device=like.device)
    return have[:rows]


def _weights(logits: torch.Tensor, top: torch.Tensor, scale: float, keep: torch.Tensor | None) -> torch.Tensor:
    """exp((logits − top)·scale), exponents floored at FLOOR, in a [rows, chunks·CHUNK] buffer padded with zeros;
    entries outside `keep` (a boolean mask) are 0."""
    rows, vocab = logits.shape
    chunks = -(-vocab // CHUNK)
    shifted = _buffer("shifted", rows, vocab, logits)
    padded = _buffer("weights", rows, chunks * CHUNK, logits)
    padded[:, vocab:].zero_()
    torch.sub(logits, top, out=shifted)
    if scale != 1.0:
        shifted.mul_(scale)
    shifted.clamp_(min=FLOOR)
    torch.exp(shifted, out=padded[:, :vocab])
    if keep is not None:
        padded[:, :vocab].masked_fill_(~keep, 0.0)
    return padded


def _chunk_sums(padded: torch.Tensor) -> torch.Tensor:
    """float64 [rows, chunks]: each chunk's float32 sum."""
    rows = padded.shape[0]
    return padded.view(rows, -1, CHUNK).sum(-1).double()


@torch.inference_mode()
def draw(logits: torch.Tensor, temperature: float, top_k: int, generators: Sequence[torch.Generator | None]
         ) -> tuple[list[int], list[float], list[float]]:
    """One token per row of float32 `logits` [B, V]: (tokens, log p at T=1, log q of the draw), as lists.

    Temperature 0 is greedy (log q = 0). `top_k` > 0 restricts a draw to the k most likely tokens. Row b draws
    with `generators[b]` (CPU generators, so a seed means the same thing on every device): one float64 per draw.
    It runs in inference mode whoever calls it: its reused buffers are inference tensors, which may be written
    in place only there (the results go out as plain lists).
    """
    if logits.dim() != 2 or len(generators) != logits.shape[0]:
        raise ValueError(f"draw needs [rows, vocabulary] logits and one generator per row; got shape "
                         f"{tuple(logits.shape)} and {len(generators)} generators")
    if temperature < 0:
        raise ValueError(f"temperature must be 0 (greedy) or positive, got {temperature!r}")
    rows, vocab = logits.shape
    top = logits.amax(dim=-1, keepdim=True)  # NaN propagates through amax; +inf or an all -inf row is not finite
    if not bool(torch.isfinite(top).all()):
        raise RuntimeError("the model's logits hold NaN or infinite values (or a row is all -inf): nothing can be "
                           "drawn from them; check the model's weights and number format")
    if temperature == 0:
        token = logits.argmax(dim=-1)
        logq = torch.zeros(rows, dtype=torch.float64)
    else:
        keep = None
        if top_k and top_k < vocab:
            keep = logits >= torch.topk(logits, top_k, dim=-1).values[:, -1:]
        padded = _weights(logits, top, 1.0 / temperature, keep)
        sums = _chunk_sums(padded)
        token, total = _search(padded, sums, generators)
        picked = logits.gather(-1, token[:, None])[:, 0].double() - top[:, 0].double()
        logq = (picked / temperature - total.log()).cpu()
    if temperature == 1.0 and not (top_k and top_k < vocab):
        logp = logq
    else:
        total_p = _chunk_sums(_weights(logits, top, 1.0, None)).sum(-1)
        logp = (logits.gather(-1, token[:, None])[:, 0].double() - top[:, 0].double() - total_p.log()).cpu()
    return token.tolist(), logp.tolist(), logq.tolist()


def draw_each(logits: torch.Tensor, laws: Sequence[tuple[float, int]], generators: Sequence[torch.Generator | None]
              ) -> tuple[list[int], list[float], list[float]]:
    """`draw` for rows that may each have their own (temperature, top-k) in `laws`: one `draw` per distinct law,
    over that law's rows, so a row's token is what `draw` gives it alone. One law costs what `draw` does."""
    if len(laws) != logits.shape[0]:
        raise ValueError(f"give one (temperature, top_k) per row: {logits.shape[0]} rows, {len(laws)} laws")
    rows_of: dict[tuple[float, int], list[int]] = {}
    for b, law in enumerate(laws):
        rows_of.setdefault(law, []).append(b)
    if len(rows_of) == 1:
        return draw(logits, *laws[0], generators)
    tokens, logp, logq = [0] * len(laws), [0.0] * len(laws), [0.0] * len(laws)
    for (temperature, top_k), rows in rows_of.items():
        picked = draw(logits[rows], temperature, top_k, [generators[b] for b in rows])
        for b, token, lp, lq in zip(rows, *picked, strict=True):
            tokens[b], logp[b], logq[b] = token, lp, lq
    return tokens, logp, logq


def _search(padded: torch.Tensor, sums: torch.Tensor, generators: Sequence[torch.Generator | None]
            ) -> tuple[torch.Tensor, torch.Tensor]:
    """(token per row, total weight per row): the chunk whose running total first exceeds u·total, then the entry
    inside it whose running total first exceeds the rest of u, rescaled to the chunk's float64 sum."""
    rows = padded.shape[0]
    running = sums.cumsum(-1)
    total = running[:, -1]
    uniform = torch.stack([torch.rand((), dtype=torch.float64, generator=g) for g in generators]).to(total.device)
    target = uniform * total
    chunk = torch.searchsorted(running, target[:, None], right=True)[:, 0].clamp_(max=sums.shape[1] - 1)
    before = running.gather(-1, chunk[:, None])[:, 0] - sums.gather(-1, chunk[:, None])[:, 0]
    inside = padded.view(rows, -1, CHUNK).gather(1, chunk[:, None, None].expand(rows, 1, CHUNK))[:, 0].double()
    inner = inside.cumsum(-1)
    share = ((target - before) / sums.gather(-1, chunk[:, None])[:, 0]).clamp_(0.0, 1.0) * inner[:, -1]
    share = torch.minimum(share, torch.nextafter(inner[:, -1], torch.zeros_like(share)))  # never past the last weight
    entry = torch.searchsorted(inner, share[:, None], right=True)[:, 0]
    return chunk * CHUNK + entry, total
