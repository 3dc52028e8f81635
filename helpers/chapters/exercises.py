"""The code of the book's "extend" exercises: the reference solutions, and the checks a student runs on theirs.

Each exercise asks for a small function; `check_*` calls it on many inputs against the reference and against
the rules any such function must keep, and raises `AssertionError` naming the first input it gets wrong. A student's
function may also fail in ways of its own (raise, return None or the wrong type, never end): each comes back as a
`StudentCodeError`, one sentence that says what the function did, and a check gives up after `TIME_LIMIT` seconds.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from itertools import islice

import numpy as np

TIME_LIMIT = 10.0  # seconds for a whole check: the reference solutions pass in a fraction of one


class StudentCodeError(AssertionError):
    """What a student's function did wrong, in one sentence (an AssertionError, as every failed check is)."""


@contextmanager
def time_limit(seconds: float, what: str) -> Iterator[None]:
    """Stop the block after `seconds` with a `StudentCodeError` (on the main thread of a Unix process, where the
    notebook's cells run; elsewhere the block runs without a limit)."""
    if threading.current_thread() is not threading.main_thread() or not hasattr(signal, "SIGALRM"):
        yield
        return

    def stop(signum, frame):
        raise StudentCodeError(f"{what} did not finish within {seconds:g} seconds: look for a loop that never ends")

    previous = signal.signal(signal.SIGALRM, stop)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def _call(fn: Callable, *args):
    """`fn(*args)`, its exceptions told as a sentence about the student's function."""
    try:
        return fn(*args)
    except StudentCodeError:
        raise
    except Exception as exc:
        name = getattr(fn, "__name__", "your function")
        raise StudentCodeError(f"{name}{args!r} raised {type(exc).__name__}: {exc}") from None


def rerun_command(profile: str, stem: str, **overrides) -> str:
    """The command that re-runs chapter `stem` with the profile that built the page and `overrides`, as Markdown
    code for an exercise to glue: a reader of the smoke build is told to re-run the smoke profile. With overrides it
    says `--recompute`: a profile read from the results release (`full`) otherwise stops before computing what the
    release lacks, and elsewhere the flag changes nothing."""
    flags = "".join(f" -p {k}={v}" for k, v in overrides.items())
    return f"`python -m helpers run --profile {profile} --only {stem}{flags}{' --recompute' if overrides else ''}`"


def layer_name(layer: int | None) -> str:
    """A layer as the exercises' solutions print it: "layer 12", or "no layer" where a rule finds none (None or
    -1), so that the sentence stays true either way."""
    return "no layer" if layer is None or layer < 0 else f"layer {layer}"


def kl_below(kl_curve: Sequence[float], nats: float = 1.0) -> int:
    """Effective depth by an absolute rule: the first layer l in 0..L-2 whose lens KL is below `nats`; -1 if
    none (chapter 01's exercise; the chapter's own rule takes a fraction of the curve's maximum instead)."""
    kl = np.asarray(kl_curve, dtype=float)
    below = np.nonzero(kl[:-1] < nats)[0]
    return int(below[0]) if len(below) else -1


def kept_last_two(n_layers: int, depth: int) -> list[int]:
    """Blocks kept by a stitch that preserves the last two blocks: 0..depth-3, then L-2 and L-1 (chapter 03's
    exercise; stitch-and-preserve keeps only the last one)."""
    if not isinstance(depth, int) or not 2 <= depth <= n_layers:
        raise ValueError(f"depth must be an integer in 2..{n_layers}, got {depth!r}")
    return [*range(depth - 2), n_layers - 2, n_layers - 1]


def _curves(seed: int) -> list[np.ndarray]:
    """Lens-like KL curves: falling, flat, noisy, rising, with a zero at the last layer as the lens has."""
    rng = np.random.default_rng(seed)
    curves = []
    for n in (2, 3, 8, 24, 28):
        falling = np.sort(rng.uniform(0, 8, n))[::-1].copy()
        noisy = rng.gamma(1.0, 2.0, n)
        for c in (falling, noisy, np.full(n, 3.0), np.sort(noisy)):
            c = c.copy()
            c[-1] = 0.0
            curves.append(c)
    return curves


