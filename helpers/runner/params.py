"""The checks of a chapter's parameters, made before any chapter starts: counts, lists, choices, models, engines,
data sets, depths, and the samplers' settings through the samplers' own constructors.
"""

from __future__ import annotations

import ast
import math
from dataclasses import dataclass
from pathlib import Path

from helpers.runner.profiles import Job, RunError

MAX_COUNT = 100_000  # no count of problems, tokens or samples in this book comes near it


@dataclass(frozen=True)
class Domain:
    """What a notebook parameter means and the values it may take: its kind (int, float, str, bool, list), whether
    null is allowed (and what it means), a range for numbers (`low`/`high` inclusive, `above` exclusive) and the
    choices for text. The runner checks every parameter against its domain before any chapter starts."""

    meaning: str
    kind: str
    low: float | None = None
    high: float | None = None
    above: float | None = None
    choices: tuple[str, ...] | str | None = None  # a tuple, or "module:NAME" read from the module that defines them
    null: str | None = None  # what null means, where it is allowed

    def describe(self) -> str:
        if self.choices:
            return f"one of {', '.join(_choice_names(self.choices))}"
        low, high, above = (_number(v) for v in (self.low, self.high, self.above))
        if self.low is not None and self.high == MAX_COUNT:
            span = f"of at least {low} (at most {high})"
        elif self.low is not None and self.high is not None:
            span = f"from {low} to {high}"
        elif self.above is not None and self.high is not None:
            span = f"above {above} and at most {high}"
        elif self.above is not None:
            span = f"above {above}"
        elif self.low is not None:
            span = f"at least {low}"
        else:
            span = ""
        what = {"int": "an integer", "float": "a number", "str": "text", "bool": "true or false",
                "list": "a list", "dict": "a mapping"}[self.kind]
        return " ".join(p for p in (what, span) if p) + (f" (or null: {self.null})" if self.null else "")


def _number(value: float | None) -> str:
    """A bound as a reader writes it: whole numbers with thousands separators, others as they are."""
    if value is None:
        return ""
    return f"{int(value):,}" if float(value).is_integer() else f"{value:g}"


def _choice_names(choices) -> tuple[str, ...]:
    if isinstance(choices, tuple):
        return choices
    module, name = choices.split(":")
    import importlib

    return tuple(getattr(importlib.import_module(module), name))


