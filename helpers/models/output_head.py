"""The output projection in slices of its weight while decoding on a CPU: the same logits, sooner.

At decode batch sizes (a few to a few dozen rows of one position each), one MKL `linear` over a large
vocabulary is slow on a 2-core CPU: for Qwen2.5's 151,936 × 896 head at 22 rows it takes about 1.5× as long as
the same product taken 1,024 vocabulary rows at a time. Every logit is still the dot product of one hidden
state with one weight row, computed by the same kernel, so the slices give bit-for-bit the logits of one
`linear` (a test checks it); a power-sampling run's tokens and log-probabilities stay exactly as they were.
"""

from __future__ import annotations

import torch
from torch import nn
from torch.nn import functional as F

SLICE = 1024  # vocabulary rows per product; 512-2048 measure alike, 16k loses the gain
MIN_VOCABULARY = 16_384  # smaller heads gain nothing worth a second code path
MAX_ROWS = 128  # decode batches; measured equal and faster up to 100 rows


class SlicedHead(nn.Linear):
    """An `nn.Linear` (same weights, state dict and hooks) whose decode-time product runs in vocabulary slices."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        rows = x.numel() // self.in_features
        if not 2 <= rows <= MAX_ROWS or x.device.type != "cpu" or x.dtype != torch.float32 \
                or self.weight.dtype != torch.float32 or self.bias is not None or torch.is_grad_enabled():
            return F.linear(x, self.weight, self.bias)
        out = x.new_empty(*x.shape[:-1], self.out_features)
        flat, flat_out = x.reshape(rows, self.in_features), out.view(rows, self.out_features)
        for weight, part in zip(self.weight.split(SLICE), flat_out.split(SLICE, dim=1), strict=True):
            torch.mm(flat, weight.t(), out=part)
        return out


def use_sliced_head(model) -> None:
    """Compute a loaded model's logits through `SlicedHead` when its head is a large, bias-free float32 `nn.Linear`
    on a CPU (every model this book loads)."""
    head = model.get_output_embeddings() if hasattr(model, "get_output_embeddings") else None
    if type(head) is nn.Linear and head.bias is None and head.out_features >= MIN_VOCABULARY \
            and head.weight.device.type == "cpu" and head.weight.dtype == torch.float32:
        head.__class__ = SlicedHead