def check_depth_rule(rule: Callable[[Sequence[float], float], int], seed: int = 0,
                     time_limit_s: float = TIME_LIMIT) -> str:
    """Check a student's `rule(kl_curve, nats)` against `kl_below` on many curves and thresholds."""
    n = 0
    with time_limit(time_limit_s, "the rule"):
        for curve in _curves(seed):
            for nats in (0.5, 1.0, 2.5, 10.0):
                n += _check_rule_once(rule, curve, nats)
    return f"passed on {n} curves and thresholds"


def _quoted(n: int) -> str:
    """An integer as a message quotes it: itself, or its size where it has too many digits to print."""
    return str(n) if abs(n) < 10**30 else f"an integer of about {int(n.bit_length() * 0.30103) + 1:,} digits"


def _check_rule_once(rule, curve, nats) -> int:
    got, want = _call(rule, list(curve), nats), kl_below(curve, nats)
    if got is None:
        raise StudentCodeError("the rule returned None: it must return an integer layer (-1 where none is below); "
                               "is a `return` missing?")
    if isinstance(got, bool) or not isinstance(got, int | np.integer):
        raise StudentCodeError(f"the rule must return an integer layer, got {got!r} ({type(got).__name__})")
    if not -1 <= got < len(curve):  # said before any message quotes it: Python will not print a huge integer
        raise StudentCodeError(f"the rule returned {_quoted(int(got))}, outside -1..{len(curve) - 1} (the layers of "
                               f"a {len(curve)}-layer KL curve): it must return a layer of the curve, or -1 where none "
                               "is below the threshold")
    assert got == want, (f"on the KL curve {np.round(curve, 2).tolist()} with {nats} nats: got {got}, "
                         f"expected {want} (the first layer before the last whose KL is below it, or -1)")
    return 1


def check_kept_blocks(kept: Callable[[int, int], list[int]], time_limit_s: float = TIME_LIMIT) -> str:
    """Check a student's `kept(n_layers, depth)` against `kept_last_two` for every depth of models of 4 to 36
    blocks, and against what any truncation must keep: `depth` blocks, in order, all of them at full depth."""
    n = 0
    with time_limit(time_limit_s, "kept"):
        for n_layers in range(4, 37):
            for depth in range(2, n_layers + 1):
                n += _check_kept_once(kept, n_layers, depth)
    return f"passed on {n} (model, depth) pairs"


def _check_kept_once(kept, n_layers: int, depth: int) -> int:
    blocks = _call(kept, n_layers, depth)
    if blocks is None:
        raise StudentCodeError("kept returned None: it must return the list of block indices it keeps; is a "
                               "`return` missing?")
    if isinstance(blocks, str | bytes | dict) or not hasattr(blocks, "__iter__"):
        raise StudentCodeError(f"kept must return a list of block indices, got {type(blocks).__name__}")
    try:
        got = list(islice(iter(blocks), n_layers + 1))  # an endless generator is cut here, not followed forever
    except StudentCodeError:
        raise
    except Exception as exc:
        raise StudentCodeError(f"iterating over what kept({n_layers}, {depth}) returned raised "
                               f"{type(exc).__name__}: {exc}") from None
    if any(isinstance(b, bool) or not isinstance(b, int | np.integer) for b in got):
        raise StudentCodeError(f"kept({n_layers}, {depth}) must return block indices (integers), got {got!r}")
    assert len(got) == depth, f"L = {n_layers}, depth {depth}: {len(got)} blocks kept, expected {depth}"
    assert got == sorted(set(got)), f"L = {n_layers}, depth {depth}: {got} is not increasing"
    assert got == kept_last_two(n_layers, depth), (
        f"L = {n_layers}, depth {depth}: got {got}, expected {kept_last_two(n_layers, depth)}")
    return 1
