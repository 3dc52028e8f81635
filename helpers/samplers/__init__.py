"""The decoding methods as programs for any engine: the target they share (`target`: α and the length), plain
decoding (`plain`), Metropolis–Hastings power sampling (`power`), SMC (`smc`), the enumerable toy model (`toy`)
every decode parameter in one settings object (`settings`), and the shared engine run that carries several
samplers' programs at once (`work`).

May import: core, results, data, models, interp, engines.
"""
