"""Answer extraction and equivalence: the last \\boxed{...}, else the last number; math-verify decides.

Nothing here raises on malformed model output: an answer that cannot be read is simply wrong.
"""

from __future__ import annotations

import re
import threading

from helpers.core.quiet import logger_quiet

_BOX_OPENERS = ("\\boxed", "\\fbox")
_NUMBER = re.compile(r"-?\d{1,3}(?:,\d{3})+(?:\.\d+)?|-?\d+(?:\.\d+)?(?:/\d+)?")
_INT = re.compile(r"^[+-]?\d+$")
_SCIENTIFIC = re.compile(r"^([+-]?)(\d+)(?:\.(\d+))?[eE]\+?(\d{1,4})$")  # 1e30, 2.5E3 (exponents below 10^4)
TIMEOUT_SECONDS = 5
MAX_SYMBOLIC_CHARS = 400  # longer answers are compared as plain strings


def last_boxed(text: str) -> str | None:
    """Content of the last \\boxed{...} (or \\fbox{...}) with balanced braces, or None."""
    if not isinstance(text, str):
        return None
    best = None
    for opener in _BOX_OPENERS:
        start = text.rfind(opener + "{")
        if start > (best[0] if best else -1):
            best = (start, opener)
    if best is None:
        return None
    i = best[0] + len(best[1]) + 1
    depth = 1
    for j in range(i, len(text)):
        if text[j] == "{":
            depth += 1
        elif text[j] == "}":
            depth -= 1
            if depth == 0:
                return text[i:j].strip()
    return None  # unbalanced: the box never closed


def last_number(text: str) -> str | None:
    """The last number in the text (thousands separators removed), or None."""
    if not isinstance(text, str):
        return None
    found = _NUMBER.findall(text)
    return found[-1].replace(",", "") if found else None


def extract_answer(text: str) -> str | None:
    """The answer a completion gives: its last \\boxed{} content, else its last number."""
    boxed = last_boxed(text)
    return boxed if boxed else last_number(text)


def _plain_int(answer: str) -> str | None:
    """Read '1,234', '$42$', ' -7 ', '\\text{42}' as integers, in a canonical digit string ('-7', '1234');
    None for anything else. Strings, not ints: Python refuses int() on numbers of more than 4,300 digits."""
    s = answer.strip().strip("$").strip()
    s = re.sub(r"^\\text\{(.*)\}$", r"\1", s).strip()
    s = s.replace(",", "").replace("\\!", "").replace("{}", "")
    scientific = _SCIENTIFIC.match(s)
    if scientific:  # an integer written with an exponent: 1e30 is 1 followed by 30 zeros
        sign, whole, fraction, exponent = scientific.groups()
        fraction, exponent = (fraction or "").rstrip("0"), int(exponent)
        if len(fraction) > exponent:
            return None  # not an integer (2.55e1)
        s = sign + whole + fraction + "0" * (exponent - len(fraction))
    if not _INT.match(s):
        return None
    sign, digits = ("-" if s[0] == "-" else ""), s.lstrip("+-").lstrip("0") or "0"
    return ("" if digits == "0" else sign) + digits


def is_equivalent(predicted: str | None, gold: str) -> bool:
    """True if `predicted` means the same as `gold`: integers compared exactly, the rest by math-verify."""
    if predicted is None or not str(predicted).strip():
        return False
    predicted, gold = str(predicted), str(gold)
    a, b = _plain_int(predicted), _plain_int(gold)
    if a is not None and b is not None:
        return a == b
    if len(predicted) > MAX_SYMBOLIC_CHARS or len(gold) > MAX_SYMBOLIC_CHARS:
        return predicted.strip() == gold.strip()  # too long to be a real answer; never worth a symbolic check
    if threading.current_thread() is threading.main_thread():
        return _math_verify(predicted, gold, TIMEOUT_SECONDS)
    return _math_verify_in_a_process(predicted, gold)


def _math_verify_in_a_process(predicted: str, gold: str) -> bool:
    """math-verify bounded from outside a main thread: its timeout needs signals, which only the main thread
    has, and a thread cannot be stopped (an expression like 9^(9^(9^9)) holds the interpreter for minutes).
    A child interpreter can: it is killed at the limit, the answer counted wrong, and nothing is left running.
    (A fresh interpreter, not multiprocessing, which would re-import the caller's unguarded main module.)"""
    import json
    import subprocess
    import sys

    code = ("import json, sys; from helpers.evaluation.grading import _math_verify; a = json.load(sys.stdin); "
            f"print(json.dumps(_math_verify(a[0], a[1], {TIMEOUT_SECONDS})))")
    try:
        done = subprocess.run([sys.executable, "-c", code], input=json.dumps([predicted, gold]), text=True,
                              capture_output=True, timeout=TIMEOUT_SECONDS + 10)  # + the child's start-up
        return done.returncode == 0 and json.loads(done.stdout.strip() or "false") is True
    except (subprocess.TimeoutExpired, OSError, ValueError):
        return False  # killed at the limit (subprocess.run kills and reaps the child), or unreadable: wrong


def _math_verify(predicted: str, gold: str, timeout: int | None) -> bool:
    """math-verify's verdict; its log (a warning per unparsable answer) is held to errors during the call only."""
    try:
        from math_verify import parse, verify

        with logger_quiet("math_verify"):
            gold_parsed = parse("$" + gold + "$", parsing_timeout=timeout)
            pred_parsed = parse("$" + predicted + "$", parsing_timeout=timeout)
            if not gold_parsed or not pred_parsed:
                return predicted.strip() == gold.strip()
            return bool(verify(gold_parsed, pred_parsed, timeout_seconds=timeout))
    except Exception:  # math-verify can fail on odd LaTeX; an unreadable answer counts as wrong
        return predicted.strip() == gold.strip()


def grade(completion: str, gold: str) -> bool:
    """Is the answer extracted from `completion` equivalent to `gold`?"""
    return is_equivalent(extract_answer(completion), gold)
