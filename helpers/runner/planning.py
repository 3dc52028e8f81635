"""A run's plan: the profile's chapters as jobs, each with its parameters resolved (the notebook's literals, the
profile's shared and per-chapter values, the -p overrides) and checked before anything runs; the settings a chapter
that reads another's decodes takes from it, and chapter 03's sweep settings that chapters 04-05 find critical
depths by.
"""

from __future__ import annotations

from pathlib import Path

from helpers.core import env
from helpers.runner.params import check_job, literal_defaults
from helpers.runner.profiles import (
    NOTEBOOKS,
    Job,
    RunError,
    load_profile,
    notebook_parameters,
    profile_path,
    toc_chapters,
)


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
    if any("critical_sweep" in p for p in known.values()):  # chapter 03's settings, as it runs or as it ran
        sweep = _critical_sweep(spec, {k: v for k, v in overrides.items()
                                       if CRITICAL_SOURCE in known or k not in OTHER_MEANING})
    else:
        sweep = None

    def resolve(stem: str, params: dict, other: bool = True) -> dict:
        section = spec["notebooks"].get(stem, {}) or {}
        bad = sorted(set(section) - set(params))
        if bad:
            raise RunError(f"Profile {profile!r} sets {bad} for {stem}, whose parameters cell defines only "
                           f"{sorted(params)}.")
        values = {k: v for k, v in shared.items() if k in params}
        values.update(section)
        values.update({k: v for k, v in overrides.items() if k in params})
        values["profile"] = profile if "profile" in params else values.get("profile")
        if "critical_sweep" in params and "critical_sweep" not in {**section, **overrides}:
            values["critical_sweep"] = sweep
        if other and values.get("robustness") is not None and "robustness" in params:
            named_here = "robustness" not in overrides  # a profile's relative path is read beside the profile
            values["robustness"] = _check_other_setting(profile, values["robustness"], stem, values, named_here, root)
        return {k: v for k, v in values.items() if k in params}

    for stem, params in known.items():
        values = resolve(stem, params)
        if stem in READS_DECODES_OF:
            values.update(_decode_settings(profile, spec, stem, params, resolve))
        job = Job(stem, values)
        check_job(job, params)
        jobs.append(job)
    return jobs


READS_DECODES_OF = {"05_cost": "04_power_sampling"}  # a chapter that prices another's stored decodes


def _decode_settings(profile: str, spec: dict, stem: str, params: dict, resolve) -> dict:
    """The settings a chapter that reads another's decodes takes from it: every parameter the two notebooks share,
    as the source chapter gets it in this run (whether or not it runs), so that the reader asks for exactly the
    records the source wrote. Setting one of them for the reader alone is refused: it would decode anew."""
    source = READS_DECODES_OF[stem]
    source_params = notebook_parameters(source)
    common = sorted((set(params) & set(source_params)) - {"profile"})
    own = spec["notebooks"].get(stem, {}) or {}
    if clash := [k for k in common if k in own]:
        raise RunError(f"Profile {profile!r} sets {clash} for {stem}, which reads {source}'s decodes and takes these "
                       f"settings from it: set them under {source}.")
    values = resolve(source, source_params, other=False)  # the reader takes the source's decodes, not its robustness
    theirs, mine = literal_defaults(source_params), literal_defaults(params)
    values.update({k: theirs[k] for k in common if k not in values and k in theirs and theirs[k] != mine.get(k)})
    return {k: values[k] for k in common if k in values}


SAME_COMPARISON = ("models", "dataset", "n_problems", "levels", "model_levels", "seed", "shots", "search_problems",
                   "power_subsets")  # what a robustness setting shares with the chapter: the same problems (and
# subsets), the chapter's models among its own, so that its rows pair with the chapter's
SETTING = ("max_new_tokens", "block_size", "mh_blocks", "mcmc_steps", "alpha", "power_mode", "n_seeds", "depths",
           "seeds_at", "longer_cap", "critical_sweep")  # what it may differ in, at least one of them