COUNT_MAX = dict(low=1, high=MAX_COUNT)
FRACTION = dict(above=0.0, high=1.0)
# Every notebook parameter's domain, declared once (tests/runner/test_run.py fails on a parameter without one). List
# parameters' entries, models, data sets and depths are checked further below, by the code that knows them; the
# samplers' settings keep their ranges in the samplers' own constructors, which `_check_samplers` calls.
DOMAINS: dict[str, Domain] = {
    "profile": Domain("the profile that built the page (the runner sets it)", "str"),
    "models": Domain("the models a chapter runs (known names, saved folders or hub ids)", "list"),
    "dataset": Domain("the problem set: arithmetic, a hub set or a JSON/JSONL file", "str"),
    "levels": Domain("the difficulty levels problems are drawn from", "list"),
    "n_problems": Domain("problems per level", "int", **COUNT_MAX),
    "seed": Domain("the seed problems and samples are drawn with", "int", low=0, high=2**31 - 1),
    "shots": Domain("worked examples before each question", "int", low=0, high=16),
    "dtype": Domain("the models' number format", "str", choices=("auto", "float32", "bfloat16")),
    "batch_size": Domain("rows decoding at once", "int", **COUNT_MAX),
    "max_new_tokens": Domain("the longest completion, in tokens", "int", **COUNT_MAX),
    "kl_fraction": Domain("effective depth: the first layer whose lens KL is below this share of its maximum",
                          "float", **FRACTION),
    "overlap_threshold": Domain("effective depth: the first layer whose top-5 overlap with the output exceeds "
                                "this", "float", low=0.0, high=1.0),
    "reduction": Domain("how per-token curves are averaged", "str", choices="helpers.interp.residual:REDUCTIONS"),
    "n_skip_problems": Domain("problems of the layer-skip study", "int", **COUNT_MAX),
    "n_splits": Domain("random splits of the skip study", "int", **COUNT_MAX),
    "skip_parts": Domain("the parts a skip removes", "list"),
    "n_depth_problems": Domain("problems per level of the depth-score study", "int", **COUNT_MAX),
    "depth_splits": Domain("random splits of the depth-score study", "int", **COUNT_MAX),
    "ig_steps": Domain("integrated-gradients steps", "int", **COUNT_MAX),
    "ig_components": Domain("the components integrated gradients attributes to", "list"),
    "probe_stride": Domain("erasure and integrated gradients at every n-th layer", "int", **COUNT_MAX),
    "map_models": Domain("models whose shallow-to-deep linear maps are fitted", "list"),
    "map_tokens": Domain("tokens per model for the linear maps", "int", **COUNT_MAX),
    "explorer_positions": Domain("positions the lens explorer shows", "int", **COUNT_MAX),
    "methods": Domain("the truncations compared", "list"),
    "span": Domain("depths below the full one that the sweep tries", "int", **COUNT_MAX,
                   null="from the earliest cut point"),
    "depth_step": Domain("the stride of the cut-point sweep", "int", **COUNT_MAX),
    "floor_fraction": Domain("sweep down from the full depth until greedy accuracy falls below this share of the full "
                             "model's", "float", above=0.0, high=0.99, null="off (span or the cut points decide)"),
    "naive_depths": Domain("the depths naive truncation runs at", "list", null="every depth of the sweep"),
    "lens_per_level": Domain("problems per level the cut points' lens reads", "int", **COUNT_MAX,
                             null="every problem"),
    "length_cap": Domain("the length study's longest answer, in new tokens", "int", **COUNT_MAX,
                         null="no length study"),
    "longer_cap": Domain("a longer token cap under which greedy decoding at full depth and at each cut runs again",
                         "int", **COUNT_MAX, null="not run"),
    "n_agreement": Domain("problems the agreement with the full model is measured on", "int", **COUNT_MAX),
    "n_examples": Domain("example completions shown", "int", **COUNT_MAX),
    "collapse_fraction": Domain("critical depth: from here on accuracy stays above this share of the full "
                                "model's", "float", **FRACTION),
    "depths": Domain("stitched depths tried", "list", null="the depth just below the full model"),
    "critical_sweep": Domain("chapter 03's settings that stored each model's critical depth (the runner sets them "
                             "from the profile)", "dict"),
    "alpha": Domain("the power of the target p^alpha (its range: helpers.samplers.target.Target)", "float"),
    "block_size": Domain("tokens per MH block (its range: PowerConfig)", "int", **COUNT_MAX),
    "mcmc_steps": Domain("MH steps per block (its range: PowerConfig)", "int"),
    "power_mode": Domain("the MH algorithm (its choices: PowerConfig)", "str"),
    "mh_blocks": Domain("blocks an MH chain may run in reference mode, the published loop's block_num (0: "
                        "max_new_tokens / block_size; its range: PowerConfig)", "int"),
    "n_seeds": Domain("samples per problem", "int", **COUNT_MAX),
    "smc_particles": Domain("SMC's particles per answer (its range: SMCConfig)", "int", **COUNT_MAX),
    "smc_block_size": Domain("tokens between SMC's resampling checks (its range: SMCConfig)", "int", **COUNT_MAX),
    "smc_ess_threshold": Domain("SMC resamples when the effective sample size falls below this share (its "
                                "range: SMCConfig)", "float"),
    "smc_bridge_tokens": Domain("tokens over which SMC's exponent rises from 1 to alpha, 0: off (its range: "
                                "SMCConfig)", "int"),
    "search_problems": Domain("SMC and the N sweep, the searches off the answer, run on the first this many "
                              "problems", "int", **COUNT_MAX, null="every problem"),
    "model_levels": Domain("the levels a named model's problems are drawn from instead of `levels`, as "
                           "{model: [levels]}", "dict", null="every model on `levels`"),
    "power_subsets": Domain("MH at the full depth of each named model runs on its first this many problems, as "
                            "{model: count}", "dict", null="every model on every problem"),
    "seeds_at": Domain("a stitched depth searched on fewer samples per problem than n_seeds, as {depth: count}",
                       "dict", null="every depth on n_seeds"),
    "engine": Domain("the decoding engine", "str", choices="helpers.samplers.settings:ENGINES"),
    "robustness": Domain("a profile whose setting of the chapter (same models and problems, another cap or block "
                         "size) the chapter reads beside its own", "str", null="no other setting"),
    "sweep_steps": Domain("the MH steps per block the N figure tries", "list"),
    "toy_samples": Domain("chains per point of the toy curves", "int", **COUNT_MAX),
    "toy_steps": Domain("MH steps per block on the toy model", "list"),
    "toy_particles": Domain("SMC particle counts on the toy model", "list"),
    "cost_models": Domain("models whose FLOPs chapter 05 counts", "list"),
    "matched": Domain("decode the T = 1 samples that give best-of-k and majority vote power's budget", "bool"),
    "n_lens": Domain("problems the logit lens reads in both formats", "int", **COUNT_MAX),
    "sweep_problems": Domain("problems per level of the appendix's stitched sweep", "int", **COUNT_MAX),
    "sweep_levels": Domain("levels of the appendix's stitched sweep", "list"),
    "native_problems": Domain("where bfloat16 is native, at most this many problems per set", "int",
                              **COUNT_MAX, null="every problem"),
    "emulated_problems": Domain("where bfloat16 is emulated, at most this many problems per set", "int",
                                **COUNT_MAX, null="every problem"),
}


