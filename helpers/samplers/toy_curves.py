"""How close MH (both modes) and SMC come to p^α on the enumerable toy model: the curves chapter 04 draws, computed
here so that the chapter and the release's audit compute them by one function (stored by
`helpers.evaluation.toy_study`)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from helpers.engines.registry import make_engine
from helpers.samplers.power import PowerConfig, run_chains
from helpers.samplers.smc import SMCConfig, run_smc
from helpers.samplers.target import MH_MODES, Target
from helpers.samplers.toy import EOS, ToyLM, draw_exact, empirical, exact_distributions, tv_distance


def toy_curves(alpha: float, steps: Sequence[int], n_chains: int, seed: int, particles: Sequence[int],
               max_new_tokens: int, acceptance: bool = False) -> dict:
    """TV(empirical, p^α) of `n_chains` chains per (MH mode, N in `steps`) and of `n_chains` SMC samples per particle
    count (ESS checked after every token), on `ToyLM(vocab=3, seed=seed)`, and the TV that `n_chains` exact draws
    from p^α leave (the noise floor); with `acceptance`, also the share of MH moves accepted per (mode, N) (None where
    no move was proposed)."""
    toy = ToyLM(vocab=3, seed=seed)
    law = exact_distributions(toy, [1], max_new_tokens, alpha)["power"]
    target = Target(alpha, max_new_tokens)
    tv: dict[str, list[float]] = {}
    accepted: dict[str, list[float]] = {}
    for mode in MH_MODES:
        tv[mode], accepted[mode] = [], []
        for n in steps:
            cfg = PowerConfig(block_size=2, mcmc_steps=n, mode=mode)
            chains = run_chains(make_engine("reencode", toy), [[1]] * n_chains, [EOS], target, cfg, list(range(n_chains)))
            tv[mode].append(tv_distance(empirical(r.tokens for r in chains), law))
            moves = [ok for r in chains for _, ok in r.moves]
            accepted[mode].append(float(np.mean(moves)) if moves else None)
    noise = tv_distance(empirical(draw_exact(law, n_chains, np.random.default_rng(seed))), law)
    smc_tv = []
    for k in particles:
        out = run_smc(make_engine("reencode", toy), [[1]] * n_chains, [EOS], target, SMCConfig(particles=k, block_size=1),
                      list(range(n_chains)))
        smc_tv.append(tv_distance(empirical(r.tokens for r in out), law))
    return {"tv": tv, "smc_tv": smc_tv, "noise": noise} | ({"acceptance": accepted} if acceptance else {})

