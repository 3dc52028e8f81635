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


def make_tiny(kind: str, path: Path, n_layers: int = 4, seed: int = 0, hidden_size: int = 32) -> Path:
    """Save a randomly initialised tiny `llama` or `qwen2` model with a word-level tokenizer to `path` (4 heads of
    hidden_size / 4: vLLM's CPU attention wants heads of 32 or more)."""
    from transformers import AutoModelForCausalLM, LlamaConfig, Qwen2Config

    tokenizer = tiny_tokenizer(chat=kind == "qwen2")
    common = dict(vocab_size=len(tokenizer), hidden_size=hidden_size, intermediate_size=2 * hidden_size,
                  num_hidden_layers=n_layers,
                  num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=512,
                  eos_token_id=tokenizer.eos_token_id, pad_token_id=tokenizer.pad_token_id,
                  bos_token_id=tokenizer.bos_token_id)
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
