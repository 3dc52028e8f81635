"""What a model costs: parameters and forward FLOPs per token, counted from its config.

FLOPs count multiply-adds as 2. A block costs its attention projections, its attention over the
context (which grows with the position), and its gated MLP; the unembedding costs 2·d·V per token; the
embedding is a lookup. Norms, rotary embeddings and activations are left out (well under 1%).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass

from helpers.core.checks import is_count
from helpers.samplers.target import MH_MODES


@dataclass(frozen=True)
class Shape:
    """The sizes that set a decoder's cost, read from a transformers config."""

    hidden: int
    intermediate: int
    heads: int
    kv_heads: int
    head_dim: int
    vocab: int
    layers: int
    tied: bool
    qkv_bias: bool
    norms: int = 2  # norms of the residual width per block: 2 (Llama, Qwen2), 4 (Gemma 3's sandwich)
    qk_norm: bool = False  # query and key norms of the head width (Gemma 3)

    @classmethod
    def of(cls, config) -> Shape:
        heads = config.num_attention_heads
        head_dim = getattr(config, "head_dim", None) or config.hidden_size // heads
        qkv_bias = bool(getattr(config, "attention_bias", False)) or config.model_type.startswith("qwen2")
        gemma3 = config.model_type.startswith("gemma3")
        return cls(hidden=config.hidden_size, intermediate=config.intermediate_size, heads=heads,
                   kv_heads=getattr(config, "num_key_value_heads", None) or heads, head_dim=head_dim,
                   vocab=config.vocab_size, layers=config.num_hidden_layers,
                   tied=bool(getattr(config, "tie_word_embeddings", False)), qkv_bias=qkv_bias,
                   norms=4 if gemma3 else 2, qk_norm=gemma3)


def block_params(shape: Shape) -> int:
    """Weights of one block: q, k, v, o projections (with q/k/v biases if any), gate/up/down, and the norms."""
    d, hd = shape.hidden, shape.head_dim
    attention = d * hd * (2 * shape.heads + 2 * shape.kv_heads)
    if shape.qkv_bias:
        attention += hd * (shape.heads + 2 * shape.kv_heads)
    return attention + 3 * d * shape.intermediate + shape.norms * d + (2 * hd if shape.qk_norm else 0)


def block_flops(shape: Shape, context: float = 0.0) -> float:
    """Forward FLOPs of one block for one token that attends to `context` earlier positions (itself included); a
    sliding-window layer is counted the same, which is exact while the context fits its window and overstates its
    attention term past it (Gemma 3 beyond 512 positions, where the term is a small share of a token's FLOPs)."""
    d, hd = shape.hidden, shape.head_dim
    projections = 2 * d * hd * (2 * shape.heads + 2 * shape.kv_heads)
    attention = 4 * shape.heads * hd * context  # scores q·k and the weighted sum of v
    mlp = 2 * 3 * d * shape.intermediate
    return projections + attention + mlp


@dataclass(frozen=True)
class ModelCost:
    """Parameters and per-token FLOPs of a model running `depth` blocks."""

    depth: int
    params_blocks: int
    params_embedding: int
    params_unembedding: int
    params_total: int
    flops_blocks: float
    flops_unembedding: float
    flops_per_token: float

    def as_dict(self) -> dict:
        return asdict(self)


def model_cost(config, depth: int | None = None, context: float = 0.0) -> ModelCost:
    """Cost of the model described by `config` when it runs `depth` blocks (all of them by default)."""
    shape = Shape.of(config)
    depth = shape.layers if depth is None else depth
    if not 1 <= depth <= max(shape.layers, depth):
        raise ValueError(f"depth must be at least 1, got {depth}")
    embedding = shape.vocab * shape.hidden
    unembedding = 0 if shape.tied else shape.vocab * shape.hidden
    blocks = depth * block_params(shape)
    flops_blocks = depth * block_flops(shape, context)
    flops_unembed = 2.0 * shape.hidden * shape.vocab
    return ModelCost(depth=depth, params_blocks=blocks, params_embedding=embedding, params_unembedding=unembedding,
                     params_total=blocks + embedding + unembedding + shape.hidden, flops_blocks=flops_blocks,
                     flops_unembedding=flops_unembed, flops_per_token=flops_blocks + flops_unembed)


def model_size(config) -> float:
    """The one measure by which the book orders sizes ("the smaller model"): the full model's FLOPs per token. Depth
    alone does not serve (Qwen2.5's 1.5B and 7B both have 28 blocks), nor width alone (it leaves out depth)."""
    return model_cost(config).flops_per_token


def depth_savings(config, depth: int, context: float = 0.0) -> float:
    """Share of the full model's per-token FLOPs that running only `depth` blocks saves."""
    full = model_cost(config, context=context).flops_per_token
    return 1.0 - model_cost(config, depth, context).flops_per_token / full


# --------------------------------------------------------------------------------------------------
# What power sampling decodes: the report's formula and the block schedule counted exactly
# --------------------------------------------------------------------------------------------------


def token_multiplier(power: Sequence[Sequence[dict]], greedy: Sequence[Sequence[dict]]) -> float:
    """The book's one definition of "times the tokens of a greedy answer": decoded tokens per power-sampled answer
    (rejected proposals included) divided by decoded tokens per greedy answer, both records[problem][sample] of
    one depth, over the problems both ran (the first k, as the chapters keep one problem order)."""
    n = min(len(power), len(greedy))

    def per_answer(records: Sequence[Sequence[dict]]) -> float:
        flat = [r["decoded_tokens"] for per in records[:n] for r in per]
        return sum(flat) / len(flat) if flat else 0.0

    return per_answer(power) / max(per_answer(greedy), 1e-9)


