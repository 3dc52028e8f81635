"""Sequential Monte Carlo towards p^α (Power-SMC, Azizi et al. 2026): K particles instead of a Metropolis chain.

Each problem gets K particles, decoded side by side from the proposal q = the model at temperature 1/α. A token
x drawn after prefix h changes a particle's importance weight by p(x | h)^α / q(x | h), and with this proposal
that ratio is the same for every token: Z = Σ_v p(v | h)^α, known from the logits the token was drawn from
(α·log p − log q = log Z exactly, so the engine's two per-token scalars, computed in float32, give it). A
particle that emits EOS is finished and its weight stops changing (EOS is absorbing), as is one that reaches
`max_new_tokens`; its weight is then p(completion)^α / q(completion), the same target as the exact MH mode.

After every block of `block_size` tokens the particles of a problem meet (a `helpers.engines.protocol.Barrier`). When
the effective sample size ESS = (Σw)² / Σw² falls below `ess_threshold`·K they are resampled *systematically*
(one uniform draw, K evenly spaced pointers into the cumulative weights): a particle with no offspring becomes a
copy of one with several (tokens, weight and, in `SlotEngine`, its KV cache), and every weight is reset to
the mean. Survivors keep their slots, so only the overwritten particles are copied. Each particle keeps its
own random generator, so copies of one parent diverge from the next token on.

When every particle has finished, one is returned, drawn with probability ∝ its weight; all K are kept. As K
grows the returned completion's law approaches p^α; with K = 1 it is low-temperature sampling, draw for draw.

Optional exponent bridging (`bridge_tokens` = R > 0, Power-SMC's schedule): the intermediate targets are
p(x_1..t)^a_t with a_t rising linearly from 1 to α over the first R tokens, which spreads the weights' change
over the early tokens; a finished completion's target is p^α at once, so the final target is unchanged. A
token t then adds (a_t − a_{t−1})·log p(x_<t) + a_t·log p(x_t | x_<t) − log q(x_t | x_<t), with a_t = α for a
completion's last token.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import torch

from helpers.core.checks import SettingError, is_count
from helpers.engines.engine import Engine
from helpers.engines.protocol import (
    Adopt,
    Barrier,
    Completion,
    Extension,
    Group,
    OnDone,
    Program,
    Row,
    ends_with_stop,
)
from helpers.engines.registry import make_engine
from helpers.results.kinds import DECODE
from helpers.samplers.target import Target
from helpers.samplers.work import Work, check_prompts, one_work, run_together

ESS_ROUNDING = 1e-12  # particles whose weights are equal but for rounding have an ESS of K less a few ulps: at a
# threshold of 1 they would be resampled (or not) by the rounding of whichever engine computed them, not by their
# weights; within this relative margin of the threshold they are not resampled


@dataclass(frozen=True)
class SMCConfig:
    """The one home of the SMC sampler's own settings (α and the length are the `Target`'s); `validate` explains
    what is wrong with bad values."""

    particles: int = 8
    block_size: int = 32  # tokens between the particles' meetings, where the ESS is checked
    ess_threshold: float = 0.5  # resample when ESS < ess_threshold · particles (0: never, 1: at every meeting)
    bridge_tokens: int = 0  # exponent bridging over this many first tokens (0: off, the target from the start)

    def validate(self, target: Target | None = None) -> SMCConfig:
        """Check the settings, and with a `target`, that its length is set."""
        if not is_count(self.particles, 1):
            raise SettingError("particles",
                               f"particles must be an integer of at least 1, got {self.particles!r}")
        if not is_count(self.block_size, 1):
            raise SettingError("block_size",
                               f"block_size must be an integer of at least 1, got {self.block_size!r}")
        threshold = self.ess_threshold
        if isinstance(threshold, bool) or not isinstance(threshold, int | float) or not 0 <= threshold <= 1:
            raise SettingError("ess_threshold",
                               f"ess_threshold must be a number from 0 (never resample) to 1 (resample whenever the "
                               f"weights differ), got {threshold!r}")
        if not is_count(self.bridge_tokens, 0):
            raise SettingError("bridge_tokens",
                               f"bridge_tokens must be an integer of at least 0 (0: no bridging), got "
                               f"{self.bridge_tokens!r}")
        if target is not None:
            _ = target.length  # raises when the target's length is unset (Target checked it otherwise)
        return self

    def as_dict(self) -> dict:
        """The settings that change a sample's numbers, for store keys (α and the length are keyed by the caller)."""
        settings = {"particles": self.particles, "block_size": self.block_size,
                    "ess_threshold": float(self.ess_threshold), "resampling": DECODE.revision("resampling")}
        return {**settings, "bridge_tokens": self.bridge_tokens} if self.bridge_tokens else settings

    def exponent(self, t: int, alpha: float) -> float:
        """The exponent of the intermediate target p^α after t generated tokens (α throughout without bridging)."""
        if not self.bridge_tokens:
            return float(alpha)
        return 1.0 + (alpha - 1.0) * min(t, self.bridge_tokens) / self.bridge_tokens


