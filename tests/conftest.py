"""Shared fixtures: tiny random Llama and Qwen2 models saved to disk, and the embedded model."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import torch

os.environ.setdefault("HF_HUB_OFFLINE", "1")
# A test session never writes into the user's results store: whatever a test computes without a root of its own goes
# to a folder of this session (tests that test the store's location set SVD_RESULTS themselves).
os.environ["SVD_RESULTS"] = os.path.join(__import__("tempfile").mkdtemp(prefix="svd-test-results-"), "results")
if os.environ.get("PYTEST_XDIST_WORKER"):
    # Two workers share the machine: one thread per test process, or their spinning thread pools take the cores
    # from each other. The book's notebook kernels get one thread too (`built_book`).
    torch.set_num_threads(1)

CORPUS = [
    "Ada has 3 apples . Then Ada receives 4 more apples . How many apples does Ada have now ?",
    "Can you solve the following math problem ? Please reason step by step , and put your final answer "
    "within \\boxed{} .",
    "Adding 4 : 3 + 4 = 7 . The final answer is \\boxed{7} .",
    "0 1 2 3 4 5 6 7 8 9 10 11 12 + - * / = the a of to and in is",
    "Can you solve the following math problem? Please reason step by step, and put your final answer within "
    "\\boxed{}. user assistant system",
]


def _tokenizer(chat: bool):
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

    tokenizer = _tokenizer(chat=kind == "qwen2")
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


def tiny_problems():
    """Two problems in the tiny tokenizer's words, for pipelines run end to end on the tiny models."""
    from helpers.data.problems import Problem

    return [Problem(id="p0", question="Ada has 3 apples .", answer="3", level=1),
            Problem(id="p1", question="0 1 2 3 + 4", answer="7", level=2)]


@pytest.fixture(scope="session", params=["llama", "qwen2"])
def tiny_dir(request, tmp_path_factory) -> Path:
    return make_tiny(request.param, tmp_path_factory.mktemp(f"tiny-{request.param}"))


# The unit tests' invariants (batch-independence, cache reuse, ...) hold to float32's last bits: their models
# are float32 on every machine. bfloat16 has tests of its own (test_precision.py).
@pytest.fixture(scope="session")
def tiny(tiny_dir):
    from helpers.models.loading import load_model

    return load_model(str(tiny_dir), device="cpu", dtype="float32")


@pytest.fixture(scope="session")
def smol():
    from helpers.models.loading import load_model

    return load_model("smollm2-135m", device="cpu", dtype="float32")


BOOK_REPOSITORY = "https://github.com/example-org/search-versus-depth"  # a stand-in: links are checked as paths


@pytest.fixture(scope="session")
def built_book(tmp_path_factory):
    """The smoke book, computed afresh and built strictly once per session: (output root, index.html)."""
    from helpers.runner.run import run

    out = tmp_path_factory.mktemp("book")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("SVD_RESULTS", str(out / "results"))  # compute everything afresh
        mp.setenv("SVD_REPOSITORY_URL", BOOK_REPOSITORY)  # the pages get repository, edit and launch buttons
        mp.setenv("SVD_REPOSITORY_BRANCH", "main")
        if os.environ.get("PYTEST_XDIST_WORKER"):  # a core for the book, the other for the unit tests: measured on
            mp.setenv("OMP_NUM_THREADS", "1")  # 2 cores, the smoke book's kernels take 317 s on one thread, 291 on two
        index = run("smoke", out_root=out, strict=True)
    return out, index



BOOK_FILES = ("tests/book/test_book.py", "tests/book/test_browser.py")


ENVIRONMENTS = "tests/test_environments.py"
# Both halves of the lowest-transformers suite run on the book's worker after the book, vLLM's suite on the unit
# tests' worker. Measured by a fresh clone's make test on 2 cores: the book and its tests about 380 s, the unit tests
# about 250 s, vLLM's suite 221 s in one process (split in two processes, 134 + 127 s: its start-up twice), each half
# of the lowest-transformers suite 41-86 s; vLLM's environment, installed beside the session, was ready 311-353 s
# after it began, so make test now starts that install before its own.
AFTER_THE_BOOK = f"{ENVIRONMENTS}::test_the_unit_tests_pass_on_the_lowest_supported_transformers"


def pytest_collection_modifyitems(config, items):
    """The built book's tests first, so that under pytest-xdist the longest work starts at once; the suites of the
    other environments last, for whichever worker is free first (tests/test_environments.py)."""
    book = [item for item in items if item.nodeid.startswith(BOOK_FILES)]
    last = [item for item in items if item.nodeid.startswith(ENVIRONMENTS)]
    items[:] = book + [item for item in items if item not in book and item not in last] + last


_YIELDED = []


def pytest_runtest_setup(item):
    """Under pytest-xdist a worker that runs unit tests lowers its priority (once): the book's worker, whose
    notebook kernels are the session's longest work, gets the cores first and the unit tests fill the gaps
    (measured: 17 s less for the whole session)."""
    if os.environ.get("PYTEST_XDIST_WORKER") and not item.nodeid.startswith(BOOK_FILES) and not _YIELDED:
        if hasattr(os, "nice"):
            os.nice(10)
        _YIELDED.append(True)


def pytest_xdist_make_scheduler(config, log):
    """Under pytest-xdist (`make test` runs two workers): every test of the built book in one worker, so that the
    session's book is built once, then `AFTER_THE_BOOK`; each other test on whichever worker is free. (xdist's own
    `loadgroup` does not group on pytest 9.)"""
    from xdist.scheduler import LoadScopeScheduling

    class BookTogether(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return "book" if nodeid.startswith(BOOK_FILES) or nodeid.startswith(AFTER_THE_BOOK) else nodeid

    return BookTogether(config, log)
