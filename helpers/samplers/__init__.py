"""The decoding methods as programs for any engine: the target they share (`target`: α and the length), plain
decoding (`plain`), Metropolis–Hastings power sampling (`power`), SMC (`smc`), the enumerable toy model (`toy`)
and every decode parameter in one settings object (`settings`).

May import: core, results, data, models, interp, engines.
"""
