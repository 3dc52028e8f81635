"""What a model costs: parameters and forward FLOPs per token, counted from its config.

FLOPs count multiply-adds as 2. A block costs its attention projections, its attention over the
context (which grows with the position), and its gated MLP; the unembedding costs 2·d·V per token; the
embedding is a lookup. Norms, rotary embeddings and activations are left out (well under 1%).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass


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

    @classmethod
    def of(cls, config) -> Shape:
        heads = config.num_attention_heads
        head_dim = getattr(config, "head_dim", None) or config.hidden_size // heads
        qkv_bias = bool(getattr(config, "attention_bias", False)) or config.model_type.startswith("qwen2")
        return cls(hidden=config.hidden_size, intermediate=config.intermediate_size, heads=heads,
                   kv_heads=getattr(config, "num_key_value_heads", None) or heads, head_dim=head_dim,
                   vocab=config.vocab_size, layers=config.num_hidden_layers,
                   tied=bool(getattr(config, "tie_word_embeddings", False)), qkv_bias=qkv_bias)


def block_params(shape: Shape) -> int:
    """Weights of one block: q, k, v, o projections (with q/k/v biases if any), gate/up/down, two norms."""
    d, hd = shape.hidden, shape.head_dim
    attention = d * hd * (2 * shape.heads + 2 * shape.kv_heads)
    if shape.qkv_bias:
        attention += hd * (shape.heads + 2 * shape.kv_heads)
    return attention + 3 * d * shape.intermediate + 2 * d


def block_flops(shape: Shape, context: float = 0.0) -> float:
    """Forward FLOPs of one block for one token that attends to `context` earlier positions (itself included)."""
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


def depth_savings(config, depth: int, context: float = 0.0) -> float:
    """Share of the full model's per-token FLOPs that running only `depth` blocks saves."""
    full = model_cost(config, context=context).flops_per_token
    return 1.0 - model_cost(config, depth, context).flops_per_token / full
