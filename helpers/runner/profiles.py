"""Profiles and the notebooks they run: where the chapter notebooks and the profiles live, a profile read with
its base, each notebook's own parameters, and `-p key=value` overrides.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from helpers.core import env

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


MAX_BASES = 8  # base profiles in a chain: full -> default is the deepest the book has
MAX_PROFILE_BYTES = 100_000
MAX_PROFILE_NODES = 20_000  # values after YAML's aliases are expanded: a profile is small; an alias bomb is not


class _BoundedLoader(yaml.SafeLoader):
    """YAML's safe loader that refuses a document whose aliases would expand past `MAX_PROFILE_NODES` values, before
    building it (a few lines of nested aliases can expand to billions)."""

    def construct_document(self, node):
        counted: dict[int, int] = {}

        def size(n) -> int:
            if id(n) in counted:
                return counted[id(n)]
            counted[id(n)] = 1  # a recursive alias counts once while it is measured
            total = 1
            if isinstance(n, yaml.SequenceNode):
                total += sum(size(c) for c in n.value)
            elif isinstance(n, yaml.MappingNode):
                total += sum(size(k) + size(v) for k, v in n.value)
            counted[id(n)] = total
            if total > MAX_PROFILE_NODES:
                raise RunError(f"A profile expands to more than {MAX_PROFILE_NODES:,} values through YAML aliases; "
                               "write its settings out instead.")
            return total

        size(node)
        return super().construct_document(node)


def load_profile(name: str, _seen: tuple[str, ...] = ()) -> dict:
    """A profile: {'description', 'parameters' (for every notebook), 'notebooks': {stem: {...}}, 'timeout'}.

    A profile may name a `base` profile: it starts from the base's parameters, notebook sections, timeout and
    chapters, and its own values replace the base's key by key (a notebook's section merged, not replaced).
    """
    if name in _seen:
        raise RunError(f"Profile {name!r} is its own base (through {' -> '.join((*_seen, name))}); a base must end "
                       "in a profile without one.")
    if len(_seen) >= MAX_BASES:
        raise RunError(f"Profile {_seen[0]!r} starts from a chain of more than {MAX_BASES} base profiles "
                       f"({' -> '.join(_seen[:3])} -> ...); a profile starts from a few at most (full -> default).")
    path = profile_path(name)
    try:
        text = path.read_text(encoding="utf-8")
        if len(text) > MAX_PROFILE_BYTES:
            raise RunError(f"Profile {name!r} ({path}) holds {len(text):,} characters; a profile is a page of "
                           f"settings (at most {MAX_PROFILE_BYTES:,}).")
        data = yaml.load(text, Loader=_BoundedLoader)
        if contains_itself(data):
            raise RunError(f"Profile {name!r} ({path}) holds a value that contains itself (a YAML alias inside its "
                           "own list or mapping); write its settings out instead.")
    except UnicodeDecodeError as exc:
        raise RunError(f"Profile {name!r} ({path}) is not UTF-8 text ({exc.reason} at byte {exc.start}).") from None
    except yaml.YAMLError as exc:
        raise RunError(f"Profile {name!r} ({path}) is not valid YAML: {str(exc).splitlines()[0]}") from None
    except RecursionError:
        raise RunError(f"Profile {name!r} ({path}) is nested too deeply to be a profile.") from None
    except ValueError:  # an integer past Python's digit limit
        raise RunError(f"Profile {name!r} ({path}) holds a number too long to be a setting.") from None
    if data is None:
        data = {}  # an empty file: said below, with what a profile holds
    if not isinstance(data, dict):
        raise RunError(f"Profile {name!r} must be a mapping with keys such as parameters and notebooks, "
                       f"got a {type(data).__name__}.")
    unknown = set(data) - {"description", "parameters", "notebooks", "timeout", "chapters", "base", "released"}
    if unknown:
        raise RunError(f"Profile {name!r} has unknown top-level keys {sorted(unknown)}; allowed: description, base, "
                       "parameters, notebooks, timeout, chapters, released.")
    if "released" in data and not isinstance(data["released"], bool):
        raise RunError(f"Profile {name!r}: released is true (the results release holds every record of this profile, "
                       f"so a build computes none without --recompute) or false, got {data['released']!r}.")
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
    if data.get("chapters") is not None and (not isinstance(data["chapters"], list) or not all(
            isinstance(c, str) and c.strip() for c in data["chapters"])):
        raise RunError(f"Profile {name!r}: chapters must be a list of chapter names (non-empty text, e.g. "
                       f"02_logit_lens), got {data['chapters']!r}.")
    if not any(data.get(k) for k in ("parameters", "notebooks", "base", "chapters")):
        raise RunError(f"Profile {name!r} ({path}) sets nothing: a profile holds parameters (for every chapter), "
                       "notebooks (per chapter: {stem: {parameter: value}}), the chapters it runs, or a base "
                       "profile to start from, e.g. 'base: default' and 'parameters: {n_problems: 4}'.")
    if "base" in data:
        if not isinstance(data["base"], str) or not data["base"].strip():
            raise RunError(f"Profile {name!r}: base names the profile it starts from (e.g. default), got "
                           f"{data['base']!r}.")
        data = _on_base(load_profile(_base_name(data["base"].strip(), name, path), (*_seen, name)), data)
    return data


def _base_name(base: str, name: str, path: Path) -> str:
    """The profile a `base:` names: a profile of the book by name, or a YAML file, which a relative path finds beside
    the profile that names it (as an include does), not in the working folder; a clear error naming both where
    neither exists."""
    if not (base.endswith((".yaml", ".yml")) or "/" in base):
        return base
    beside = Path(base).expanduser()
    if not beside.is_absolute():
        beside = path.parent / beside
    if not beside.is_file():
        raise RunError(f"Profile {name!r} ({path}) starts from base {base!r}, which is not a file beside it ({beside}); "
                       "name a profile of the book (e.g. default) or a YAML file, relative to the profile's own folder.")
    return str(beside)


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


def times_the_machine(stem: str) -> bool:
    """Whether a chapter times the models in the build itself, as its notebook's metadata declares
    (`{"search_versus_depth": {"times_the_machine": true}}`): the runner then runs it with the machine to itself."""
    path = NOTEBOOKS / f"{stem}.ipynb"
    if not path.is_file():
        return False
    meta = json.loads(path.read_text()).get("metadata", {}).get("search_versus_depth", {})
    return meta.get("times_the_machine") is True


def contains_itself(value, _path: tuple[int, ...] = ()) -> bool:
    """Whether a value read from YAML holds itself (an alias of a list inside that list, `&a [*a]`): such a value
    cannot be checked or compared, and any code that walks it recurses without end."""
    if isinstance(value, list | dict):
        if id(value) in _path:
            return True
        inner = value.values() if isinstance(value, dict) else value
        return any(contains_itself(v, (*_path, id(value))) for v in inner)
    return False


def parse_overrides(pairs: list[str]) -> dict:
    """`key=value` strings to a dict; values are read as YAML (numbers, lists, booleans, strings), and refused, before
    anything converts them, where one holds itself."""
    out = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            raise RunError(f"-p expects key=value, got {pair!r}")
        try:
            out[key.strip()] = read = yaml.safe_load(value)
            if contains_itself(read):
                raise RunError(f"-p {key.strip()}: {value!r} contains itself (a YAML alias inside its own list); "
                               "write the value out, e.g. [1, 2, 3].")
        except ValueError:  # an integer past Python's digit limit (sys.set_int_max_str_digits)
            raise RunError(f"-p {key.strip()}: the number is too long to be a parameter's value.") from None
        except yaml.YAMLError:
            raise RunError(f"-p {key.strip()}: {value!r} is not a value (write numbers, true/false, strings or lists "
                           "such as [1, 2, 3]).") from None
    return out