def check_domain(where: str, name: str, value) -> None:
    """`value` against `name`'s declared domain (kind, null, range, choices); an error that names the domain."""
    domain = DOMAINS.get(name)
    if domain is None:
        raise RunError(f"{where}: the runner knows no domain for this parameter (declare it in "
                       "helpers.runner.params.DOMAINS)")
    if value is None:
        if domain.null or domain.kind == "list":
            return
        raise RunError(f"{where}: must be {domain.describe()} ({domain.meaning}).")
    kind = _kind(value)
    if kind != domain.kind and not (domain.kind == "float" and kind == "int"):
        raise RunError(f"{where} is {_a(kind)}; it must be {domain.describe()} ({domain.meaning}).")
    outside = kind in ("int", "float") and (
        not math.isfinite(value) or (domain.low is not None and value < domain.low)
        or (domain.high is not None and value > domain.high) or (domain.above is not None and value <= domain.above))
    if outside:
        raise RunError(f"{where}: must be {domain.describe()} ({domain.meaning}).")
    if kind == "str" and domain.choices and value not in _choice_names(domain.choices):
        raise RunError(f"{where}: must be {domain.describe()} ({domain.meaning}).")


_KINDS = ((bool, "bool"), (int, "int"), (float, "float"), (str, "str"), (list, "list"), (dict, "dict"))  # bool first


def _kind(value) -> str:
    """A parameter value's kind, as domains and messages name it."""
    return next((name for kind, name in _KINDS if isinstance(value, kind)), type(value).__name__)


def _a(kind: str) -> str:
    return {"int": "an integer", "float": "a number", "bool": "true or false", "str": "a string",
            "list": "a list", "dict": "a mapping"}.get(kind, f"a {kind}")


def check_value(stem: str, name: str, value, default) -> None:
    """Check one parameter against its declared domain, its notebook's literal default (the schema) and the rules of
    the code that uses it."""
    allowed = {"int": ("int",), "float": ("float", "int"), "bool": ("bool",), "str": ("str",), "list": ("list",),
               "dict": ("dict",)}
    want = _kind(default)
    where = f"{stem}: parameter {name!r} = {value!r}"
    if value is None:
        domain = DOMAINS.get(name)
        if default is None or want == "list" or (domain is not None and domain.null):  # "all", "the notebook decides"
            return
        raise RunError(f"{where}: {_a(want)} is needed, like the notebook's default {default!r}.")
    if default is not None and _kind(value) not in allowed.get(want, (want,)):
        raise RunError(f"{where} is {_a(_kind(value))}; it must be {_a(want)} like the notebook's default {default!r}.")
    int_list = isinstance(default, list) and default and all(_kind(v) == "int" for v in default)
    if int_list and isinstance(value, list) and not all(_kind(v) == "int" for v in value):
        raise RunError(f"{where}: every entry must be an integer, like the default {default!r}.")
    if isinstance(value, float) and not math.isfinite(value):
        raise RunError(f"{where}: must be a finite number.")
    if name == "engine" and isinstance(value, str):
        _check_engine(where, value)
    if name in ("models", "map_models", "cost_models") and isinstance(value, list):
        _check_models(where, value, allow_empty=name != "models")  # an empty map_models or cost_models: none
    if name == "dataset" and isinstance(value, str):
        _check_dataset(where, value)
    if name in LIST_RANGES or name in LIST_CHOICES:
        _check_list(where, name, value)
    if name in ("depths", "naive_depths"):
        _check_depth_entries(where, value)
    if name == "critical_sweep" and isinstance(value, dict):
        from helpers.evaluation.critical import SweepSettings

        try:
            SweepSettings.from_parameters(value)
        except ValueError as err:
            raise RunError(f"{where}: {err}") from None
    if name == "power_subsets" and isinstance(value, dict):
        _check_power_subsets(where, value)
    if name == "model_levels" and isinstance(value, dict):
        _check_model_levels(where, value)
    if name == "dtype":
        from helpers.models.precision import check

        try:
            check(value)
        except ValueError as err:
            raise RunError(f"{where}: {err}") from None
    check_domain(where, name, value)  # last: the rules above say more where they apply


