"""Linear maps from every layer of one model to every layer of another (Csordás et al., section 4).

If a deeper model only stretches the computation of a shallower one, layer i of the shallow model should be
best predicted by the deep layer at the same *relative* depth. Both models read the same tokens (they must
share a tokenizer); for each source boundary an affine map to all target boundaries is fitted in closed form
by ridge regression (the paper trains the same least-squares objective with AdamW), and scored on held-out
tokens by the relative error ‖ŷ − y‖/‖y‖, averaged over tokens.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch

from helpers.data.problems import Problem
from helpers.data.sequences import analysis_sequence
from helpers.interp.residual import capture


def residual_states(model, sequences: Sequence[Sequence[int]], skip_first: int = 1, max_tokens: int | None = None
                    ) -> torch.Tensor:
    """Residuals at every boundary 0..L (0 = embedding, L = final residual) of all tokens: [L + 1, N, D] float32.

    The first `skip_first` positions of each sequence are left out: the first token's residual is an outlier
    (attention sink) that no map needs to learn.
    """
    parts, total = [], 0
    for ids in sequences:
        cap = capture(model, ids, parts="io")
        states = torch.cat([cap.inputs, cap.outputs[-1:]], dim=0)[:, skip_first:]
        if max_tokens is not None:
            states = states[:, :max(0, max_tokens - total)]
        parts.append(states)
        total += states.shape[1]
        if max_tokens is not None and total >= max_tokens:
            break
    if not parts or total == 0:
        raise ValueError("no tokens to fit a map on")
    return torch.cat(parts, dim=1)


def check_same_tokenizer(tokenizer_a, tokenizer_b, names: tuple[str, str] = ("source", "target")) -> None:
    """Maps compare residuals of the same tokens: refuse a pair whose tokenizers split text differently."""
    probe = "Linear maps compare residuals of 12 + 30 = 42 tokens, token by token. Ünïcode ✓"
    if tokenizer_a.get_vocab() != tokenizer_b.get_vocab() or tokenizer_a(probe)["input_ids"] != tokenizer_b(probe)["input_ids"]:
        raise ValueError(f"the {names[0]} and {names[1]} models do not share a tokenizer; pick two models of one "
                         "family (for example Qwen/Qwen2.5-1.5B and Qwen/Qwen2.5-3B)")


def fit_maps(source_train: torch.Tensor, target_train: torch.Tensor, source_test: torch.Tensor,
             target_test: torch.Tensor, ridge: float = 1e-4) -> np.ndarray:
    """Relative test error [Ls + 1, Lt + 1] of ridge maps from each source boundary to each target boundary.

    `ridge` is relative to the mean diagonal of XᵀX, so it does not depend on the residual's scale. The test
    predictions x_test (XᵀX + λI)⁻¹ Xᵀ Y are formed in whichever order multiplies less (`weights_first`): the
    product with Y, every target layer's dimensions at once, is the fit's whole cost. Both orders give the same
    errors up to float64 rounding.
    """
    if source_train.shape[1] != target_train.shape[1] or source_test.shape[1] != target_test.shape[1]:
        raise ValueError("source and target residuals must cover the same tokens")
    n_tgt, n_train, d_tgt = target_train.shape
    y_train = target_train.permute(1, 0, 2).reshape(n_train, -1).double()
    y_test = target_test.double()  # [Lt + 1, N_test, D_t]
    errors = np.zeros((source_train.shape[0], n_tgt))
    for i in range(source_train.shape[0]):
        x = _with_bias(source_train[i])
        gram = x.T @ x
        gram += ridge * gram.diagonal().mean() * torch.eye(gram.shape[0], dtype=torch.float64)
        x_test = _with_bias(source_test[i])
        lean = torch.linalg.solve(gram, x_test.T).T  # [N_test, D + 1]: x_test (XᵀX + λI)⁻¹
        if weights_first(n_train, x_test.shape[0], x.shape[1]):
            pred = lean @ (x.T @ y_train)  # through the maps' weights, [D + 1, (Lt + 1) D_t]
        else:
            pred = (lean @ x.T) @ y_train  # through each test token's reach over the training tokens
        pred = pred.reshape(x_test.shape[0], n_tgt, d_tgt).permute(1, 0, 2)
        err = (pred - y_test).norm(dim=-1) / y_test.norm(dim=-1).clamp(min=1e-6)
        errors[i] = err.mean(dim=1).numpy()
    return errors


def weights_first(n_train: int, n_test: int, width: int) -> bool:
    """Whether forming Xᵀ Y first multiplies less than forming each test token's reach over the training tokens:
    per output dimension, width × (n_train + n_test) products against n_test × n_train."""
    return width * (n_train + n_test) < n_test * n_train


def _with_bias(states: torch.Tensor) -> torch.Tensor:
    """float64 [N, D + 1]: the states with a column of ones, so that each map is affine."""
    return torch.cat([states.double(), torch.ones(states.shape[0], 1, dtype=torch.float64)], dim=1)


def best_match(errors: np.ndarray) -> np.ndarray:
    """For each source boundary, the target boundary its map predicts best."""
    return errors.argmin(axis=1)


MAPS_SHAPE = {"errors": [[float]], "train_tokens": int, "input_dims": int, "problems": [str]}  # `fit_layer_maps`


def fit_layer_maps(pair: Sequence[str], pool: Sequence[Problem], map_tokens: int, load) -> dict:
    """Ridge maps from every boundary of `pair[0]` to every boundary of `pair[1]`, fitted on the first 80% of the
    pool's gold texts (up to 80% of `map_tokens` tokens) and tested on the rest: a stored record (`MAPS_SHAPE`), with
    the problems it read, so that the audit can fit it again. `load(name)` gives the model's `ModelHandle`, one
    model held at a time."""
    states = []
    for name in dict.fromkeys(pair):
        model = load(name)
        texts = [analysis_sequence(model.tokenizer, p)[0] for p in pool]
        n_train = max(1, int(0.8 * len(texts)))
        states.append((residual_states(model.module, texts[:n_train], max_tokens=int(0.8 * map_tokens)),
                       residual_states(model.module, texts[n_train:] or texts[-1:], max_tokens=map_tokens // 5)))
        del model
    src, tgt = states[0], states[-1]
    return {"errors": fit_maps(src[0], tgt[0], src[1], tgt[1]).tolist(), "train_tokens": int(src[0].shape[1]),
            "input_dims": int(src[0].shape[2]), "problems": [p.id for p in pool]}
