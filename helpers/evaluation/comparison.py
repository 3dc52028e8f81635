"""The method comparison of chapters 04 and 05: which problems the searches run on, at which depths and on how many
problems each method decodes (one plan, so that chapter 05 reads exactly the records chapter 04 wrote), and the
paired tests as a table.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TypeVar

from helpers.data.problems import Problem, interleaved
from helpers.evaluation.critical import DepthChoice, parse_depth
from helpers.evaluation.stats import PairedDifference

R = TypeVar("R")


def per_model(rows: Sequence[R], by_size: bool = False) -> list[list[R]]:
    """Rows (anything with a `model`) grouped by model, each group in its rows' order: in the profile's order of
    models, or with `by_size` the smaller model first (by the rows' `size`), as the chapters' figures set them."""
    groups = [[r for r in rows if r.model == m] for m in dict.fromkeys(r.model for r in rows)]
    return sorted(groups, key=lambda g: getattr(g[0], "size", 0)) if by_size else groups


def search_order(problems: Sequence[Problem], search_problems: int | None) -> list[Problem]:
    """The chapters' problem order: as given, or, when a search runs on a subset, levels taken in turn, so that
    the first `search_problems` cover every level alike. Every method's scores keep this order."""
    if search_problems is None:
        return list(problems)
    if isinstance(search_problems, bool) or not isinstance(search_problems, int) or search_problems < 1:
        raise ValueError(f"search_problems must be a number of problems of at least 1, or None (all), got "
                         f"{search_problems!r}")
    return interleaved(problems, None)


def subset_size(search_problems: int | None, power_subsets: Mapping[str, int] | None) -> int | None:
    """The smallest subset any search runs on (None: none), which decides `search_order`: one order for every model,
    so that the sizes' scores pair problem by problem."""
    sizes = [k for k in (search_problems, *(power_subsets or {}).values()) if k is not None]
    return min(sizes) if sizes else None


def power_subset(power_subsets: Mapping[str, int] | None, model: str) -> int | None:
    """How many problems MH at the full depth of `model` runs on: the first k where `power_subsets` names the model
    (a published build whose release does not yet hold the model's chains on every problem), else every problem."""
    k = (power_subsets or {}).get(model)
    if k is not None and (isinstance(k, bool) or not isinstance(k, int) or k < 1):
        raise ValueError(f"power_subsets[{model!r}] must be a number of problems of at least 1, got {k!r}")
    return k


def search_limits(search_problems: int | None, power: int | None = None) -> dict[str, int]:
    """Which decodes run on the first few problems only, at one depth: SMC on `search_problems`, and MH on `power`
    where given (the full depth of a model named in `power_subsets`).

    Every method the answer's decomposition pairs runs on every problem at every depth unless a profile says
    otherwise: greedy, low temperature, T = 1 and MH, so that what the cut costs, what the search recovers at the
    cut and what it gains at the full depth are paired differences over the same problems. SMC, a second sampler
    of the same target, takes the subset at every depth, and is compared only with the other methods restricted to
    it. One function, so that chapter 05 reads exactly the records chapter 04 wrote.
    """
    limits = {} if search_problems is None else {"smc": search_problems}
    return limits | ({} if power is None else {"power": power})


def depth_plan(n_layers: int, depths: Sequence[int] | None, search_problems: int | None,
               power: int | None = None) -> dict[tuple[str, int], dict[str, int]]:
    """Chapters 04 and 05's truncations, deepest first, each with its decodes' problem limits (`search_limits`):
    the full depth and each of `depths` (None: the depth just below it); `power` limits MH at the full depth
    (`power_subset`) where a truncated depth runs (without one, MH at the full depth is the headline). Pass it to
    `sample_at_depths` as the variants and their limits; both chapters do, so they read the same records."""
    order = sorted({n_layers, *(depths if depths is not None else [n_layers - 1])}, reverse=True)
    return {("stitch", d): search_limits(search_problems, power if d == n_layers and len(order) > 1 else None)
            for d in order}


def depth_seeds(choice: DepthChoice, seeds_at: Mapping[int | str, int] | None, n_seeds: int) -> dict[tuple[str, int], int]:
    """{("stitch", depth): samples per problem} for the depths of `choice` that `seeds_at` names (entries as
    `depths`: a number of blocks, or 'critical-1'), each at most `n_seeds`: a depth off the headline, such as one below
    the critical depth, searched on fewer seeds than the headline's. Pass it to `sample_at_depths` as `seeds`; chapters
    04 and 05 both do, so they read the same records. A ValueError names an entry that is not one of the depths run,
    or a count outside 1..n_seeds."""
    out = {}
    for entry, k in (seeds_at or {}).items():
        relative, value = parse_depth(entry)
        depth = value if not relative else None if choice.critical is None else choice.critical + value
        if depth not in choice.depths:
            raise ValueError(f"seeds_at names the depth {entry!r}, which is not among the stitched depths run on "
                             f"{choice.model} ({', '.join(map(str, choice.depths)) or 'none'}); name one of them")
        check_seed_count(entry, k, n_seeds)
        out[("stitch", depth)] = k
    return out


def check_seed_count(entry: int | str, k: object, n_seeds: int) -> None:
    """The one rule for `seeds_at[entry]`: a number of samples from 1 to `n_seeds` (ValueError otherwise), which the
    runner also applies to a profile before any work starts."""
    if isinstance(k, bool) or not isinstance(k, int) or not 1 <= k <= n_seeds:
        raise ValueError(f"seeds_at[{entry!r}] must be a number of samples from 1 to n_seeds ({n_seeds}), got {k!r}")


def _noise_word(d: PairedDifference) -> str:
    return "yes" if d.clear else "borderline" if d.borderline else "no"


def comparisons_table(tests: Sequence[tuple[str, PairedDifference]], model: str | Sequence[str] | None = None) -> str:
    """The paired tests as a Markdown table: difference in points with its 95% interval (its ends in whole points, as
    the prose gives them), the permutation test; with
    `model` (one name for every test, or one per test), a first column that names the model each ran on."""
    models = [model] * len(tests) if isinstance(model, str) else list(model) if model is not None else None
    if models is not None and len(models) != len(tests):
        raise ValueError(f"{len(models)} model names for {len(tests)} tests: give one name, or one per test")
    first, rule = ("| model ", "|---") if models else ("", "")
    lines = [first + "| comparison | difference [95% interval] | better / worse / problems | paired test p | "
             "larger than its noise? |", rule + "|---|---|---|---|---|"]
    for i, (label, d) in enumerate(tests):
        lines.append((f"| {models[i]} " if models else "") +
                     f"| {label} | {d.points(1, unit='')} | {d.better} / "
                     f"{d.worse} / {d.n} | {d.p_value:.2g} | {_noise_word(d)} |")
    return "\n".join(lines)
