"""Problem sets and prompts: the embedded arithmetic benchmark, MATH500 and GSM8K, the reference prompt.

The arithmetic benchmark is generated, so it needs no download: each level adds steps and larger numbers,
every answer is an exact integer, and problem `i` of level `l` depends only on (seed, l, i).
"""

from __future__ import annotations

import json
import math
import random
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

from helpers.core.checks import is_count
from helpers.core.numbers import listed

PROMPT_PREFIX = "Can you solve the following math problem? "
PROMPT_SUFFIX = " Please reason step by step, and put your final answer within \\boxed{}."


class DataError(ValueError):
    """A problem set could not be built or loaded; the message says what to do."""


@dataclass(frozen=True)
class Problem:
    """One problem: `answer` is the gold final answer as a string (an integer for the arithmetic set)."""

    id: str
    question: str
    answer: str
    level: int | None = None
    source: str = "arithmetic"
    solution: str | None = None

    def as_dict(self) -> dict:
        return asdict(self)


# --------------------------------------------------------------------------------------------------
# The generated arithmetic benchmark
# --------------------------------------------------------------------------------------------------

NAMES = ("Ada", "Bruno", "Chen", "Dara", "Emil", "Farah", "Goran", "Hana", "Ivo", "Jun", "Kemal", "Lina",
         "Mateo", "Nia", "Omar", "Priya", "Quinn", "Rosa", "Sami", "Tove")
ITEMS = ("marbles", "stickers", "apples", "coins", "stamps", "shells", "pencils", "cards", "beads", "books")
CONTAINERS = ("boxes", "bags", "jars", "baskets", "envelopes")


@dataclass(frozen=True)
class Level:
    """How hard a level is: operations after the start, largest start and step amounts, allowed operations."""

    n_ops: int
    start_max: int
    step_max: int
    ops: tuple[str, ...]


# Calibrated on qwen2.5-coder-0.5b (greedy, two worked examples; chapter 02's level table gives the numbers):
# levels 1-3 are one step and solved almost always, 4-6 take three or four steps (the 40-75% band that
# chapters 03-04 use is 5-6), and 7 has larger numbers, which the model mostly fails. Levels 1-3 are the
# smoke profile's and keep the wording and numbers they always had.
LEVELS: dict[int, Level] = {
    1: Level(1, 9, 9, ("add",)),
    2: Level(1, 30, 30, ("add",)),
    3: Level(1, 20, 20, ("add", "sub")),
    4: Level(3, 50, 30, ("add", "sub", "mul")),
    5: Level(3, 50, 30, ("add", "sub", "mul", "div")),
    6: Level(4, 30, 20, ("add", "sub", "mul", "div")),
    7: Level(4, 100, 60, ("add", "sub", "mul", "div")),
}

# The worked examples of few-shot prompts: a two-step and a one-step problem, from their own namespace.
SHOT_LEVELS: tuple[Level, ...] = (Level(2, 30, 20, ("add", "sub")), Level(1, 9, 9, ("add",)))


def _step(rng: random.Random, op: str, value: int, name: str, item: str, level: Level
          ) -> tuple[int, str, str] | None:
    """Apply one operation to `value`: (new value, sentence of the question, line of the solution) or None."""
    if op == "add":
        n = rng.randint(2, level.step_max)
        sentence = rng.choice((f"Then {name} receives {n} more {item}.", f"A neighbour gives {name} another {n} {item}.",
                               f"{name} finds {n} more {item}."))
        return value + n, sentence, f"Adding {n}: {value} + {n} = {value + n}."
    if op == "sub":
        if value < 3:
            return None
        n = rng.randint(1, min(value - 1, level.step_max))
        sentence = rng.choice((f"{name} gives away {n} {item}.", f"Then {name} loses {n} of the {item}.",
                               f"{name} trades {n} {item} for a snack."))
        return value - n, sentence, f"Taking away {n}: {value} - {n} = {value - n}."
    if op == "mul":
        k = rng.randint(2, 3)
        word = {2: "doubles", 3: "triples"}[k]
        sentence = rng.choice((f"Then {name} {word} the number of {item}.",
                               f"After a lucky week, {name} has {k} times as many {item} as before."))
        return value * k, sentence, f"Multiplying by {k}: {value} * {k} = {value * k}."
    if op == "div":
        divisors = [k for k in (2, 3, 4, 5) if value % k == 0]
        if not divisors or value < 4:
            return None
        k, box = rng.choice(divisors), rng.choice(CONTAINERS)
        sentence = (f"{name} splits the {item} equally into {k} {box}, keeps one of the {box} and gives the "
                    "others away.")
        return value // k, sentence, f"Keeping one of {k} equal parts: {value} / {k} = {value // k}."
    raise ValueError(op)