@dataclass
class Particle(Row):
    """One particle: a decoded row and its log importance weight."""

    log_weight: float = 0.0
    finished: bool = False


@dataclass
class SMCCompletion(Completion):
    """The particle returned for a problem, with what the whole particle system did and cost."""

    chosen: int = 0
    log_weights: list[float] = field(default_factory=list)  # every particle's final log weight
    particles: list[Completion] = field(default_factory=list)  # every particle's completion
    ess: list[float] = field(default_factory=list)  # ESS / K at each meeting, before any resampling
    resamples: int = 0


def effective_sample_size(log_weights: np.ndarray) -> float:
    """(Σw)² / Σw², computed from log weights without overflow: K for equal weights, 1 when one dominates."""
    shifted = np.exp(log_weights - log_weights.max())
    return float(shifted.sum() ** 2 / (shifted ** 2).sum())


def systematic_resample(log_weights: np.ndarray, u: float) -> np.ndarray:
    """Offspring counts of systematic resampling: pointers (u + i) / K, i < K, into the normalised cumulative
    weights; particle j gets as many offspring as pointers land in its interval (they add up to K)."""
    k = len(log_weights)
    w = np.exp(log_weights - log_weights.max())
    edges = np.cumsum(w / w.sum())
    edges[-1] = 1.0  # rounding must not leave the last pointer outside
    pointers = (u + np.arange(k)) / k
    return np.bincount(np.searchsorted(edges, pointers, side="right"), minlength=k)[:k]


def _ancestors(counts: np.ndarray) -> list[int]:
    """The parent of each slot after resampling: a particle with offspring keeps its own slot, the extra copies
    go to the slots of particles without offspring (so survivors are never overwritten)."""
    parent = list(range(len(counts)))
    spare = iter(j for j, c in enumerate(counts) if c == 0)
    for j, c in enumerate(counts):
        for _ in range(int(c) - 1):
            parent[next(spare)] = j
    return parent


class ParticleGroup(Group):
    """The K particles of one problem: they meet after every block, where the group resamples them."""

    def __init__(self, particles: list[Particle], target: Target, cfg: SMCConfig, stops: set[int],
                 generator: torch.Generator):
        self.particles, self.target, self.cfg, self.stops, self.generator = particles, target, cfg, stops, generator
        self.size = len(particles)
        self.done = False
        self.ess: list[float] = []
        self.resamples = 0

    def release(self) -> list[tuple[Row, Row]]:
        ps = self.particles
        for p in ps:
            p.finished = p.finished or len(p.tokens) >= self.target.length or bool(
                ends_with_stop(p.tokens, self.stops))
        if all(p.finished for p in ps):
            self.done = True
            return []
        log_w = np.array([p.log_weight for p in ps], dtype=np.float64)
        ess = effective_sample_size(log_w)
        self.ess.append(ess / self.size)
        if ess >= self.cfg.ess_threshold * self.size * (1 - ESS_ROUNDING):
            return []
        self.resamples += 1
        u = float(torch.rand((), generator=self.generator, dtype=torch.float64))
        parent = _ancestors(systematic_resample(log_w, u))
        mean = float(np.logaddexp.reduce(log_w) - math.log(self.size))
        copies = []
        for dst, src in enumerate(parent):
            if src != dst:
                a, b = ps[src], ps[dst]
                b.tokens, b.logp, b.logq, b.finished = list(a.tokens), list(a.logp), list(a.logq), a.finished
                copies.append((a, b))
        for p in ps:
            p.log_weight = mean
        return copies

    def choose(self) -> int:
        """The particle returned: drawn with probability ∝ its final weight."""
        log_w = torch.tensor([p.log_weight for p in self.particles], dtype=torch.float64)
        return int(torch.multinomial(torch.softmax(log_w, 0), 1, generator=self.generator))


