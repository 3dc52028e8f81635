"""Running decode programs: what programs and engines say to each other (`protocol`), the one decode loop and the
interface every engine offers it (`engine`, `loop`), the draw (`categorical`), the engines by name (`registry`): the
transformers slot engine (`slot`, with its KV buffer `kv_slots` and model runner `slot_runner`), the re-encoding
check (`reencode`), the published sampler's `generate` calls (`generate`) and vLLM (`vllm`, with `vllm_logz`).
Engines know nothing of the samplers' targets, the store or the chapters.

May import: core, results, data, models.
"""