def _compose(spec: Level, rng: random.Random) -> tuple[str, str, int]:
    """A question, its worked solution and its answer, following `spec`."""
    name, item = rng.choice(NAMES), rng.choice(ITEMS)
    value = rng.randint(2, spec.start_max)
    sentences, lines = [f"{name} has {value} {item}."], [f"{name} starts with {value} {item}."]
    while len(sentences) <= spec.n_ops:
        result = _step(rng, rng.choice(spec.ops), value, name, item, spec)
        if result is not None:
            value, sentence, line = result
            sentences.append(sentence)
            lines.append(line)
    sentences.append(f"How many {item} does {name} have now?")
    lines.append(f"The final answer is \\boxed{{{value}}}.")
    return " ".join(sentences), "\n".join(lines), value


def arithmetic_problem(level: int, index: int, seed: int = 0) -> Problem:
    """Problem `index` of `level`: a start amount, then the level's operations; answer = the final amount.

    The problem carries a worked solution in the same wording, used as gold text for comparisons.
    """
    if level not in LEVELS:
        raise DataError(f"Arithmetic levels are {sorted(LEVELS)}; got {level!r}.")
    question, solution, value = _compose(LEVELS[level], random.Random(f"arith:{seed}:{level}:{index}"))
    return Problem(id=f"arith-L{level}-{seed}-{index}", question=question, answer=str(value), level=level,
                   source="arithmetic", solution=solution)


def arithmetic_problems(n_per_level: int, levels: Iterable[int] = tuple(LEVELS), seed: int = 0) -> list[Problem]:
    """`n_per_level` problems of each level, in level order; deterministic in (seed, level, index)."""
    if n_per_level < 1:
        raise DataError(f"n_per_level must be at least 1, got {n_per_level}.")
    return [arithmetic_problem(level, i, seed) for level in levels for i in range(n_per_level)]


def worked_examples(n: int) -> list[Problem]:
    """`n` solved problems for few-shot prompts, from a namespace the benchmark never uses."""
    shots = []
    for i in range(n):
        question, solution, value = _compose(SHOT_LEVELS[i % len(SHOT_LEVELS)], random.Random(f"shot:{i}"))
        shots.append(Problem(id=f"shot-{i}", question=question, answer=str(value), source="worked-example",
                             solution=solution))
    return shots


# --------------------------------------------------------------------------------------------------
# MATH500, GSM8K and local files
# --------------------------------------------------------------------------------------------------

HUB_SETS: dict[str, dict] = {
    "math500": {"repo": "HuggingFaceH4/MATH-500", "config": None, "split": "test",
                "fields": {"question": "problem", "answer": "answer", "level": "level", "id": "unique_id",
                           "solution": "solution"}},
    "gsm8k": {"repo": "openai/gsm8k", "config": "main", "split": "test",
              "fields": {"question": "question", "answer": "answer"}},
}


def _gsm8k_final(answer: str) -> tuple[str, str]:
    """GSM8K answers end with '#### 42'; return (final answer, worked solution)."""
    solution, _, final = answer.rpartition("####")
    return final.strip().replace(",", ""), solution.strip()