LIST_RANGES = {  # list parameters of integers: (lowest, highest) entry, and what an entry is
    "levels": (1, 100, "a difficulty level"), "sweep_levels": (1, 100, "a difficulty level"),
    "sweep_steps": (0, 1000, "a number of MH steps per block"), "toy_steps": (0, 1000, "a number of MH steps per block"),
    "toy_particles": (1, 1024, "a particle count"),
}


LIST_CHOICES = {"methods": "truncations", "skip_parts": "parts", "ig_components": "components"}  # lists of names


def _choices(name: str) -> tuple[str, ...]:
    """The names a list parameter may hold, from the module that defines them."""
    if name == "methods":
        from helpers.models.truncation import METHODS
        return METHODS
    if name == "skip_parts":
        from helpers.interp.interventions import PARTS
        return PARTS
    from helpers.interp.attribution import COMPONENTS
    return COMPONENTS


def _check_depth_entries(where: str, value) -> None:
    """`depths`: null, or a non-empty list of numbers of blocks and names relative to chapter 03's critical depth."""
    from helpers.evaluation.critical import parse_depth

    if value is None:
        return
    if not isinstance(value, list) or not value:
        raise RunError(f"{where}: give a non-empty list of depths, e.g. [23] or [critical, critical-1], or null (the "
                       "depth just below the full model).")
    for entry in value:
        try:
            relative, number = parse_depth(entry)
        except ValueError as err:
            raise RunError(f"{where}: {err}.") from None
        if not relative and not 1 <= number <= MAX_COUNT:
            raise RunError(f"{where}: a depth is a number of blocks to keep, an integer from 1 to {MAX_COUNT:,}, "
                           f"not {number}.")


def _check_list(where: str, name: str, value) -> None:
    """A list parameter, entry by entry: a non-empty list of integers in range, or of known names."""
    if name in LIST_RANGES:
        lo, hi, what = LIST_RANGES[name]
        if not isinstance(value, list) or not value or any(_kind(v) != "int" or not lo <= v <= hi for v in value):
            raise RunError(f"{where}: give a non-empty list, each entry {what}, an integer from {lo:,} to {hi:,}, "
                           f"e.g. [{lo}, {lo + 1}].")
        return
    choices = _choices(name)
    if not isinstance(value, list) or not value or any(not isinstance(v, str) or v not in choices for v in value):
        raise RunError(f"{where}: give a non-empty list of {LIST_CHOICES[name]} from {', '.join(choices)}.")


def _check_models(where: str, names: list, allow_empty: bool = False) -> None:
    """Each entry a model the loader can find: a known name, a folder holding a saved model, or a hub id."""
    from helpers.models.loading import resolve_source
    from helpers.models.registry import ModelLoadError

    if not names and not allow_empty:
        raise RunError(f"{where}: name at least one model.")
    for name in names:
        if not isinstance(name, str):
            raise RunError(f"{where}: {name!r} is not a model name.")
        try:
            resolve_source(name)
        except ModelLoadError as err:
            raise RunError(f"{where}: {err}") from None


def _check_power_subsets(where: str, value: dict) -> None:
    """`power_subsets`: each key a model the loader can find, each value a number of problems (`power_subset`)."""
    from helpers.evaluation.comparison import power_subset

    _check_models(where, list(value), allow_empty=True)
    for model in value:
        try:
            power_subset(value, model)
        except ValueError as err:
            raise RunError(f"{where}: {err}.") from None


def _check_model_levels(where: str, value: dict) -> None:
    """`model_levels`: its shape by the library's own rule (`check_model_levels`), each key a model the loader can
    find."""
    from helpers.data.model_sets import check_model_levels
    from helpers.data.problems import DataError

    try:
        check_model_levels(value)
    except DataError as err:
        raise RunError(f"{where}: {err}") from None
    _check_models(where, list(value), allow_empty=True)


