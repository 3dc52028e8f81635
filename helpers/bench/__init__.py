"""The benchmarks (`python -m helpers bench ...`): ratios measured side by side in one run against the baselines
users run (`generate`, the published sampler's cost pattern, `helpers.engines.generate`, vLLM).

May import: core, results, data, models, interp, engines, samplers, evaluation, plots, chapters, runner.
"""
