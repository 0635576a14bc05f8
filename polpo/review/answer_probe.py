"""A work that is only an answer, checked against the judge's own computation of it. Pure.

Measured on Qwen2.5-Coder-1.5B: a list of the primes below 30 that held 27 scored 4.99, and a CSV turned into JSON
with one number left a string scored 4.99 — as high as the right answers. A small model reading an answer does
not recompute it. It writes code that does well, though. So when a work is text whose answer is data (a JSON
list, object or number, a comma-separated list, numbers apart: :func:`comparable`), the judge model is asked for a
function ``answer()`` that computes the answer from the task alone (:func:`answer_messages`; asked for a whole
program, the 1.5B model read a file the task never gave, ``open('input.csv')``, three times in three); polpo runs
it in a scratch folder and compares what it returns with the work's answer as data (:func:`same_answer`: ``[2, 3]`` and ``2, 3`` are the
same answer, ``"28"`` and ``28`` are not). The form the task asks for stays the reviewers' to judge.

One program can be wrong. A work that agrees with one is shown so; a work that differs counts as differing only
when two different programs (at most three are asked for, each sampled apart) print the same answer, and not the
work's. Anything less is a note, not evidence against the work.

An answer that is prose, code, a pattern or a lone word (an agent's "done") is not data, and no program is
asked for: the check costs a call only where it can tell something.
"""

from __future__ import annotations

import ast
import json
import math
import re
from typing import Any

from polpo.review.prompts import head

__all__ = ["ANSWER_PROGRAM", "MARK", "ORIGIN", "answer_messages", "answer_program", "comparable", "printed_answer",
           "same_answer", "shown"]

ANSWER_PROGRAM = "_polpo_answer.py"
ORIGIN = "programs the judge wrote from the task alone"
MAX_ANSWER_CHARS = 100_000
_FENCE = re.compile(r"^```[\w+-]*[ \t]*\n(.*?)\n?```$", re.DOTALL)
_CODE = re.compile(r"```(?:python|py|python3)?[ \t]*\n(.*?)```", re.DOTALL)
_TOKEN = re.compile(r"[A-Za-z0-9_.+\-]+")
_INT = re.compile(r"[+-]?\d+")


def _scalar(token: str) -> Any:
    if _INT.fullmatch(token):
        return int(token)
    try:
        value = float(token)
    except ValueError:
        return token
    return value if math.isfinite(value) else token


def _item(value: Any) -> Any:
    if isinstance(value, bool):
        return ("<bool>", value)
    if isinstance(value, list):
        return tuple(_item(v) for v in value)
    if isinstance(value, dict):
        return ("<object>", tuple(sorted((str(k), _item(v)) for k, v in value.items())))
    return value


def _norm(value: Any) -> Any:
    """A JSON value in a form where equal answers compare equal: a list is a tuple (as a comma-separated list
    reads), a lone scalar a tuple of one, an object its sorted pairs; a bool stays apart from 1 and 0."""
    return _item(value) if isinstance(value, list) else (_item(value),)


def comparable(text: str) -> Any:
    """The answer ``text`` holds, as data, or None when it is not data (prose, code, a pattern, too long)."""
    text = text.strip()
    if not text or len(text) > MAX_ANSWER_CHARS:
        return None
    if (m := _FENCE.match(text)) is not None:
        text = m.group(1).strip()
    value = _literal(text)
    if value is not _NONE:  # a lone string, bool or null is a word, not a computed result (an agent's "done")
        return _norm(value) if isinstance(value, list | dict) or _is_number_value(value) else None
    if "," in text:
        tokens = [t.strip() for t in text.split(",")]
        if all(_TOKEN.fullmatch(t) for t in tokens):
            return tuple(_scalar(t) for t in tokens)
        return None
    words = text.split()
    if len(words) > 1 and all(_is_number(w) for w in words):
        return tuple(_scalar(w) for w in words)
    return None


_NONE = object()


def _literal(text: str) -> Any:
    """``text`` as JSON, else as a Python literal (a program of the judge's may print a list of dicts with
    ``print``, not ``json.dumps``: the same data), tuples as lists; :data:`_NONE` when it is neither."""
    try:
        return json.loads(text)
    except ValueError:
        pass
    if text[:1] not in "[{(":
        return _NONE
    try:
        value = ast.literal_eval(text)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return _NONE
    return _lists(value)


def _lists(value: Any) -> Any:
    if isinstance(value, tuple | list):
        return [_lists(v) for v in value]
    if isinstance(value, dict):
        return {k: _lists(v) for k, v in value.items()}
    return value


def _is_number_value(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _is_number(word: str) -> bool:
    return not isinstance(_scalar(word), str)


def _equal(a: Any, b: Any) -> bool:
    if isinstance(a, tuple) and isinstance(b, tuple):
        return len(a) == len(b) and all(_equal(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, float | int) and isinstance(b, float | int) and not isinstance(a, bool) \
            and not isinstance(b, bool):
        return math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-12)
    return bool(a == b)


def same_answer(a: str, b: str) -> bool | None:
    """Whether two answers are the same data; None when either is not data."""
    ca, cb = comparable(a), comparable(b)
    if ca is None or cb is None:
        return None
    return _equal(ca, cb)


def shown(text: str, limit: int = 300) -> str:
    """An answer as a reviewer is shown it: on one line, cut."""
    one = " ".join(text.split())
    return one if len(one) <= limit else one[:limit] + " …"


def answer_messages(*, title: str, description: str) -> list[dict[str, str]]:
    return [
        {"role": "system", "content": "You are an expert Python programmer. You write correct, complete code."},
        {"role": "user", "content": f"TASK: {title}\n\n{head(description, 6000)}\n\nWrite a Python function "
                                    "`answer()` that takes no arguments and returns the answer this task asks for, "
                                    "computed from the task's text alone: a list, a dict, a number or a string. "
                                    "Everything the task gives (numbers, rows, text) goes into the function itself "
                                    "as Python values: there is no file and no input to read. Use only the "
                                    "standard library. Reply with one ```python code block holding the function "
                                    "and the imports it needs, and nothing else."},
    ]


MARK = "--- polpo: what answer() returns ---"
"""Printed before the value: what the function's own module-level lines print comes before it and is ignored."""
_CALL_ANSWER = f"""

if __name__ == "__main__":
    import json as _polpo_json
    _polpo_value = answer()
    print({MARK!r})
    print(_polpo_value if isinstance(_polpo_value, str) else _polpo_json.dumps(_polpo_value, default=str))
"""


def printed_answer(stdout: str) -> str:
    """What a run printed as its answer: after the last :data:`MARK` when there is one, else all of it."""
    return stdout.rpartition(MARK)[2].strip() if MARK in stdout else stdout.strip()


def answer_program(reply: str | None) -> str | None:
    """The program to run for the reply: its code block defining ``answer()``, with the lines that print what it
    returns (a string as it is, other data as JSON); else a code block that prints by itself; None when neither
    parses."""
    blocks: list[str] = _CODE.findall(reply or "") or ([reply] if reply else [])
    printing = None
    for block in blocks:
        try:
            tree = ast.parse(block)
        except (SyntaxError, ValueError):
            continue
        if any(isinstance(n, ast.FunctionDef) and n.name == "answer" and not n.args.args for n in tree.body):
            return block.rstrip("\n") + _CALL_ANSWER
        if printing is None and any(isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id == "print"
                                    for n in ast.walk(tree)):
            printing = block
    return printing