def _check_engine(where: str, name: str) -> None:
    from helpers.samplers.settings import check_engine

    try:
        check_engine(name)
    except ValueError as err:
        raise RunError(f"{where}: {err}") from None


def check_engines(jobs: list[Job]) -> None:
    """Before any chapter runs: vLLM is installed where a chapter asks for it (helpers.engines.vllm says how)."""
    wanting = [job.stem for job in jobs if job.parameters.get("engine") == "vllm"]
    if not wanting:
        return
    from helpers.engines.vllm import VLLMUnavailable, require_vllm

    try:
        require_vllm()
    except VLLMUnavailable as err:
        raise RunError(f"{', '.join(wanting)}: parameter 'engine' = 'vllm': {err}") from None


def _check_dataset(where: str, name: str) -> None:
    from helpers.data.sources import HUB_SETS

    if name != "arithmetic" and name not in HUB_SETS and not Path(name).expanduser().is_file():
        raise RunError(f"{where}: unknown problem set; use 'arithmetic', {', '.join(repr(h) for h in HUB_SETS)} or "
                       "the path of a JSON/JSONL file that exists.")


def _check_context(job: Job, literal: dict) -> None:
    """max_new_tokens against the context length of each embedded model the job runs (prompts need room too)."""
    from helpers.models.registry import KNOWN_MODELS

    tokens = job.parameters.get("max_new_tokens", literal.get("max_new_tokens"))
    models = job.parameters.get("models", literal.get("models")) or []
    for name in models if isinstance(tokens, int) else []:
        context = getattr(KNOWN_MODELS.get(name), "context", None)
        if context and tokens > context // 2:
            raise RunError(f"{job.stem}: max_new_tokens = {tokens:,} does not fit {name}, whose context holds "
                           f"{context:,} tokens, prompt included; use at most {context // 2:,}.")


def literal_defaults(defaults: dict) -> dict:
    """A notebook's parameter defaults as values (papermill gives each as its source text); those that are not
    literals are left out."""
    literal = {}
    for name, text in defaults.items():
        try:
            literal[name] = ast.literal_eval(text) if isinstance(text, str) else text
        except (ValueError, SyntaxError):
            continue  # not a literal: nothing to check against
    return literal


def check_job(job: Job, defaults: dict) -> None:
    """Every parameter of a job against the notebook's schema, and the levels against the arithmetic benchmark."""
    literal = literal_defaults(defaults)
    for name, value in job.parameters.items():
        if name in literal:
            check_value(job.stem, name, value, literal[name])
    levels, dataset = job.parameters.get("levels"), job.parameters.get("dataset", literal.get("dataset"))
    from helpers.data.arithmetic import LEVELS
    from helpers.data.model_sets import check_model_levels
    from helpers.data.problems import DataError

    own = job.parameters.get("model_levels") or {}
    models = job.parameters.get("models", literal.get("models")) or []
    try:
        check_model_levels(own, models)
    except DataError as err:
        raise RunError(f"{job.stem}: {err}") from None
    if dataset == "arithmetic":
        for label, chosen in (("levels", levels), *((f"model_levels[{m!r}]", v) for m, v in own.items())):
            outside = sorted(v for v in chosen if v not in LEVELS) if isinstance(chosen, list) else []
            if outside:
                raise RunError(f"{job.stem}: {label} {outside} are not arithmetic levels; the benchmark has levels "
                               f"{sorted(LEVELS)}.")
    _check_depths(job, literal)
    _check_seeds_at(job, literal)
    _check_sweep_shares(job, literal)
    _check_longer_cap(job, literal)
    _check_context(job, literal)
    _check_samplers(job, literal)


def _check_samplers(job: Job, literal: dict) -> None:
    """The job's α, power-sampling and SMC settings, made into the samplers' own configs by the map the notebooks
    use (`Searches.from_parameters`): their rules, not a copy."""
    from helpers.core.checks import SettingError
    from helpers.samplers.settings import SEARCH_PARAMETERS, Searches

    values = {**literal, **job.parameters}
    if not all(name in values for name in SEARCH_PARAMETERS):
        return  # this chapter does not search
    try:
        Searches.from_parameters(values, values.get("max_new_tokens"))
    except SettingError as err:
        where = f"parameter {err.field!r} = {values[err.field]!r}" if err.field in values else "its sampler settings"
        raise RunError(f"{job.stem}: {where}: {err}") from None
    except ValueError as err:
        raise RunError(f"{job.stem}: its sampler settings: {err}") from None