def _particle(p: Particle, group: ParticleGroup) -> Program:
    """One particle as a program: grow a block from the proposal, add its log weight, meet the others."""
    cfg, length = group.cfg, group.target.length
    while not group.done:
        if not p.finished and len(p.tokens) < length and not ends_with_stop(p.tokens, group.stops):
            cap = min((len(p.tokens) // cfg.block_size + 1) * cfg.block_size, length)
            start = len(p.tokens)
            yield Adopt((yield Extension(p, start, cap - start)))
            p.log_weight += _weight_gain(p, start, group.target, cfg, group.stops)
        yield Barrier(group)
    return Completion(tokens=p.tokens, logp=p.logp, logq=p.logq, stopped=ends_with_stop(p.tokens, group.stops))


def _weight_gain(p: Particle, start: int, target: Target, cfg: SMCConfig, stops: set[int]) -> float:
    """The log weight that tokens start.. of a particle add: α·log p − log q each (= log Z_t) without bridging."""
    alpha = target.alpha
    if not cfg.bridge_tokens:
        return sum(alpha * lp - lq for lp, lq in zip(p.logp[start:], p.logq[start:], strict=True))
    gain, prefix, n = 0.0, sum(p.logp[:start]), len(p.tokens)
    for t in range(start, n):
        last = t + 1 == n and (p.tokens[t] in stops or n >= target.length)
        before, now = cfg.exponent(t, alpha), (alpha if last else cfg.exponent(t + 1, alpha))
        gain += (now - before) * prefix + now * p.logp[t] - p.logq[t]
        prefix += p.logp[t]
    return gain


def particle_seeds(seed: int, particles: int) -> tuple[list[int], int]:
    """The seeds of a problem's particles and of its group's resampling draws. Particle 0 uses `seed` itself,
    so that with one particle SMC draws exactly what low-temperature sampling with that seed draws."""
    derived = np.random.SeedSequence([int(seed), particles]).generate_state(particles + 1, np.uint64) >> np.uint64(1)
    return [int(seed)] + [int(x) for x in derived[1:particles]], int(derived[particles])


def run_smc(engine: Engine, prompts: list[list[int]], stop_ids, target: Target, cfg: SMCConfig, seeds: list[int],
            batch_size: int | None = None, on_done: OnDone | None = None) -> list[SMCCompletion]:
    """One SMC sample of `target` per (prompt, seed): K particles each; `on_done(i, completion)` hears of each problem as its
    last particle ends. At most `batch_size` particles decode at once, rounded down to whole problems (at least
    one problem's K)."""
    stops = set(stop_ids)
    (done,) = run_together(engine, [smc_work(prompts, stops, target, cfg, seeds)], stops, batch_size,
                           one_work(on_done))
    return done


def smc_work(prompts: Sequence[Sequence[int]], stops: set[int], target: Target, cfg: SMCConfig,
             seeds: Sequence[int]) -> Work:
    """The particles' programs, checked, for `run_smc` or a shared engine run (`helpers.samplers.work`): a
    problem's K particles are consecutive rows that run together, and its job ends with the last of them."""
    cfg.validate(target)
    check_prompts(prompts, seeds, "SMC")
    k = cfg.particles
    groups, tasks = [], []
    for prompt, seed in zip(prompts, seeds, strict=True):
        particle_seed, group_seed = particle_seeds(seed, k)
        ps = [Particle(list(prompt), torch.Generator().manual_seed(s), target.temperature) for s in particle_seed]
        group = ParticleGroup(ps, target, cfg, stops, torch.Generator().manual_seed(group_seed))
        groups.append(group)
        tasks += [(p, _particle(p, group)) for p in ps]
    pending: dict[int, dict[int, Completion]] = {}

    def collect(i: int, c: Completion) -> tuple[int, SMCCompletion] | None:
        problem, member = divmod(i, k)
        pending.setdefault(problem, {})[member] = c
        if len(pending[problem]) < k:
            return None
        done = pending.pop(problem)
        return problem, _combine(groups[problem], [done[j] for j in range(k)])

    return Work(tasks, len(groups), room=target.length, group=k, collect=collect)


def _combine(group: ParticleGroup, particles: list[Completion]) -> SMCCompletion:
    chosen = group.choose()
    best = particles[chosen]
    return SMCCompletion(
        tokens=best.tokens, logp=best.logp, logq=best.logq, stopped=best.stopped,
        decoded_tokens=sum(c.decoded_tokens for c in particles), prefill_tokens=sum(c.prefill_tokens for c in particles),
        forward_passes=sum(c.forward_passes for c in particles), seconds=sum(c.seconds for c in particles),
        chosen=chosen, log_weights=[p.log_weight for p in group.particles], particles=particles, ess=group.ess,
        resamples=group.resamples)


def smc_sample(model, prompt: list[int], stop_ids, target: Target, cfg: SMCConfig, seed: int = 0,
               engine: Engine | None = None) -> SMCCompletion:
    """One SMC sample of `target` for one prompt (the slot engine unless an engine is given)."""
    return run_smc(engine or make_engine("slot", model), [list(prompt)], stop_ids, target, cfg, [seed])[0]
