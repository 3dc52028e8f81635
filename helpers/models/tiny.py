"""Tiny random models saved to disk, with a tokenizer of a few hundred words: the tests' models, and the benches'
where what is measured is the engine, not the model (a random model of the right shape is all a GPU machine without
the hub can load, too).
"""

from __future__ import annotations

from pathlib import Path

import torch

CORPUS = [
    "Ada has 3 apples . Then Ada receives 4 more apples . How many apples does Ada have now ?",
    "Can you solve the following math problem ? Please reason step by step , and put your final answer "
    "within \\boxed{} .",
    "Adding 4 : 3 + 4 = 7 . The final answer is \\boxed{7} .",
    "0 1 2 3 4 5 6 7 8 9 10 11 12 + - * / = the a of to and in is",
    "Can you solve the following math problem? Please reason step by step, and put your final answer within "
    "\\boxed{}. user assistant system",
]


def tiny_tokenizer(chat: bool):
    """A tiny tokenizer trained on CORPUS: word-level for the Llama model; byte-level BPE, like the real Qwen2
    family, for the Qwen2 model (transformers 5 rebuilds every qwen2 tokenizer as a byte-level BPE)."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    specials = ["<unk>", "<pad>", "<eos>", "<bos>"]
    if chat:
        tok = Tokenizer(models.BPE(unk_token="<unk>"))
        tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
        tok.decoder = decoders.ByteLevel()
        tok.train_from_iterator(CORPUS, trainers.BpeTrainer(vocab_size=400, special_tokens=specials,
                                                            initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
    else:
        tok = Tokenizer(models.WordLevel(unk_token="<unk>"))
        tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
        tok.train_from_iterator(CORPUS, trainers.WordLevelTrainer(special_tokens=specials))
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="<unk>", pad_token="<pad>", eos_token="<eos>",
                                   bos_token="<bos>")
    if chat:
        fast.chat_template = ("{% for m in messages %}<bos> {{ m['role'] }} {{ m['content'] }} <eos> {% endfor %}"
                              "{% if add_generation_prompt %}<bos> assistant {% endif %}")
    return fast


ARCHITECTURES = ("llama", "qwen2", "gemma3")
GEMMA_WINDOW = 64  # the tiny gemma3's sliding window: short enough for a test to cross it


def make_tiny(kind: str, path: Path, n_layers: int = 4, seed: int = 0, hidden_size: int = 32) -> Path:
    """Save a randomly initialised tiny `llama`, `qwen2` or `gemma3` (text) model with a word-level tokenizer to
    `path` (4 heads of hidden_size / 4: vLLM's CPU attention wants heads of 32 or more). The gemma3 model has
    Gemma 3's layout: sliding-window layers (a window of `GEMMA_WINDOW`) with a full-attention layer among them, the
    two rotary bases, query/key norms and four norms per block."""
    from transformers import AutoModelForCausalLM, Gemma3TextConfig, LlamaConfig, Qwen2Config

    if kind not in ARCHITECTURES:
        raise ValueError(f"kind must be one of {ARCHITECTURES}, got {kind!r}")
    tokenizer = tiny_tokenizer(chat=kind == "qwen2")
    common = dict(vocab_size=len(tokenizer), hidden_size=hidden_size, intermediate_size=2 * hidden_size,
                  num_hidden_layers=n_layers,
                  num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=512,
                  eos_token_id=tokenizer.eos_token_id, pad_token_id=tokenizer.pad_token_id,
                  bos_token_id=tokenizer.bos_token_id)
    if kind == "gemma3":
        layer_types = ["sliding_attention"] * n_layers
        layer_types[n_layers // 2] = "full_attention"  # as Gemma 3's one full layer in six, near the middle
        config = Gemma3TextConfig(**common, head_dim=hidden_size // 4, query_pre_attn_scalar=hidden_size // 4,
                                  sliding_window=GEMMA_WINDOW, layer_types=layer_types, tie_word_embeddings=True)
    else:
        config = LlamaConfig(**common, tie_word_embeddings=False) if kind == "llama" else Qwen2Config(
            **common, tie_word_embeddings=True)
    torch.manual_seed(seed)
    model = AutoModelForCausalLM.from_config(config)
    with torch.no_grad():  # larger random weights give peaked, varied distributions (more telling tests)
        for p in model.parameters():
            if p.dim() > 1:
                p.normal_(0, 0.3)
    model.save_pretrained(path)
    tokenizer.save_pretrained(path)
    return path
