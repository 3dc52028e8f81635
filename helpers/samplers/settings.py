"""The one home of every decode parameter: `DecodeSettings` (method, length, shots, seed, α, top-k, and the
power-sampling or SMC settings), and which engine runs it.

A decode's store key derives from its settings, its model's identity and its engine. The book's own
engines (`SlotEngine` on KV slots, `ReencodeEngine`) compute the same numbers for the same seed (tests hold them to it), so they
share one key; a sampled decode's key also names how tokens are drawn from a seed (`helpers.engines.categorical`), so the
records of an earlier draw are never mixed with this one's. vLLM computes with its own kernels and its own random streams,
so its records are keyed apart (`engine: vllm`): one engine's records are never read back as another's.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TypeVar

from helpers.core.checks import SettingError, is_count
from helpers.results.kinds import DECODE
from helpers.samplers.power import PowerConfig
from helpers.samplers.smc import SMCConfig
from helpers.samplers.target import Target, check_length

METHODS = ("greedy", "temperature", "low_temperature", "power", "smc")
T = TypeVar("T")
TARGETED = ("low_temperature", "power", "smc")  # the methods that aim at p^alpha
ENGINES = ("slot", "vllm")  # the book's own slot engine (helpers.engines.slot), or vLLM
PROMPT_FORMAT = 1  # bump when `helpers.data.prompts.build_prompt` changes what a prompt looks like: stored decodes recompute


@dataclass(frozen=True)
class DecodeSettings:
    """Everything that changes a decode's numbers, checked when made; `key()` is its part of the store key.

    `target` (`Target(alpha)`) is the p^α of low-temperature sampling (T = 1/α), power sampling and SMC, which those
    methods need and the others refuse; its length is set to `max_new_tokens` here, so no caller has to. `top_k`
    restricts temperature sampling; power sampling's proposal top-k is the `PowerConfig`'s.
    """

    method: str
    max_new_tokens: int
    shots: int = 0
    seed: int = 0
    target: Target | None = None
    top_k: int = 0
    power: PowerConfig | None = None
    smc: SMCConfig | None = None

    def __post_init__(self) -> None:
        if self.method not in METHODS:
            raise ValueError(f"method must be one of {METHODS}, got {self.method!r}")
        check_length(self.max_new_tokens)
        if not is_count(self.shots, 0):
            raise ValueError(f"shots must be an integer of at least 0, got {self.shots!r}")
        if not is_count(self.seed, 0):
            raise ValueError(f"seed must be an integer of at least 0, got {self.seed!r}")
        if not is_count(self.top_k, 0):
            raise ValueError(f"top_k must be 0 (off) or a positive integer, got {self.top_k!r}")
        if (self.power is not None) != (self.method == "power"):
            raise ValueError("power sampling needs power=PowerConfig(...), and only power sampling takes one")
        if (self.smc is not None) != (self.method == "smc"):
            raise ValueError("SMC needs smc=SMCConfig(...), and only SMC takes one")
        if (self.target is not None) != (self.method in TARGETED):
            raise ValueError(f"{', '.join(TARGETED)} need target=Target(alpha), and only they take one; got "
                             f"{self.method!r} with target {self.target!r}")
        if self.target is not None:
            if not isinstance(self.target, Target):
                raise ValueError(f"target must be a Target(alpha), got {self.target!r}")
            if self.target.max_new_tokens not in (None, self.max_new_tokens):
                raise ValueError(f"target.max_new_tokens ({self.target.max_new_tokens}) differs from max_new_tokens "
                                 f"({self.max_new_tokens}); set one of them")
            object.__setattr__(self, "target", Target(self.target.alpha, self.max_new_tokens))
        for given in (self.power, self.smc):
            if given is not None:
                given.validate(self.target)

    @property
    def temperature(self) -> float:
        """The temperature tokens are drawn at (the proposal's, for power sampling and SMC)."""
        if self.method == "greedy":
            return 0.0
        if self.method == "temperature":
            return 1.0
        return self.target.temperature

    @property
    def samples(self) -> bool:
        """Whether seeds matter (everything but greedy decoding)."""
        return self.method != "greedy"

    def key(self) -> dict:
        """The settings that change a decode's numbers, for the store key (the same dict the book always used).

        Greedy decoding depends on no seed, α or top-k, so every chapter that decodes greedily with the same
        model, prompt and length shares one record set. Which problems and how many samples are asked for are
        not settings: records are stored per problem and sample.
        """
        settings = {"method": self.method, "max_new_tokens": self.max_new_tokens, "shots": self.shots,
                    "prompt_format": PROMPT_FORMAT}
        if self.method == "greedy":
            return settings
        if self.method in ("power", "smc"):
            return {**settings, "seed": self.seed, "alpha": float(self.target.alpha),
                    **(self.power or self.smc).as_dict()}
        if self.method == "low_temperature":
            return {**settings, "seed": self.seed, "alpha": float(self.target.alpha), "top_k": self.top_k}
        return {**settings, "seed": self.seed, "top_k": self.top_k}


def engine_key(engine: str, samples: bool = False, dtype: str = "float32", device: str = "cpu") -> dict:
    """The engine's part of a store key: for the book's own engines ("slot"), how a sampled decode draws its tokens
    (the decode kind's `draw` revision; greedy decodes draw nothing, so their key stays as it always was) and,
    for a number format whose decoding attention was revised on a CPU (its `attention` revision:
    bfloat16; the revised path runs on CPUs only, so a GPU's keys do not carry it), the revision; for vLLM, its
    name."""
    check_engine(engine)
    if engine != "slot":
        return {"engine": engine}
    attention = DECODE.revision("attention")
    revised = dtype in attention and device.split(":")[0] == "cpu"
    return ({"draw": DECODE.revision("draw")} if samples else {}) | ({"attention": attention[dtype]} if revised else {})


def check_engine(engine: str) -> str:
    """`engine`, where it names one the book decodes on (`ENGINES`); else a ValueError that lists them."""
    if engine not in ENGINES:
        hint = " ('slot' is the book's own engine, on transformers' modules)" if engine == "transformers" else ""
        raise ValueError(f"the engine is one of {', '.join(ENGINES)}, not {engine!r}{hint}.")
    return engine


# The one map between the notebooks' parameters and the searches' settings: parameter -> (config, field). The
# notebooks build their `Searches` through it (`Searches.from_parameters` of their named parameters), and the runner checks a
# profile's values through the same call, so a name cannot drift between them.
SEARCH_PARAMETERS: dict[str, tuple[str, str]] = {
    "alpha": ("target", "alpha"),
    "block_size": ("power", "block_size"), "mcmc_steps": ("power", "mcmc_steps"), "power_mode": ("power", "mode"),
    "mh_blocks": ("power", "blocks"),
    "smc_particles": ("smc", "particles"), "smc_block_size": ("smc", "block_size"),
    "smc_ess_threshold": ("smc", "ess_threshold"), "smc_bridge_tokens": ("smc", "bridge_tokens"),
}


def _as_parameters(config: str, make: Callable[[], T]) -> T:
    """`make()`, with a SettingError about one of `config`'s fields reworded to name the notebook's parameter."""
    try:
        return make()
    except SettingError as err:
        names = {field: name for name, (owner, field) in SEARCH_PARAMETERS.items() if owner == config}
        raise SettingError(names.get(err.field, err.field), str(err)) from None


@dataclass(frozen=True)
class Searches:
    """What chapters 04 and 05 search with: one p^α (its `Target`) and the two samplers' own settings."""

    target: Target
    power: PowerConfig
    smc: SMCConfig

    @classmethod
    def from_parameters(cls, values: Mapping, max_new_tokens: int | None = None) -> Searches:
        """From a notebook's parameters (a mapping of them, which may hold others too), by
        `SEARCH_PARAMETERS`. With `max_new_tokens`, the length is checked against the settings too. A bad value
        raises a SettingError that names the notebook's parameter; a missing one, a ValueError that lists them."""
        if missing := [name for name in SEARCH_PARAMETERS if name not in values]:
            raise ValueError(f"the search settings lack {', '.join(missing)}: give every one of "
                             f"{', '.join(SEARCH_PARAMETERS)}")
        fields: dict[str, dict] = {"target": {}, "power": {}, "smc": {}}
        for name, (config, field) in SEARCH_PARAMETERS.items():
            fields[config][field] = values[name]
        target = Target(**fields["target"])
        power = _as_parameters("power", lambda: PowerConfig(**fields["power"]).validate())
        smc = _as_parameters("smc", lambda: SMCConfig(**fields["smc"]).validate())
        if max_new_tokens is not None:
            length = Target(target.alpha, check_length(max_new_tokens))
            _as_parameters("power", lambda: power.validate(length))
            _as_parameters("smc", lambda: smc.validate(length))
        return cls(target, power, smc)


def chapter_settings(searches: Searches, *, max_new_tokens: int, shots: int, seed: int) -> dict[str, DecodeSettings]:
    """The five decodes chapters 04 and 05 compare, by method: greedy, low temperature (T = 1/α), T = 1, power
    sampling by MH and by SMC, the last three towards the same p^α. One function, so that chapter 05 reads exactly
    the records chapter 04 wrote."""
    common = dict(max_new_tokens=max_new_tokens, shots=shots, seed=seed)
    target = Target(searches.target.alpha)
    return {"greedy": DecodeSettings("greedy", **common),
            "low_temperature": DecodeSettings("low_temperature", target=target, **common),
            "temperature": DecodeSettings("temperature", **common),
            "power": DecodeSettings("power", target=target, power=searches.power, **common),
            "smc": DecodeSettings("smc", target=target, smc=searches.smc, **common)}
