"""Power sampling: block-wise Metropolis–Hastings towards p^α (Karan & Du), in two modes.

The proposal is the model at temperature 1/α. A chain grows block by block; after each block it makes N
MH moves, each of which picks a cut point, regenerates the suffix from the proposal and accepts or rejects.

* `exact`: a correct MH chain for p^α over completions of at most `max_new_tokens` tokens. EOS ends a
  completion (absorbing); a proposal runs to EOS or to the current block's end, so it may be longer or
  shorter than the current state; the ratio covers both full suffixes; the cut point is uniform over the
  current state's positions, so the Hastings term log(t_x) − log(t_y) corrects for the two lengths.
* `reference`: what the published code does: each block extends the current sequence by B tokens from
  wherever it stands (so a chain whose EOS-ending suffix was replaced by a same-length one without EOS grows
  from its own length, not to a fixed cap kB), a top-k 50 proposal, a suffix regenerated only up to the
  current length, the ratio over the proposal's length, no cut-point correction, EOS checked after each
  block (in the generated tokens only), for `blocks` blocks (the published `block_num`; by default the length
  over B), never past the length. A chain that ends a block at the length without EOS ends there, as the
  published loop's chains do when its length is block_num * B: under a shorter cap, the blocks it could no
  longer grow in would only move it in place. `helpers.samplers.toy.reference_law` enumerates this loop's law.

Only per-token scalars are kept: the sampled token, log p under the model at T=1, log q under the proposal.
A chain yields a checkpoint (`chain_state`) after each block's growth and after each MH move: a run stopped by its
budget goes on from each chain's last finished move (`chain_work`'s `resume`), where one block of a 1.5B model's chain
can take over an hour among a hundred others.
Each chain is a program (`_chain`) that asks an engine (`helpers.engines.loop`) for extensions: the slot engine runs
many chains at once, each at its own pace, and keeps each chain's KV cache up to its cut point; the re-encoding
engine re-encodes at every token (for checks). The published code's own cost
pattern, `generate` per proposal, is `helpers.engines.generate`.
"""

from __future__ import annotations

import base64
import math
from collections.abc import Sequence
from dataclasses import dataclass, field

import torch

from helpers.core.checks import SettingError, is_count
from helpers.engines.engine import Engine
from helpers.engines.protocol import (
    Adopt,
    Checkpoint,
    Completion,
    Extension,
    OnDone,
    Program,
    Row,
    Spent,
    ends_with_stop,
)
from helpers.engines.registry import make_engine
from helpers.results.kinds import DECODE
from helpers.samplers.target import MH_MODES, Target, check_length
from helpers.samplers.work import Work, check_prompts, one_work, run_together

__all__ = ["Chain", "ChainCompletion", "PowerConfig", "chain_state", "chain_work", "power_sample", "resumable",
           "run_chains"]