def _check_seeds_at(job: Job, literal: dict) -> None:
    """`seeds_at`: each key one of the job's `depths` as written there (so that it names a depth that runs), each
    value a number of samples from 1 to `n_seeds` (the chapters' own rule, `check_seed_count`)."""
    from helpers.evaluation.comparison import check_seed_count

    value = {name: job.parameters.get(name, literal.get(name)) for name in ("seeds_at", "depths", "n_seeds")}
    seeds_at, depths, n_seeds = value["seeds_at"], value["depths"], value["n_seeds"]
    if not isinstance(seeds_at, dict):
        return
    named = [str(d).replace(" ", "") for d in depths] if isinstance(depths, list) else []
    for entry, count in seeds_at.items():
        if str(entry).replace(" ", "") not in named:
            raise RunError(f"{job.stem}: seeds_at names the depth {entry!r}, which is not among its depths "
                           f"{depths!r}; name one of them as written there.")
        try:
            check_seed_count(entry, count, n_seeds if _kind(n_seeds) == "int" else MAX_COUNT)
        except ValueError as err:
            raise RunError(f"{job.stem}: {err}.") from None


def _check_sweep_shares(job: Job, literal: dict) -> None:
    """Chapter 03's settings that only make sense together: a floor sweep must reach the collapse line it reads the
    critical depth by, and the length study must decode at least as far as the sweep's own cap, which it reports."""
    value = {name: job.parameters.get(name, literal.get(name)) for name in
             ("floor_fraction", "collapse_fraction", "length_cap", "max_new_tokens")}
    floor, collapse = value["floor_fraction"], value["collapse_fraction"]
    if isinstance(floor, float) and isinstance(collapse, float) and floor > collapse:
        raise RunError(f"{job.stem}: floor_fraction {floor} is above collapse_fraction {collapse}: the sweep would stop "
                       "before accuracy falls to the line that defines the critical depth; give a floor at or below it.")
    cap, length = value["max_new_tokens"], value["length_cap"]
    if isinstance(length, int) and isinstance(cap, int) and length < cap:
        raise RunError(f"{job.stem}: length_cap {length} is below max_new_tokens {cap}: the length study says what "
                       "the chapter's own cap does to the answers, so it must decode at least that far.")


def _check_longer_cap(job: Job, literal: dict) -> None:
    """Chapter 04's longer cap reads the cut's cost again beyond the chapter's own cap: it must lie beyond it."""
    longer, cap = (job.parameters.get(name, literal.get(name)) for name in ("longer_cap", "max_new_tokens"))
    if isinstance(longer, int) and isinstance(cap, int) and longer <= cap:
        raise RunError(f"{job.stem}: longer_cap {longer} is not above max_new_tokens {cap}: it decodes greedy answers "
                       "again under a longer cap than the chapter's; give a larger one, or null to skip it.")


def _check_depths(job: Job, literal: dict) -> None:
    """Explicit depths against the block count of each embedded model the job runs (others are checked on load)."""
    from helpers.models.registry import KNOWN_MODELS
    from helpers.models.truncation import kept_blocks

    depths = job.parameters.get("depths", literal.get("depths"))
    models = job.parameters.get("models", literal.get("models"))
    if not isinstance(depths, list) or not isinstance(models, list):
        return
    from helpers.evaluation.critical import parse_depth

    fixed = [d for d in depths if not parse_depth(d)[0]]  # relative ones are resolved, and checked, per model
    if len(fixed) < len(depths) and "critical_sweep" not in literal:
        raise RunError(f"{job.stem}: depths {depths}: this chapter's depths are numbers of blocks; depths relative to "
                       "the critical depth ('critical', 'critical-1') are for the chapters that read it (04, 05).")
    methods = job.parameters.get("methods", literal.get("methods")) or ["stitch"]
    for name in models:
        blocks = getattr(KNOWN_MODELS.get(name), "blocks", None)
        for method in methods if blocks else []:
            outside = []
            for d in fixed:
                try:
                    kept_blocks(blocks, d, method)  # the truncation's own rule for valid depths
                except ValueError as err:
                    outside.append((d, str(err)))
            if outside:
                raise RunError(f"{job.stem}: depths {[d for d, _ in outside]} do not fit {name}, which has "
                               f"{blocks} blocks: {outside[0][1]}")
