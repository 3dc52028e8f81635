"""Running decode programs: what programs and engines say to each other (`protocol`), the one decode loop and the
interface every engine offers it (`loop`), the draw (`categorical`), the engines by name (`kinds`): the
transformers slot engine (`slot`, with its KV buffer `kv_slots` and model runner `slot_runner`), the serial ones
(`serial`, `generate`) and vLLM (`vllm`, with `vllm_logz`). Engines know nothing of the samplers' targets, the store
or the chapters.

May import: core, results, data, models.
"""