@dataclass(frozen=True)
class PowerConfig:
    """The one home of the MH sampler's own settings (α and the length are the `Target`'s); `validate` explains
    what is wrong with bad values."""

    block_size: int = 192
    mcmc_steps: int = 10
    mode: str = "exact"
    top_k: int = 0  # reference mode only: 0 means the published 50
    blocks: int = 0  # reference mode only: how many blocks a chain may run (the published loop's `block_num`);
    # 0 means length / block_size, the published relation max_new_tokens = block_num * B

    def validate(self, target: Target | None = None) -> PowerConfig:
        """Check the settings, and with a `target`, that its length is set and holds at least one block."""
        if not is_count(self.block_size, 1):
            raise SettingError("block_size",
                               f"block_size must be an integer of at least 1, got {self.block_size!r}")
        if not is_count(self.mcmc_steps, 0):
            raise SettingError("mcmc_steps",
                               f"mcmc_steps must be an integer of at least 0, got {self.mcmc_steps!r}")
        if self.mode not in MH_MODES:
            raise SettingError("mode", f"mode must be one of {MH_MODES}, got {self.mode!r}")
        if not is_count(self.top_k, 0):
            raise SettingError("top_k", f"top_k must be 0 or a positive integer, got {self.top_k!r}")
        if not is_count(self.blocks, 0):
            raise SettingError("blocks", f"blocks must be 0 or a positive integer, got {self.blocks!r}")
        if self.mode == "exact" and self.blocks:
            raise SettingError("blocks",
                               "exact mode grows its chain to k * block_size at block k, so the length sets its "
                               "blocks: use blocks=0, or mode='reference' for the published loop's block count.")
        if self.mode == "exact" and self.top_k:
            raise SettingError("top_k",
                               "exact mode samples its proposal from the full distribution: with top_k > 0 the chain "
                               "no longer targets p^alpha. Use top_k=0, or mode='reference' for the published top-k "
                               "proposal.")
        if target is not None:
            check_length(target.length, self.block_size, f" (block_size, {self.block_size})")
        return self

    def as_dict(self) -> dict:
        """The settings that change a chain's numbers, for store keys (α and the length are keyed by the caller)."""
        settings = {"block_size": self.block_size, "mcmc_steps": self.mcmc_steps, "mode": self.mode,
                    "top_k": self.proposal_top_k}
        if self.mode == "reference":  # how it grows a chain: "extend", the published loop's (B tokens from wherever
            # the chain stands); records of the earlier schedule (growth to the cap kB) stay apart
            settings["schedule"] = DECODE.revision("schedule")
            if self.blocks:  # keyed only where set, so a chain of length / block_size blocks keeps its key (it
                # reaches the length only in its last block, so the rule for a chain at the length never moves it)
                settings["blocks"] = self.blocks
                settings["at_cap"] = DECODE.revision("at_cap")
        return settings

    def n_blocks(self, length: int) -> int:
        """How many blocks a chain of at most `length` new tokens may run: `blocks` where set (reference mode),
        else as many as the length holds. Under a token cap shorter than block_num * B, the published loop's later
        blocks are what finish an answer whose ending a move replaced (it stands below the length and grows
        again); a chain that ends a block at the length without EOS ends there (`_chain`)."""
        return self.blocks or math.ceil(length / self.block_size)

    @property
    def proposal_top_k(self) -> int:
        if self.mode == "reference":
            return self.top_k or 50
        return 0


@dataclass
class ChainCompletion(Completion):
    """A chain's completion, with what its moves did."""

    acceptance: list[float] = field(default_factory=list)  # the acceptance rate of each block's moves
    moves: list[tuple[int, bool]] = field(default_factory=list)  # (cut position, accepted) of every move


@dataclass
class Chain(Row):
    """One MH chain: a decoded row plus what the sampler tracks about it."""

    acceptance: list[float] = field(default_factory=list)
    moves: list[tuple[int, bool]] = field(default_factory=list)


# --------------------------------------------------------------------------------------------------
# The sampler: one MH driver for every engine
# --------------------------------------------------------------------------------------------------


def run_chains(engine: Engine, prompts: list[list[int]], stop_ids, target: Target, cfg: PowerConfig, seeds: list[int],
               batch_size: int | None = None, on_done: OnDone | None = None) -> list[ChainCompletion]:
    """Power-sample `target` with one chain per (prompt, seed) pair; at most `batch_size` chains run at once (all by
    default).

    Each chain moves through its blocks on its own: when one of its proposals ends, its next one starts, and
    when a chain ends the next waiting one takes its place. `on_done(i, completion)` hears of each chain as soon
    as it ends.
    """
    stops = set(stop_ids)
    (done,) = run_together(engine, [chain_work(prompts, stops, target, cfg, seeds)], stops, batch_size,
                           one_work(on_done))
    return done