def report_extra_tokens(length: float, block_size: int, mcmc_steps: int) -> float:
    """The report's count of the tokens power sampling decodes besides the answer itself: N·T²/(4B) (§4.2.4)."""
    _check_schedule(length, block_size, mcmc_steps)
    return mcmc_steps * length ** 2 / (4 * block_size)


def report_multiplier(length: float, block_size: int, mcmc_steps: int) -> float:
    """The report's "times more tokens than a single decoding": N·T/(4B), 8.84 for T = 679, B = 192, N = 10."""
    return report_extra_tokens(length, block_size, mcmc_steps) / length


def block_ends(length: int, block_size: int, max_new_tokens: int | None = None) -> list[int]:
    """Where a chain stands after each block's growth: min(kB, T) for every block the sampler runs.

    Blocks run until `max_new_tokens` (the exact mode keeps moving an answer that ended early, since a
    proposal may make it longer) or, with `max_new_tokens` None, until the answer's own length T.
    """
    limit = length if max_new_tokens is None else max(max_new_tokens, length)
    n_blocks = math.ceil(limit / block_size)
    return [min(k * block_size, length) for k in range(1, n_blocks + 1)]


def expected_decoded_tokens(length: int, block_size: int, mcmc_steps: int, *, mode: str = "reference",
                            max_new_tokens: int | None = None) -> float:
    """Tokens a chain decodes in expectation for an answer of `length` tokens, rejected proposals included.

    The answer is decoded once (T tokens); then after block k each of the N moves cuts the current t_k =
    min(kB, T) tokens at a uniform position i in 0..t_k−1 and regenerates t_k − i of them, (t_k + 1)/2 on
    average. `reference` mode stops at the block in which EOS appears; `exact` mode keeps making moves in
    every block up to `max_new_tokens`. Assumes each proposal ends where the current answer does and the answer
    never shrinks (exact when an answer's length is fixed; an approximation when proposals stop at EOS elsewhere,
    or when a move swaps a finished ending for an unfinished one and a `reference` chain runs another block, which
    a count from the final length cannot see; chapter 05 bounds that case from the records).
    """
    _check_schedule(length, block_size, mcmc_steps)
    if mode not in MH_MODES:
        raise ValueError(f"mode must be one of {MH_MODES}, got {mode!r}")
    if not float(length).is_integer():
        raise ValueError(f"length must be a whole number of tokens, got {length!r}")
    length = int(length)
    ends = block_ends(length, block_size, max_new_tokens if mode == "exact" else None)
    return length + mcmc_steps * sum((t + 1) / 2 for t in ends)


def schedule_multiplier(length: int, block_size: int, mcmc_steps: int, **kwargs) -> float:
    """Extra tokens per answer token by the exact count: comparable with `report_multiplier`."""
    return expected_decoded_tokens(length, block_size, mcmc_steps, **kwargs) / length - 1.0


def _check_schedule(length: float, block_size: int, mcmc_steps: int) -> None:
    if isinstance(length, bool) or not isinstance(length, int | float) or not 0 < length < math.inf:
        raise ValueError(f"length (tokens per answer) must be a positive, finite number, got {length!r}")
    if not is_count(block_size, 1):
        raise ValueError(f"block_size must be an integer of at least 1, got {block_size!r}")
    if not is_count(mcmc_steps, 0):
        raise ValueError(f"mcmc_steps must be an integer of at least 0, got {mcmc_steps!r}")


# --------------------------------------------------------------------------------------------------
# What truncation saves, and when it pays for the search
# --------------------------------------------------------------------------------------------------


def qwen25_math_configs() -> dict:
    """The report's two models as transformers configs, with the sizes of their published config.json files
    (hub-free, so the book can count their FLOPs offline)."""
    from transformers import Qwen2Config

    return {
        "Qwen2.5-Math-1.5B": Qwen2Config(hidden_size=1536, intermediate_size=8960, num_attention_heads=12,
                                         num_key_value_heads=2, vocab_size=151936, num_hidden_layers=28,
                                         tie_word_embeddings=True),
        "Qwen2.5-Math-7B": Qwen2Config(hidden_size=3584, intermediate_size=18944, num_attention_heads=28,
                                       num_key_value_heads=4, vocab_size=152064, num_hidden_layers=28,
                                       tie_word_embeddings=False),
    }


def flops_share(config, depth: int, context: float = 0.0) -> float:
    """FLOPs per token of `depth` blocks over the full model's (1 − `depth_savings`)."""
    return 1.0 - depth_savings(config, depth, context)


def net_cost_ratio(config, depth: int, length: int, block_size: int, mcmc_steps: int, context: float = 0.0) -> float:
    """Power sampling on a `depth`-block model over full-depth greedy decoding, in FLOPs: the tokens it decodes per
    answer token (the exact block schedule) times the FLOPs per token of `depth` blocks over the full model's.
    Below 1 the search on the shallower model costs less than greedy decoding on the full one."""
    return expected_decoded_tokens(length, block_size, mcmc_steps) / length * flops_share(config, depth, context)


def break_even_depth(config, multiplier: float, context: float = 0.0) -> int | None:
    """The deepest model that, decoding `multiplier` times the tokens, costs no more than the full model decoding
    once; None when even one block costs more (the unembedding alone is then too dear)."""
    if isinstance(multiplier, bool) or not isinstance(multiplier, int | float) or not 0 < multiplier < math.inf:
        raise ValueError(f"multiplier must be a positive, finite number, got {multiplier!r}")
    layers = Shape.of(config).layers
    fits = [d for d in range(1, layers + 1) if multiplier * flops_share(config, d, context) <= 1.0 + 1e-12]
    return max(fits) if fits else None
