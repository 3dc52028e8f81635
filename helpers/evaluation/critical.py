"""Each model's critical depth as data: chapter 03 stores it, chapters 04-05 name depths relative to it.

The critical depth (`helpers.models.truncation.critical_depth`) is a property of a model *and* of the sweep that
measured it: its problems, solution length, the depths swept and the collapse share. `SweepSettings` holds exactly
those, keys the stored record, and travels from chapter 03's parameters to chapters 04-05 (the runner passes it as
`critical_sweep`), so `depths: [critical, critical-1]` means the same depths for every model whose sweep ran, and a
second model needs no hand-copied constant.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, replace

from helpers.data.model_sets import check_model_levels
from helpers.models.handle import ModelHandle
from helpers.results.kinds import CRITICAL_DEPTH
from helpers.results.store import Run

_RELATIVE = re.compile(r"^critical\s*(?:([+-])\s*(\d+))?$")
CRITICAL_SHAPE = {"depth": (int, type(None)), "full_accuracy": float, "accuracy": dict, "n_problems": int}


@dataclass(frozen=True)
class SweepSettings:
    """Chapter 03's settings that decide a model's critical depth (not its batch size, nor its other analyses)."""

    dataset: str
    n_problems: int
    levels: tuple[int, ...] | None
    seed: int
    shots: int
    max_new_tokens: int
    depths: tuple[int, ...] | None
    span: int | None
    depth_step: int
    kl_fraction: float
    overlap_threshold: float
    collapse_fraction: float
    # {model: levels} for a model whose problems are drawn from levels of its own (`helpers.data.model_sets.levels_of`);
    # resolved by `for_model` before a record is keyed, so the other models' keys stay as they were without it
    model_levels: Mapping[str, tuple[int, ...]] | None = None
    # the sweep goes down one block at a time until accuracy falls below this share of the full model's (None: the
    # depths above decide); keyed only where set, so the records of sweeps without it keep their keys
    floor_fraction: float | None = None
    # the lens that gives the cut points reads the first this-many problems of each level (None: every problem); it
    # moves no critical depth, so it is never keyed, but chapters 04-05 read the same cut points by it
    lens_per_level: int | None = None

    @classmethod
    def from_parameters(cls, values: Mapping) -> SweepSettings:
        """From chapter 03's parameters (a mapping that may hold others too); a clear error for a missing one."""
        missing = [name for name in cls.__dataclass_fields__ if name not in values and name not in OPTIONAL]
        if missing:
            raise ValueError(f"chapter 03's sweep settings lack {', '.join(missing)}: give every one of "
                             f"{', '.join(cls.__dataclass_fields__)}")

        def tupled(v):
            return tuple(v) if isinstance(v, list | tuple) else v

        fields = {name: tupled(values[name]) for name in cls.__dataclass_fields__ if name in values}
        if "model_levels" in values:
            fields["model_levels"] = check_model_levels(values["model_levels"]) or None
        return cls(**fields)

    def for_model(self, name: str) -> SweepSettings:
        """The settings that decided `name`'s critical depth: its own levels where `model_levels` names it."""
        own = (self.model_levels or {}).get(name)
        return replace(self, levels=self.levels if own is None else tuple(own), model_levels=None)

    def key(self) -> dict:
        """The stored record's key: one model's settings (`for_model`), so `model_levels` is never part of it."""
        if self.model_levels:
            raise ValueError("a critical depth is keyed by one model's settings: call for_model(name) first")
        return {name: list(v) if isinstance(v, tuple) else v for name, v in asdict(self).items()
                if name not in OPTIONAL or (name in KEYED_WHEN_SET and v is not None)}

    def parameters(self) -> dict:
        """The settings as chapter 04-05's `critical_sweep` parameter: the key, with `model_levels` where set."""
        own = self.model_levels
        plain = replace(self, model_levels=None).key()
        lens = {"lens_per_level": self.lens_per_level} if self.lens_per_level is not None else {}
        return plain | lens | ({"model_levels": {k: list(v) for k, v in own.items()}} if own else {})


OPTIONAL = ("model_levels", "floor_fraction", "lens_per_level")  # SweepSettings' fields a parameter set may leave out
KEYED_WHEN_SET = ("floor_fraction",)  # of those, the ones that decide a critical depth: in its key where set


