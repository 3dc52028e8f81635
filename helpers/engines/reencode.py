"""The re-encoding engine ('reencode'): every token re-encodes prompt and prefix, keeping nothing between passes, so
it is the check on the engines that keep a cache, and it runs models without a KV cache.
"""

from __future__ import annotations

import torch

from helpers.engines.categorical import draw
from helpers.engines.protocol import Extension
from helpers.engines.serial import SerialEngine


class ReencodeEngine(SerialEngine):
    """Keeps nothing between passes: every token re-encodes prompt and prefix."""

    @torch.inference_mode()
    def _extend(self, req: Extension, stops: set[int]) -> tuple[int, int]:
        row = req.row
        seq = row.prompt + row.tokens[:req.keep]
        route = self.mix.route if self.mix is not None else None  # a depth mix: this row's truncation
        prefill = passes = 0
        while len(req.tokens) < req.limit:
            if route is not None:
                route([row.variant])
            out = self.model(input_ids=torch.tensor([seq], device=self.device), use_cache=False)
            prefill += len(seq) - 1
            passes += 1
            (token,), (lp,), (lq,) = draw(out.logits[:, -1].float(), row.temperature, row.top_k, [row.generator])
            req.append(token, lp, lq)
            if token in stops:
                break
            seq.append(token)
        return prefill, passes
