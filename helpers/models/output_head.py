"""The output projection in slices of its weight while decoding on a CPU: the same logits, sooner.

At decode batch sizes (a few to a few dozen rows of one position each), one MKL `linear` over a large
vocabulary is slower on a CPU than the same product taken a slice of vocabulary rows at a time (how much, and where
the gain ends, the performance page measures: `python -m helpers bench kernels`). Every logit is still the dot
product of one hidden state with one weight row, computed by the same kernel family; the slices give bit-for-bit
the logits of one `linear` at the tests' shapes (the embedded SmolLM2 decodes the same tokens and log-probabilities
exactly), while at other widths MKL may block the two products differently and the logits differ in their last
bits (`bench kernels` reports the largest difference), as they already do between batch sizes. The head is swapped in through the model's public `set_output_embeddings`, sharing the original's weight
(tied to the embedding where the model ties them), so the model's state dict is unchanged.
"""

from __future__ import annotations

import torch
from torch import nn
from torch.nn import functional as F

SLICE = 1024  # vocabulary rows per product (`bench kernels` times the sizes around it)
MIN_VOCABULARY = 16_384  # smaller heads gain nothing worth a second code path
MAX_ROWS = 128  # decode batches: past it one product is as fast (`bench kernels` times the row counts)


class SlicedHead(nn.Linear):
    """An `nn.Linear` (same weights, state dict and hooks) whose decode-time product runs in vocabulary slices of
    `slice_rows` rows."""

    slice_rows: int = SLICE

    @classmethod
    def sharing(cls, head: nn.Linear) -> SlicedHead:
        """A sliced head over `head`'s own weight `Parameter` (not a copy: a tied embedding stays tied)."""
        sliced = cls(head.in_features, head.out_features, bias=False, device="meta")
        sliced.weight = head.weight
        return sliced

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        rows = x.numel() // self.in_features
        if not 2 <= rows <= MAX_ROWS or x.device.type != "cpu" or x.dtype != torch.float32 \
                or self.weight.dtype != torch.float32 or self.bias is not None or torch.is_grad_enabled():
            return F.linear(x, self.weight, self.bias)
        out = x.new_empty(*x.shape[:-1], self.out_features)
        flat, flat_out = x.reshape(rows, self.in_features), out.view(rows, self.out_features)
        for weight, part in zip(self.weight.split(self.slice_rows), flat_out.split(self.slice_rows, dim=1), strict=True):
            torch.mm(flat, weight.t(), out=part)
        return out


def use_sliced_head(model) -> None:
    """Compute a loaded model's logits through `SlicedHead` when its head is a large, bias-free float32 `nn.Linear`
    on a CPU (every model this book loads)."""
    head = model.get_output_embeddings() if hasattr(model, "get_output_embeddings") else None
    if type(head) is nn.Linear and head.bias is None and head.out_features >= MIN_VOCABULARY \
            and head.weight.device.type == "cpu" and head.weight.dtype == torch.float32:
        model.set_output_embeddings(SlicedHead.sharing(head))