def critical_run(model: ModelHandle, settings: SweepSettings) -> Run:
    """The store of `model`'s critical depth under chapter 03's `settings` (one record, unit 'stitch')."""
    return Run(CRITICAL_DEPTH, {**model.identity(), **settings.key()})


def store_critical(model: ModelHandle, settings: SweepSettings, accuracy: Mapping[int, float], n_problems: int) -> int | None:
    """Record the stitched sweep's accuracy by depth and the critical depth it gives (chapter 03 calls this); the
    stored value, which is the one computed unless an earlier run stored it already."""
    from helpers.models.truncation import critical_depth

    full = accuracy[max(accuracy)]
    record = critical_run(model, settings).compute("stitch", lambda: {
        "depth": critical_depth(dict(accuracy), full, settings.collapse_fraction), "full_accuracy": float(full),
        "accuracy": {str(d): float(a) for d, a in sorted(accuracy.items())}, "n_problems": n_problems})
    return record["depth"]


def stored_cut_points(model: ModelHandle, name: str, settings: SweepSettings, batch_size: int) -> tuple[int, ...]:
    """`model`'s (named `name`, as the chapters name it) lens cut points (blocks kept) as chapter 03 found them under `settings` (one model's, `for_model`):
    chapter 02's two rules over the greedy solutions of chapter 03's problems, both read from the store where chapter
    03 stored them (`solutions_and_lens`), so that chapters 04-05 mark the same points without a lens of their own."""
    from helpers.data.model_sets import problem_sets
    from helpers.evaluation.solutions import solutions_and_lens
    from helpers.interp.lens import lens_cut_points

    problems = problem_sets([name], settings.dataset, n=settings.n_problems, levels=settings.levels,
                            seed=settings.seed)[name]
    solved = solutions_and_lens(model, problems, max_new_tokens=settings.max_new_tokens, shots=settings.shots,
                                batch_size=batch_size, lens_per_level=settings.lens_per_level)
    return tuple(lens_cut_points(solved.curves, settings.kl_fraction, settings.overlap_threshold)[2])


class CriticalDepthMissing(LookupError):
    """Chapter 03 has not stored the critical depth these depths are relative to."""


def stored_critical(model: ModelHandle, settings: SweepSettings) -> int | None:
    """`model`'s critical depth as chapter 03 stored it under `settings`; CriticalDepthMissing when it has not."""
    return stored_sweep(model, settings)["depth"]


def stored_sweep(model: ModelHandle, settings: SweepSettings) -> dict:
    """Chapter 03's stored record of `model`'s stitched sweep under `settings` (its critical depth, and the greedy
    accuracy at each depth it swept); CriticalDepthMissing when it has not stored one."""
    record = critical_run(model, settings).get("stitch")
    if record is None:
        name = model.name
        raise CriticalDepthMissing(
            f"chapter 03 has not stored the critical depth of {name} under these settings (its problems, solution "
            f"length, depths and collapse share); run chapter 03 with {name} among its models first: "
            "python -m helpers run --profile PROFILE --only 03_stitch_and_preserve")
    return record


def parse_depth(entry: object) -> tuple[bool, int]:
    """(relative, value) of one `depths` entry: an integer number of blocks, or 'critical', 'critical+k',
    'critical-k'; a ValueError that says what is allowed otherwise."""
    if isinstance(entry, int) and not isinstance(entry, bool):
        return False, entry
    match = _RELATIVE.match(entry.strip()) if isinstance(entry, str) else None
    if match is None:
        raise ValueError(f"a depth is a number of blocks (e.g. 23) or relative to chapter 03's critical depth "
                         f"('critical', 'critical+1', 'critical-1'), not {entry!r}")
    sign, k = match.groups()
    return True, (int(k) if sign == "+" else -int(k)) if k else 0