def chain_work(prompts: Sequence[Sequence[int]], stops: set[int], target: Target, cfg: PowerConfig,
               seeds: Sequence[int], resume: Sequence[tuple[dict, Spent] | None] | None = None) -> Work:
    """The chains' programs, checked, for `run_chains` or a shared engine run (`helpers.samplers.work`).
    `resume[i]`, where given, is chain i's last checkpoint (`chain_state`) and its cost until then: the chain goes
    on from there (a checkpoint that does not fit these settings is refused: ValueError)."""
    cfg.validate(target)
    check_prompts(prompts, seeds, "power sampling")
    resume = list(resume) if resume is not None else [None] * len(prompts)
    if len(resume) != len(prompts):
        raise ValueError(f"give one checkpoint or None per prompt: {len(prompts)} prompts, {len(resume)} checkpoints")
    tasks = []
    for p, seed, saved in zip(prompts, seeds, resume, strict=True):
        c = Chain(list(p), torch.Generator().manual_seed(int(seed)), target.temperature, cfg.proposal_top_k)
        start = Place()
        if saved is not None:
            start = _restore(c, saved[0], target, cfg, stops)
            c.restored = saved[1]
        tasks.append((c, _chain(c, target, cfg, stops, start)))
    return Work(tasks, len(tasks), room=2 * target.length, reach=target.length)  # a proposal is written after the
    # state it may replace, but a sequence never grows past the target's length


def resumable(state: dict, target: Target, cfg: PowerConfig, stops: set[int]) -> bool:
    """Whether a chain under `target` and `cfg` can go on from checkpoint `state` (`chain_work`'s `resume`)."""
    try:
        _restore(Chain([0], torch.Generator()), state, target, cfg, stops)
    except ValueError:
        return False
    return True


@dataclass(frozen=True)
class Place:
    """Where a chain stands in its loop: at `block`, before its growth (`grown` False, `step` 0) or after its growth
    and `step` of its MH moves, `accepted` of them accepted."""

    block: int = 0
    step: int = 0
    grown: bool = False
    accepted: int = 0


def chain_state(c: Chain, place: Place) -> dict:
    """What a chain needs to go on from `place` as it would have: its state, its record of moves and its
    generator's state (JSON-able)."""
    state = bytes(c.generator.get_state().numpy())
    return {"block": place.block, "step": place.step, "grown": place.grown, "accepted": place.accepted,
            "tokens": list(c.tokens), "logp": list(c.logp), "logq": list(c.logq), "acceptance": list(c.acceptance),
            "moves": [[i, a] for i, a in c.moves], "generator": base64.b64encode(state).decode("ascii")}


def _restore(c: Chain, state: dict, target: Target, cfg: PowerConfig, stops: set[int]) -> Place:
    """Put checkpoint `state` into the fresh chain `c` and return where it stands; ValueError for a state that these
    settings could not have written (so a chain never goes on from a damaged or foreign checkpoint). A state without
    a step (written between blocks, as earlier code did) stands at its block's start."""
    n_blocks, n_steps = cfg.n_blocks(target.length), cfg.mcmc_steps
    block, tokens = state.get("block"), state.get("tokens")
    step, grown, accepted = state.get("step", 0), state.get("grown", False), state.get("accepted", 0)
    try:
        n = len(tokens)
        moves = [(i, a) for i, a in state["moves"]]
        raw = base64.b64decode(state["generator"], validate=True)
        mid = grown is True  # after the block's growth: the chain may hold up to the block's end, EOS included
        ok = (isinstance(block, int) and isinstance(step, int) and isinstance(accepted, int)
              and isinstance(grown, bool) and not isinstance(step, bool) and not isinstance(accepted, bool)
              and (0 <= block < n_blocks if mid else 0 < block < n_blocks)
              and (0 <= step < max(n_steps, 1) if mid else step == 0) and 0 <= accepted <= step
              and 0 < n <= min(target.length, (block + mid) * cfg.block_size)  # a block grows a chain by B at most
              and all(isinstance(t, int) and not isinstance(t, bool) for t in tokens)
              and len(state["logp"]) == len(state["logq"]) == n
              and all(isinstance(v, int | float) and v <= 1e-6 for v in state["logp"] + state["logq"])
              and len(state["acceptance"]) == (block if n_steps else 0)
              and all(0 <= a <= 1 for a in state["acceptance"])
              and len(moves) == block * n_steps + step
              and sum(a for _, a in moves[block * n_steps:]) == accepted
              and all(isinstance(i, int) and not isinstance(i, bool) and i >= 0 and isinstance(a, bool)
                      for i, a in moves)
              and (mid or not (cfg.mode == "reference" and (n >= target.length or any(t in stops for t in tokens)))))
        if ok:
            c.generator.set_state(torch.frombuffer(bytearray(raw), dtype=torch.uint8))
    except (KeyError, TypeError, ValueError, RuntimeError):
        ok = False
    if not ok:
        raise ValueError("a power-sampling checkpoint does not fit its chain's settings (damaged, or written by other "
                         "code): the chain starts again from its first block")
    c.tokens, c.logp, c.logq = list(tokens), [float(v) for v in state["logp"]], [float(v) for v in state["logq"]]
    c.acceptance, c.moves = [float(a) for a in state["acceptance"]], moves
    return Place(block, step, grown, accepted)


