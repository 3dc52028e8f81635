"""How long answers are, read from decodes under a long cap: where each ends, what a shorter cap would have made of
it, whether an unfinished one loops or keeps reasoning, and what a stop at the first closed \\boxed{} would change.

A greedy or sampled answer is decoded one token at a time, each token depending only on the ones before it, so an
answer that ended (EOS) after n tokens under a cap of 1,024 ends after the same n tokens under any cap of at least n,
and is cut off under a smaller one. That makes one long decode enough to say, for every shorter cap, which answers
would have finished: the outcome counts below are exact for every cap up to the decode's own; only an answer cut off
at a shorter cap would need its text there to be graded as the book grades a cut-off answer (by its last number).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from helpers.evaluation.grading import extract_answer, is_equivalent

FINISHED_OUTCOMES = ("right", "finished wrong", "unfinished")


def finished_within(record: dict, cap: int) -> bool:
    """Whether the answer ended by itself (EOS or a stop token) within `cap` new tokens."""
    return bool(record["stopped"]) and record["n_tokens"] <= cap


def check_cap(records: Sequence[dict], cap: int) -> None:
    """A ValueError unless every record was decoded under a cap of at least `cap`: a shorter decode cannot say what
    a longer cap would have made of an answer it cut off."""
    if isinstance(cap, bool) or not isinstance(cap, int) or cap < 1:
        raise ValueError(f"a cap is a number of new tokens of at least 1, got {cap!r}")
    shortest = min((r["n_tokens"] for r in records if not r["stopped"]), default=None)
    if shortest is not None and shortest < cap:
        raise ValueError(f"an answer was cut off at {shortest} new tokens, so it cannot be read at a cap of {cap}: "
                         f"decode again with max_new_tokens of at least {cap}")


def three_way(record: dict, cap: int) -> str:
    """The answer under `cap`, as `FINISHED_OUTCOMES` names it: right, finished wrong, or unfinished (cut off by the
    cap, whatever its last number says). No text is needed: a finished answer's grade is the record's own."""
    if not finished_within(record, cap):
        return "unfinished"
    return "right" if record["correct"] else "finished wrong"


@dataclass(frozen=True)
class Shares:
    """How a set of answers ends under one cap: the share right, finished wrong and unfinished (summing to 1)."""

    cap: int
    n: int
    right: float
    wrong: float
    unfinished: float

    @property
    def finished_accuracy(self) -> float:
        """Right among the finished answers (nan where none finished)."""
        done = self.right + self.wrong
        return self.right / done if done else float("nan")


def shares(records: Sequence[dict], cap: int) -> Shares:
    """`Shares` of `records` (one per answer) under `cap` (`check_cap` first)."""
    check_cap(records, cap)
    ends = [three_way(r, cap) for r in records]
    n = len(ends)
    if not n:
        raise ValueError("no answers to count")
    return Shares(cap, n, ends.count("right") / n, ends.count("finished wrong") / n, ends.count("unfinished") / n)


def ended_within(records: Sequence[dict], cap: int) -> float:
    """The share of answers that ended by themselves within `cap` new tokens."""
    return 1.0 - shares(records, cap).unfinished


def smallest_cap(records: Sequence[dict], share: float, candidates: Sequence[int]) -> int | None:
    """The smallest of `candidates` within which at least `share` of the answers end (None: none of them)."""
    if not 0 < share <= 1:
        raise ValueError(f"share must be in (0, 1], got {share!r}")
    for cap in sorted(candidates):
        if ended_within(records, cap) >= share:
            return cap
    return None


def repeated_share(tokens: Sequence[int], n: int = 8, tail: int = 256) -> float:
    """How much an answer repeats itself: the share of the n-grams among its last `tail` tokens that occurred
    earlier in it. A loop (the same lines again and again) scores near 1; an answer still reasoning, low. 0 for an
    answer too short to hold an n-gram in its tail."""
    if n < 1 or tail < n:
        raise ValueError(f"need n >= 1 and tail >= n, got n={n}, tail={tail}")
    tokens = list(tokens)
    start = max(len(tokens) - tail, 0)
    seen: set[tuple[int, ...]] = set()
    repeated = total = 0
    for i in range(len(tokens) - n + 1):
        gram = tuple(tokens[i:i + n])
        if i >= start:
            total += 1
            repeated += gram in seen
        seen.add(gram)
    return repeated / total if total else 0.0


def first_box_end(text: str) -> int | None:
    """The index just past the first closed \\boxed{...} of `text` (balanced braces), or None where none closes."""
    start = text.find("\\boxed{")
    while start != -1:
        depth, i = 1, start + len("\\boxed{")
        while i < len(text):
            depth += {"{": 1, "}": -1}.get(text[i], 0)
            i += 1
            if depth == 0:
                return i
        start = text.find("\\boxed{", start + 1)
    return None


def tokens_to_box(tokens: Sequence[int], decode: Callable[[list[int]], str]) -> int | None:
    """The fewest leading tokens whose text holds a closed \\boxed{} (None: the answer never closes one), found by
    bisection on the decoded prefix."""
    if first_box_end(decode(list(tokens))) is None:
        return None
    lo, hi = 1, len(tokens)  # the prefix of `hi` tokens holds one; find the shortest that does
    while lo < hi:
        mid = (lo + hi) // 2
        if first_box_end(decode(list(tokens[:mid]))) is not None:
            hi = mid
        else:
            lo = mid + 1
    return lo


@dataclass(frozen=True)
class BoxStop:
    """What a stop at the first closed \\boxed{} would have done to a set of answers: how many it would have
    changed (the graded answer differs), and the tokens it would have saved."""

    n: int
    stopped_early: int  # answers that would have stopped before they ended
    changed: int  # of those, answers whose graded answer would differ
    changed_grade: int  # of those, answers whose grade (right or wrong) would differ
    tokens: int  # new tokens of the answers as decoded
    saved: int  # new tokens the stop would have saved


def box_stop(records: Sequence[dict], golds: Sequence[str], decode: Callable[[list[int]], str]) -> BoxStop:
    """`BoxStop` of `records` (one per answer, `golds` their gold answers in the same order)."""
    if len(records) != len(golds):
        raise ValueError(f"{len(records)} answers and {len(golds)} gold answers")
    early = changed = flipped = saved = 0
    for r, gold in zip(records, golds, strict=True):
        k = tokens_to_box(r["tokens"], decode)
        if k is None or k >= len(r["tokens"]):
            continue
        early += 1
        saved += len(r["tokens"]) - k
        answer = extract_answer(decode(list(r["tokens"][:k])))
        if answer != r["predicted"]:
            changed += 1
            flipped += is_equivalent(answer, gold) != bool(r["correct"])
    return BoxStop(len(records), early, changed, flipped, sum(len(r["tokens"]) for r in records), saved)


LOOP_SHARE = 0.5  # an unfinished answer whose tail repeats at least this share of its n-grams is counted a loop


def loops(record: dict) -> bool:
    """Whether an answer's tail repeats it (`repeated_share` of its tokens at least `LOOP_SHARE`): the one rule for
    a loop, whichever cap decides that the answer is unfinished."""
    return repeated_share(record["tokens"]) >= LOOP_SHARE


def looping(records: Sequence[Sequence[dict]]) -> list[list[bool]]:
    """Per problem, whether each sample is unfinished (it never ended by itself) and `loops`: an answer a longer cap
    would hardly end, as against one still reasoning."""
    return [[not r["stopped"] and loops(r) for r in per] for per in records]


def choose_cap(records: Sequence[dict], candidates: Sequence[int], share: float = 0.95,
               tolerance: float = 0.01) -> int:
    """The cap a measurement's window needs: the smallest of `candidates` within which `share` of the answers end,
    or, where fewer than that ever end within the longest decode, within `tolerance` of the share that does (an
    answer that loops past every cap is not waited for). The longest candidate where almost none ever ends."""
    check_cap(records, max(candidates))
    wanted = min(share, ended_within(records, max(candidates)) - tolerance)
    found = smallest_cap(records, wanted, candidates) if wanted > 1e-9 else None  # 1e-9: a share's rounding
    return found if found is not None else max(candidates)


@dataclass(frozen=True)
class LengthSummary:
    """How one set of answers (one model, depth and method) ends: its length quantiles in new tokens (an answer still
    unfinished under the decode's cap counts as that cap), the `Shares` under each cap, and how many of those
    unfinished under the longest cap loop (`repeated_share` at least `LOOP_SHARE`)."""

    n: int
    median: float
    p90: float
    shares: dict[int, Shares]
    unfinished: int
    looping: int


def summarize(records: Sequence[dict], caps: Sequence[int]) -> LengthSummary:
    """`LengthSummary` of `records` (one per answer) under each of `caps` (each checked by `check_cap`)."""
    import numpy as np

    n_tokens = np.array([r["n_tokens"] for r in records], dtype=float)
    longest = max(caps)
    by_cap = {cap: shares(records, cap) for cap in sorted(caps)}
    unfinished = [r for r in records if not finished_within(r, longest)]
    return LengthSummary(len(records), float(np.median(n_tokens)), float(np.quantile(n_tokens, 0.9)), by_cap,
                         len(unfinished), sum(loops(r) for r in unfinished))