def other_setting(name: str | None, stem: str, root: Path = env.REPO) -> dict | None:
    """The parameters of chapter `stem` as a run of profile `name` resolves them (the notebook's literal defaults, its
    critical depths' sweep, no robustness setting of its own), with `released`: whether that profile is read from
    the results release, so that a chapter reading it beside its own computes nothing (None for None)."""
    if name is None:
        return None
    spec = load_profile(name)
    if spec.get("chapters") and not any(stem == c or stem.startswith(str(c)) for c in spec["chapters"]):
        raise RunError(f"Profile {name!r} does not run {stem} (its chapters: {', '.join(map(str, spec['chapters']))}), "
                       "so it holds no setting of it to read.")
    job = plan(name, {"robustness": None}, only=stem, root=root)[0]
    return {**literal_defaults(notebook_parameters(stem)), **job.parameters, "released": bool(spec.get("released"))}


def _check_other_setting(profile: str, other, stem: str, values: dict, named_here: bool, root: Path) -> str:
    """A chapter's `robustness`, checked before anything runs: a profile's name (a relative path found beside the
    profile that names it), not this profile, whose setting of the chapter runs the same problems, every model of
    this one's among its models (in any order: the chapter reads only its own), and differs in at least one of
    `SETTING`. The name, as the chapter is to read it."""
    if not isinstance(other, str) or not other.strip():
        raise RunError(f"{stem}: robustness names a profile whose setting of the chapter is read beside this one's "
                       f"(e.g. full), or is null; got {other!r}.")
    other = other.strip()
    if named_here and (other.endswith((".yaml", ".yml")) or "/" in other):
        path = Path(other).expanduser()
        other = str(path if path.is_absolute() else profile_path(profile).parent / path)
    if profile_path(other).resolve() == profile_path(profile).resolve():
        raise RunError(f"Profile {profile!r} names itself as {stem}'s robustness setting; name another profile, whose "
                       "setting the chapter reads beside its own (e.g. robustness: full).")
    try:
        theirs = other_setting(other, stem, root)
    except RunError as err:
        raise RunError(f"{stem}'s robustness setting {other!r} cannot be read: {err}") from None
    mine = {**literal_defaults(notebook_parameters(stem)), **values}
    differ = [k for k in SAME_COMPARISON if k != "models" and theirs.get(k) != mine.get(k)]
    if outside := [m for m in mine.get("models") or [] if m not in (theirs.get("models") or [])]:
        differ.insert(0, f"models ({', '.join(outside)} not among its models)")
    if differ:
        raise RunError(f"Profile {profile!r}: {stem}'s robustness setting {other!r} differs in {', '.join(differ)}; it "
                       "must run the chapter's models on the same problems, at another cap or block size, for its rows to "
                       "pair with the chapter's (-p robustness=null leaves it out).")
    if all(theirs.get(k) == mine.get(k) for k in SETTING):
        raise RunError(f"Profile {profile!r}: {stem}'s robustness setting {other!r} runs this very setting "
                       f"({', '.join(SETTING)} all equal); name a profile at another cap or block size.")
    return other


CRITICAL_SOURCE = "03_stitch_and_preserve"  # the chapter that stores each model's critical depth


OTHER_MEANING = ("depths",)  # chapter 03's names that chapters 04-05 give another meaning (blocks searched, not
# swept): a -p value of one goes to chapter 03's sweep only where chapter 03 runs


def _critical_sweep(spec: dict, overrides: dict) -> dict:
    """Chapter 03's settings in this run (its literal defaults, the profile's values, the -p overrides it defines),
    as `helpers.evaluation.critical.SweepSettings` names them: chapters 04-05 find its stored critical depths by
    them, whether or not chapter 03 runs in this run (the caller leaves out `OTHER_MEANING` where it does not)."""
    from helpers.evaluation.critical import SweepSettings

    params = notebook_parameters(CRITICAL_SOURCE)
    values = {**literal_defaults(params), **{k: v for k, v in spec["parameters"].items() if k in params},
              **(spec["notebooks"].get(CRITICAL_SOURCE) or {}), **{k: v for k, v in overrides.items() if k in params}}
    try:
        return SweepSettings.from_parameters(values).parameters()
    except ValueError as err:
        raise RunError(f"{CRITICAL_SOURCE}: {err}") from None


def job_models(jobs: list[Job]) -> list[str]:
    """Every model a run loads (the `models` parameter of each chapter), in order of first use."""
    return list(dict.fromkeys(name for job in jobs for name in job.parameters.get("models") or []))