def _chain(c: Chain, target: Target, cfg: PowerConfig, stops: set[int], start: Place = Place()) -> Program:
    """One MH chain as a program from `start`: it asks the engine for a block's growth and for each move's proposal,
    and offers a checkpoint after each growth and each move (but the last move of the last block)."""
    alpha, length = target.alpha, target.length
    n_blocks = cfg.n_blocks(length)
    for block in range(start.block, n_blocks):
        here = start if block == start.block else Place(block)
        if cfg.mode == "reference":  # the published loop: B more tokens from where the chain stands (after the growth,
            cap = min(len(c.tokens) + cfg.block_size, length)  # only a growth reads it: a proposal runs to t)
        else:  # exact mode: the intermediate targets p(x_{0:kB})^α, so block k grows the chain to kB
            cap = min((block + 1) * cfg.block_size, length)
        if not here.grown:
            if not ends_with_stop(c.tokens, stops) and cap > len(c.tokens):  # exact mode: EOS is absorbing
                yield Adopt((yield Extension(c, len(c.tokens), cap - len(c.tokens))))
            if cfg.mcmc_steps:
                yield Checkpoint(chain_state(c, Place(block, 0, True, 0)))
        accepted = here.accepted
        for step in range(here.step, cfg.mcmc_steps):
            if step > here.step:
                yield Checkpoint(chain_state(c, Place(block, step, True, accepted)))
            t = len(c.tokens)
            i = int(torch.randint(t, (1,), generator=c.generator))  # cut: regenerate tokens i..
            req = yield Extension(c, i, (t - i) if cfg.mode == "reference" else (cap - i))
            y = req.tokens
            if cfg.mode == "reference":
                s = len(y)  # the current window is cut to the proposal's length; no Hastings term
                log_r = alpha * sum(req.logp) - alpha * sum(c.logp[i:i + s]) + sum(c.logq[i:i + s]) - sum(req.logq)
            else:
                log_r = (alpha * sum(req.logp) - alpha * sum(c.logp[i:]) + sum(c.logq[i:]) - sum(req.logq)
                         + math.log(t) - math.log(i + len(y)))
            accept = math.log(float(torch.rand((), generator=c.generator)) + 1e-300) < log_r
            c.moves.append((i, accept))
            if accept:
                accepted += 1
                yield Adopt(req)
        if cfg.mcmc_steps:
            c.acceptance.append(accepted / cfg.mcmc_steps)
        if cfg.mode == "reference" and any(tok in stops for tok in c.tokens):
            end = next(k for k, tok in enumerate(c.tokens) if tok in stops) + 1
            c.tokens, c.logp, c.logq = c.tokens[:end], c.logp[:end], c.logq[:end]
            break
        if cfg.mode == "reference" and len(c.tokens) >= length:  # at the length without EOS: no block can grow it
            break
        if block + 1 < n_blocks:
            yield Checkpoint(chain_state(c, Place(block + 1)))
    return ChainCompletion(tokens=c.tokens, logp=c.logp, logq=c.logq,
                           stopped=ends_with_stop(c.tokens, stops), acceptance=c.acceptance, moves=c.moves)


def power_sample(model, prompt: list[int], stop_ids, target: Target, cfg: PowerConfig, seed: int = 0,
                 cache: bool = True) -> ChainCompletion:
    """One power-sampling chain; `cache=False` re-encodes every prefix (the same numbers, at the reference's cost)."""
    engine = make_engine("slot" if cache else "reencode", model)
    return run_chains(engine, [list(prompt)], stop_ids, target, cfg, [seed])[0]
