"""Running decode programs: the program protocol and the one decode loop it is driven by (`protocol`), the draw
(`categorical`), the transformers slot engine (`slot`) and the vLLM engine (`vllm`, with `vllm_logz`). Engines
know nothing of the samplers' targets, the store or the chapters.

May import: core, results, data, models.
"""