def _level(value) -> int | None:
    """A record's level as an integer: 3, 3.0, '3' and 'Level 3' all read as 3; anything else as None."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        return int(value) if float(value).is_integer() else None
    if isinstance(value, str):
        match = re.fullmatch(r"\s*(?:level\s*)?(\d+)\s*", value, flags=re.IGNORECASE)
        return int(match.group(1)) if match else None
    return None


def _records_to_problems(records: Iterable[dict], fields: dict[str, str], source: str) -> list[Problem]:
    problems = []
    for i, rec in enumerate(records):
        if not isinstance(rec, dict):
            raise DataError(f"Record {i} of {source} is a {type(rec).__name__} ({str(rec)[:40]!r}), not a mapping: "
                            "each problem must be an object with a question and an answer field.")
        try:
            question, answer = rec[fields["question"]], rec[fields["answer"]]
        except KeyError as exc:
            raise DataError(f"Record {i} of {source} has no field {exc.args[0]!r}; its fields are "
                            f"{sorted(rec)}. Pass fields={{'question': ..., 'answer': ...}}.") from None
        solution = rec.get(fields["solution"]) if "solution" in fields else None
        for name, value in (("question", question), ("answer", answer)):
            if not _scalar(value):
                raise DataError(f"Record {i + 1} of {source}: its {name} ({fields[name]!r}) is {str(value)[:40]!r}; "
                                "it must be text or a finite number.")
        if not str(question).strip():
            raise DataError(f"Record {i + 1} of {source} has an empty question.")
        answer = str(answer)
        if source == "gsm8k" and "####" in answer:
            answer, solution = _gsm8k_final(answer)
        problems.append(Problem(id=str(rec.get(fields.get("id", "id"), f"{source}-{i}")), question=str(question),
                                answer=answer, level=_level(rec.get(fields.get("level", "level"))),
                                source=source, solution=solution))
    if not problems:
        raise DataError(f"{source} holds no problems: give a JSON list or JSON lines of records with a question "
                        "and an answer.")
    seen: dict[str, int] = {}
    for i, p in enumerate(problems):
        if p.id in seen:
            raise DataError(f"Records {seen[p.id] + 1} and {i + 1} of {source} share the id {p.id!r}; ids must be "
                            "unique (results are stored by id).")
        seen[p.id] = i
    return problems


def _scalar(value) -> bool:
    """Text, or a finite number that is not a boolean: what a question or an answer can be."""
    if isinstance(value, str):
        return True
    if isinstance(value, bool) or not isinstance(value, int | float):
        return False
    return math.isfinite(value)


def load_local(path: str | Path, fields: dict[str, str] | None = None, source: str | None = None) -> list[Problem]:
    """Problems from a JSON list or JSONL file; `fields` maps 'question'/'answer'/... to the file's keys."""
    path = Path(path)
    if not path.is_file():
        raise DataError(f"No such problem file: {path}")
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise DataError(f"{path} is not UTF-8 text ({exc.reason} at byte {exc.start}); save it as UTF-8.") from None
    try:
        records = json.loads(text) if text.lstrip().startswith("[") else [
            json.loads(line) for line in text.splitlines() if line.strip()]
    except json.JSONDecodeError as exc:
        raise DataError(f"{path} is neither a JSON list nor JSON lines: {exc}") from None
    except RecursionError:
        raise DataError(f"{path} is nested too deeply to be a problem file (records are flat objects).") from None
    except ValueError:  # an integer past Python's digit limit (sys.set_int_max_str_digits)
        raise DataError(f"{path} holds a number too long to read; write long answers as text (in quotes).") from None
    fields = {"question": "question", "answer": "answer", **(fields or {})}
    return _records_to_problems(records, fields, source or path.stem)


def load_hub(name: str, offline: bool | None = None) -> list[Problem]:
    """MATH500 or GSM8K from the Hugging Face hub (needs the `datasets` package and a network)."""
    spec = HUB_SETS[name]
    try:
        import datasets
    except ImportError:
        raise DataError(f"Loading {name} from the hub needs the `datasets` package: pip install datasets "
                        "(or `pip install -e .[hub]`). Alternatively pass a local JSON/JSONL file.") from None
    try:
        rows = datasets.load_dataset(spec["repo"], spec["config"], split=spec["split"])
    except Exception as exc:  # datasets raises many types for the same "cannot reach the hub" situation
        raise DataError(f"Could not load {spec['repo']} from the Hugging Face hub ({type(exc).__name__}). "
                        "Offline? Use the embedded 'arithmetic' set, or download the data elsewhere and pass "
                        "a local JSON/JSONL file with load_problems(path, fields=...).") from exc
    return _records_to_problems(rows, spec["fields"], name)


