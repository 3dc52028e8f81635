"""The toy convergence curves of chapter 04 as stored records: computed by `helpers.samplers.toy_curves`, kept in
the results store (and released) like the chapters' decodes, so that a build from the release computes none of them.
"""

from __future__ import annotations

from collections.abc import Sequence

from helpers.results.kinds import TOY_CONVERGENCE
from helpers.results.shapes import Sized
from helpers.results.store import Run
from helpers.samplers.target import MH_MODES
from helpers.samplers.toy_curves import toy_curves

TOY_MAX_TOKENS = 4  # the toy model's completions: short enough to enumerate every one
TOY_SHAPE = {"tv": {mode: Sized(float, "steps") for mode in MH_MODES}, "smc_tv": Sized(float, "particles"),
             "noise": float}  # a stored toy curve: a TV per step count, an SMC TV per particle count


def toy_shape(config: dict) -> dict:
    """The shape of a stored toy curve under `config`: `TOY_SHAPE`, with the share of moves accepted per step count
    where the run asked for it."""
    return TOY_SHAPE | ({"acceptance": {mode: Sized((float, type(None)), "steps") for mode in MH_MODES}}
                        if config.get("acceptance") else {})


def toy_run(alpha: float, steps: Sequence[int], n_chains: int, seed: int, particles: Sequence[int],
            acceptance: bool = False) -> Run:
    """The store of the toy convergence curves: keyed by their settings and by how the samplers draw and move, so a
    changed sampler (the reference schedule, the draw, SMC's resampling) computes them again; `acceptance` keys the
    curves that also keep the share of moves accepted (the key of those without is as it always was)."""
    return Run(TOY_CONVERGENCE, {"alpha": float(alpha), "steps": list(steps), "n_chains": n_chains, "seed": seed,
                                 "particles": list(particles), "max_new_tokens": TOY_MAX_TOKENS,
                                 **TOY_CONVERGENCE.revisions} | ({"acceptance": True} if acceptance else {}))


def stored_toy_curves(alpha: float, steps: Sequence[int], n_chains: int, seed: int, particles: Sequence[int],
                      acceptance: bool = False) -> dict:
    """`toy_curves` at `TOY_MAX_TOKENS`, read from the store where computed before (and released like the decodes)."""
    return toy_run(alpha, steps, n_chains, seed, particles, acceptance).compute(
        "curves", lambda: toy_curves(alpha, steps, n_chains, seed, particles, TOY_MAX_TOKENS, acceptance))