@dataclass(frozen=True)
class DepthChoice:
    """The stitched depths one model runs in chapters 04-05, and where they came from, for the page to say."""

    model: str
    n_layers: int
    depths: tuple[int, ...]
    critical: int | None  # chapter 03's critical depth (None: not stored, or the full model solves nothing)
    relative: bool  # the profile named them relative to the critical depth
    default: bool = False  # the profile named none: the depth just below the full one
    curve: tuple[tuple[int, float], ...] = ()  # chapter 03's stitched greedy accuracy by depth, as it stored it
    sweep: SweepSettings | None = None  # the settings (this model's) that stored it: which problems it ran on
    curve_problems: int = 0  # how many problems it ran on
    cuts: tuple[int, ...] = ()  # chapter 03's lens cut points on its problems, as blocks kept (`stored_cut_points`)

    def describe(self) -> str:
        """One sentence: which depths, chosen how, and whether a fixed choice agrees with chapter 03."""
        listed = " and ".join(str(d) for d in self.depths) or "none (only the full model)"
        where = f"{self.model}'s {self.n_layers} blocks"
        if self.relative:
            if self.depths == (self.critical,):
                return f"The depth tested on {where} is chapter 03's critical depth, {self.critical}."
            return (f"The depths tested on {where} are named by chapter 03's critical depth, {self.critical}: "
                    f"{listed}.")
        text = (f"The profile names no depth, so the one tested on {where} is the depth just below the full one, "
                f"{listed}" if self.default else f"The profile fixed the depths tested on {where} at {listed}")
        if self.critical is None:
            return text + "; chapter 03 has stored no critical depth to compare them with."
        if self.critical in self.depths:
            return text + f", which include chapter 03's critical depth, {self.critical}."
        return (text + f", but chapter 03 found this model's critical depth at {self.critical}: these depths "
                "disagree with the sweep, so the headline below is not at the critical depth.")


def choose_depths(model: ModelHandle, name: str, n_layers: int, depths: Sequence | None,
                  settings: SweepSettings | None) -> DepthChoice:
    """Resolve `depths` (None: the depth just below the full one; entries as `parse_depth`) for one model: relative
    entries from chapter 03's stored critical depth (CriticalDepthMissing without it), fixed ones as given, each
    checked to lie below the full depth."""
    parsed = [parse_depth(d) for d in depths] if depths is not None else [(False, n_layers - 1)]
    relative = any(r for r, _ in parsed)
    critical, record, own = None, None, None
    if settings is not None:
        own = settings.for_model(name)
        try:
            record = stored_sweep(model, own)
            critical = record["depth"]
        except CriticalDepthMissing:
            if relative:
                raise
    if relative and settings is None:
        raise CriticalDepthMissing("relative depths need chapter 03's sweep settings (critical_sweep)")
    if relative and critical is None:
        raise CriticalDepthMissing(f"{name} solves none of chapter 03's problems at full depth, so it has no critical "
                                   "depth to name depths by; give fixed depths instead")
    resolved = sorted({critical + v if r else v for r, v in parsed}, reverse=True)
    outside = [d for d in resolved if not 2 <= d <= n_layers]
    if outside:
        raise ValueError(f"depths {depths} give {outside} for {name}, outside 2..{n_layers} (its blocks)")
    curve = tuple(sorted((int(d), float(a)) for d, a in record["accuracy"].items())) if record else ()
    return DepthChoice(name, n_layers, tuple(d for d in resolved if d < n_layers) or (), critical, relative,
                       default=depths is None, curve=curve, sweep=own if record else None,
                       curve_problems=record["n_problems"] if record else 0)


def critical_interval(correct: Mapping[int, Sequence[bool]], fraction: float, n_boot: int = 2000,
                      seed: int = 0) -> tuple[int, int] | None:
    """A 95% bootstrap interval of the critical depth over problems: `correct[depth]` holds each problem's greedy
    outcome at that depth (the same problems at every depth, full depth included), resampled together, the critical
    depth (`helpers.models.truncation.critical_depth`) read from each resample. None where the full model solves
    nothing. Where it spans more than one depth, a problem or two either way moves the critical depth."""
    import numpy as np

    from helpers.models.truncation import critical_depth

    depths = sorted(correct)
    if not depths:
        raise ValueError("no depths to read a critical depth from")
    table = np.array([[bool(x) for x in correct[d]] for d in depths], dtype=float)  # [depth, problem]
    if table.shape[1] == 0:
        raise ValueError("no problems to resample")
    full = max(depths)
    rng = np.random.default_rng(seed)
    found = []
    for _ in range(n_boot):
        acc = table[:, rng.integers(0, table.shape[1], table.shape[1])].mean(axis=1)
        by_depth = dict(zip(depths, acc, strict=True))
        c = critical_depth(by_depth, by_depth[full], fraction)
        if c is not None:
            found.append(c)
    if not found:
        return None
    return int(np.floor(np.quantile(found, 0.025))), int(np.ceil(np.quantile(found, 0.975)))