def load_problems(name: str, n: int | None = None, levels: Sequence[int] | None = None, seed: int = 0,
                  fields: dict[str, str] | None = None) -> list[Problem]:
    """A problem set by name: 'arithmetic', 'math500', 'gsm8k', or a path to a local JSON/JSONL file.

    For 'arithmetic', `n` is the number per level (None: 10); otherwise the first `n` problems (after level
    filtering; None: all of them).
    """
    if n is not None and not is_count(n, 1):
        raise DataError(f"n (problems{' per level' if name == 'arithmetic' else ''}) must be an integer of at least "
                        f"1, or None, got {n!r}.")
    if levels is not None:
        if isinstance(levels, int | str) or not all(isinstance(v, int) and not isinstance(v, bool) for v in levels):
            raise DataError(f"levels must be a list of integers such as [1, 2, 3], got {levels!r}.")
        if not levels:
            raise DataError("levels is an empty list: give the levels to use, or None for all of them.")
    if not isinstance(name, str):
        raise DataError(f"The problem set must be named by a string, got {name!r}.")
    if name == "arithmetic":
        outside = sorted(set(levels or ()) - set(LEVELS))
        if outside:
            raise DataError(f"Arithmetic levels are {sorted(LEVELS)}; levels {outside} do not exist.")
        return arithmetic_problems(n or 10, levels or tuple(LEVELS), seed)
    if name in HUB_SETS:
        problems = load_hub(name)
    elif Path(name).suffix in {".json", ".jsonl"} or Path(name).is_file():
        problems = load_local(name, fields)
    else:
        raise DataError(f"Unknown problem set {name!r}: use 'arithmetic', 'math500', 'gsm8k' or a JSON/JSONL path.")
    if levels:
        found = sorted({p.level for p in problems if p.level is not None})
        problems = [p for p in problems if p.level in set(levels)]
        if not problems:
            raise DataError(f"No problem of {name} has a level in {list(levels)}; its levels are {found or 'none'}.")
    return problems[:n] if n else problems


# --------------------------------------------------------------------------------------------------
# Prompts
# --------------------------------------------------------------------------------------------------


def prompt_text(question: str) -> str:
    """The reference prompt of 'Reasoning with Sampling' around one question."""
    return PROMPT_PREFIX + question.strip() + PROMPT_SUFFIX


def chat_ids(tokenizer, messages: list[dict]) -> list[int]:
    """Token ids of `messages` through the chat template, ready for the assistant's turn.

    transformers 4 returns a list of ids; transformers 5 a BatchEncoding (a mapping that is not a dict).
    """
    ids = tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=True)
    if hasattr(ids, "keys") and "input_ids" in ids:
        ids = ids["input_ids"]
    return [int(i) for i in ids]


def build_prompt(tokenizer, question: str, chat: bool | None = None, shots: int = 0) -> list[int]:
    """Token ids of the reference prompt: through the chat template for instruct models, raw text otherwise.

    `shots` > 0 puts that many worked arithmetic examples first (as earlier chat turns, or as text blocks),
    which a very small model needs before it follows the \\boxed{} format.
    """
    if not isinstance(question, str) or not question.strip():
        raise DataError("The question is empty.")
    if shots < 0:
        raise DataError(f"shots must be 0 or more, got {shots}.")
    examples = worked_examples(shots)
    has_template = bool(getattr(tokenizer, "chat_template", None))
    chat = has_template if chat is None else chat
    if chat and not has_template:
        raise DataError("This tokenizer has no chat template; build the prompt as raw text (chat=False).")
    if chat:
        messages = []
        for ex in examples:
            messages += [{"role": "user", "content": prompt_text(ex.question)},
                         {"role": "assistant", "content": ex.solution}]
        messages.append({"role": "user", "content": prompt_text(question)})
        return chat_ids(tokenizer, messages)
    text = "".join(f"{prompt_text(ex.question)}\n{ex.solution}\n\n" for ex in examples) + prompt_text(question) + "\n"
    return tokenizer(text)["input_ids"]


# --------------------------------------------------------------------------------------------------
# Choosing problems for an analysis
# --------------------------------------------------------------------------------------------------


def by_level(pairs: Sequence[tuple[Problem, object]]) -> dict:
    """Items grouped by their problem's level, levels in increasing order (no level last)."""
    groups: dict = {}
    for p, item in pairs:
        groups.setdefault(p.level, []).append(item)
    return dict(sorted(groups.items(), key=lambda kv: (kv[0] is None, kv[0])))


def per_level(problems: Sequence[Problem], k: int) -> list[Problem]:
    """The first `k` problems of each level, levels in increasing order (problems without a level count as one)."""
    return [p for group in by_level([(p, p) for p in problems]).values() for p in group[:k]]


def interleaved(problems: Sequence[Problem], n: int | None) -> list[Problem]:
    """The first `n` problems taking levels in turn (level 1, 2, …, 1, 2, …), so a small n covers every level."""
    groups = list(by_level([(p, p) for p in problems]).values())
    order = [g[i] for i in range(max(map(len, groups), default=0)) for g in groups if i < len(g)]
    return order[:n] if n else order


def levels_of(model: str, levels: Sequence[int] | None, model_levels: Mapping[str, Sequence[int]] | None
              ) -> list[int] | None:
    """The levels one model's problems are drawn from: its own in `model_levels` (a model too weak or too strong
    for the book's levels, chosen by measurement), else `levels`, the levels of every other model."""
    own = (model_levels or {}).get(model)
    return list(own) if own is not None else (list(levels) if levels is not None else None)


def check_model_levels(value: object, models: Sequence[str] | None = None) -> dict[str, tuple[int, ...]]:
    """`model_levels` checked and made canonical, the one rule the runner and the library share: a mapping of model
    names to non-empty lists of difficulty levels (whole numbers from 1 to 100); with `models`, every key among them,
    since a key that names no model would silently leave that model on the shared levels."""
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise DataError(f"model_levels must map model names to lists of difficulty levels, e.g. "
                        f"{{'gemma-3-270m': [1, 3]}}, got {value!r}.")
    checked = {}
    for model, chosen in value.items():
        if not isinstance(model, str):
            raise DataError(f"model_levels: {model!r} is not a model name.")
        if not isinstance(chosen, list | tuple) or not chosen or not all(
                isinstance(v, int) and not isinstance(v, bool) and 1 <= v <= 100 for v in chosen):
            raise DataError(f"model_levels: the levels of {model!r} must be a non-empty list of difficulty levels, "
                            f"e.g. [1, 2, 3], got {chosen!r}.")
        checked[model] = tuple(chosen)
    if models is not None and (stray := sorted(set(checked) - set(models))):
        raise DataError(f"model_levels names {stray}, which are not among the models {list(models)}: name each "
                        "model exactly as the models list does.")
    return checked


def problem_sets(models: Sequence[str], dataset: str, *, n: int | None, levels: Sequence[int] | None,
                 model_levels: Mapping[str, Sequence[int]] | None = None, seed: int = 0,
                 fields: dict[str, str] | None = None) -> dict[str, list[Problem]]:
    """Each model's problems (`load_problems` at `levels_of` the model), one load per distinct set of levels, so
    that models on the same levels get the very same problems and pair problem by problem (`model_levels` as
    `check_model_levels` allows, its keys among `models`)."""
    check_model_levels(model_levels, models)
    loaded: dict[tuple | None, list[Problem]] = {}
    sets = {}
    for model in models:
        own = levels_of(model, levels, model_levels)
        key = tuple(own) if own is not None else None
        if key not in loaded:
            loaded[key] = load_problems(dataset, n=n, levels=own, seed=seed, fields=fields)
        sets[model] = loaded[key]
    return sets


def problems_of(problems: Sequence[Problem] | Mapping[str, Sequence[Problem]], model: str) -> list[Problem]:
    """One model's problems, from one list for every model or from `problem_sets`' mapping."""
    if isinstance(problems, Mapping):
        if model not in problems:
            raise DataError(f"no problems were given for {model!r}; the problem sets name {sorted(problems)}")
        return list(problems[model])
    return list(problems)


def levels_text(problems: Sequence[Problem]) -> str:
    """The levels a problem list covers, as a reader reads them: 'levels 5–6', 'levels 1 and 3', 'level 2'."""
    found = sorted({p.level for p in problems if p.level is not None})
    if not found:
        return "problems without levels"
    if len(found) == 1:
        return f"level {found[0]}"
    if found == list(range(found[0], found[-1] + 1)):
        return f"levels {found[0]}–{found[-1]}"
    return f"levels {listed(found)}"


def on_own_problems(sets: Mapping[str, Sequence[str]]) -> dict[str, bool]:
    """For each model (its problems' ids), whether it runs problems of its own rather than the book's: the set most
    models share, the first model's on a tie. The one rule by which every table and sentence marks a model whose
    numbers do not pair with the others'."""
    ids = [tuple(v) for v in sets.values()]
    shared = max(ids, key=ids.count) if ids else ()
    return {model: tuple(v) != shared for model, v in sets.items()}


def sets_text(sets: Mapping[str, Sequence[Problem]]) -> str:
    """`problem_sets` in one line: how many problems each model runs, and on which levels where they differ."""
    texts = {m: f"{len(p)} problems ({levels_text(p)})" for m, p in sets.items()}
    if len(set(texts.values())) <= 1:
        return f"{next(iter(texts.values()), 'no problems')}; models: {', '.join(sets)}"
    return "; ".join(f"{m}: {t}" for m, t in texts.items())
