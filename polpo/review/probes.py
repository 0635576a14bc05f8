"""A probe of the judge's own: the work and an independent implementation, run side by side on new inputs.

The examples a task states catch the bugs they happen to exercise; a subtle bug (an off-by-one at a boundary, a
case the examples skip) passes them. Measured on Qwen2.5-Coder-1.5B, such work scored as well as correct work: a
small model reading code does not find what its examples miss. It does write code well, though. So, where the
task states examples of calling a function, the judge model is asked once to write that function itself from
the task's text (:func:`reference_messages`); if its version passes every stated example it is a credible
second opinion, and polpo runs both on inputs derived from the stated examples' own arguments
(:func:`derive_calls`: empty and one-element collections, reversed and repeated ones, zero, one, negatives,
neighbours of the numbers given, a limit equal to what another argument adds up to, doubled spaces, words the
task quotes that an input made of them lacks). Where the
two disagree, that is evidence the work — or the reference — is wrong on a case the examples did not cover; the
reviewers are shown both answers, and a critical dimension cannot score above
:data:`~polpo.review.evidence_cap.PROBE_CAP` while a disagreement stands.

Pure: the calls are text, built from literals only (``ast.literal_eval``), never from the work's code.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator, Sequence
from itertools import chain
from typing import Any, NamedTuple

from polpo.review.prompts import head
from polpo.review.stated_examples import StatedExample

__all__ = ["MAX_CALLS", "REFERENCE_FILE", "REFERENCE_TEMPERATURE", "Called", "called_function", "derive_calls",
           "reference_code", "reference_messages", "task_words"]

MAX_CALLS = 32
REFERENCE_FILE = "_polpo_reference.py"
REFERENCE_TEMPERATURE = 0.8
"""A second or third implementation is sampled (with a seed of its own): at temperature 0 it would be the first."""
_CODE = re.compile(r"```(?:python|py)?[ \t]*\n(.*?)```", re.DOTALL)


class Called(NamedTuple):
    """A stated example's call: the function, its literal arguments, and the keywords the last of them were
    given by (``For s = "abcde", c = "ae"`` is read as ``reverse_delete(s="abcde", c="ae")``)."""

    name: str
    args: list[Any]
    keywords: tuple[str, ...] = ()

    def render(self, args: Sequence[Any]) -> str:
        """This call with other arguments, given the same way."""
        plain = len(args) - len(self.keywords)
        given = [repr(a) for a in args[:plain]] + [f"{k}={v!r}" for k, v in zip(self.keywords, args[plain:], strict=True)]
        return f"{self.name}({', '.join(given)})"


def called_function(example: StatedExample) -> Called | None:
    """The call an example makes when it is one call of a plain function on literal arguments, or such a call
    compared with a value (a doctest ``>>> f('x') == '3e25…'`` stating ``True``)."""
    try:
        node = ast.parse(example.source.strip(), mode="eval").body
    except (SyntaxError, ValueError):
        return None
    if isinstance(node, ast.Compare) and len(node.ops) == 1 and isinstance(node.ops[0], ast.Eq):
        node = node.left
    if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Name) \
            or any(k.arg is None for k in node.keywords):
        return None
    try:
        args = [ast.literal_eval(a) for a in [*node.args, *(k.value for k in node.keywords)]]
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return None
    return Called(node.func.id, args, tuple(k.arg for k in node.keywords if k.arg is not None))


def _numbers(value: Any) -> bool:
    return isinstance(value, list) and bool(value) and all(
        isinstance(v, int | float) and not isinstance(v, bool) for v in value)


def _boundaries(others: Sequence[Any]) -> Iterator[int]:
    """Whole numbers the other arguments make a boundary of: a limit equal to a list's sum, length or largest
    element, or to another number given (``will_it_fly(q, w)`` with ``w == sum(q)``; ``x_or_y(n, x, y)``)."""
    for other in others:
        if _numbers(other) and all(isinstance(v, int) for v in other):
            yield from (sum(other), len(other), max(other))
        elif isinstance(other, list):
            yield len(other)
        elif isinstance(other, int) and not isinstance(other, bool):
            yield other


def _variants(value: Any, others: Sequence[Any] = ()) -> Iterator[Any]:
    """Nearby values of one argument, of the same type: the edges subtle bugs sit on (empty, one element, zero
    and one, a repeated neighbour, a running total back to zero, doubled spaces, a limit met exactly)."""
    if isinstance(value, bool):
        yield not value
    elif isinstance(value, int):
        yield from (0, 1, -1, value + 1, value - 1, -value, value * 2)
        yield from _boundaries(others)
    elif isinstance(value, float):
        yield from (0.0, -value, value / 2, value + 0.5)
    elif isinstance(value, str):
        yield from ("", value[:1], value[::-1], value + value[:1], value.upper(), f" {value} ")
        if " " in value.strip():
            yield value.replace(" ", "  ")
    elif isinstance(value, list):
        yield from ([], value[:1], value[::-1], value + value[:1], sorted(value, key=repr))
        if value:
            yield value[:1] + value
        if _numbers(value):
            yield [-v for v in value]
            yield [*value, max(value) + 1]
            yield [*value, -sum(value)]
    elif isinstance(value, tuple):
        yield from ((), value[:1], value[::-1])
    elif isinstance(value, dict):
        items = list(value.items())
        yield from ({}, dict(items[:1]), dict(items[::-1]))


_QUOTED = re.compile(r"""(?<![\w'"])(['"])([^'"\s]{1,24})\1(?![\w'"])""")
MAX_WORDS = 3
"""Words of the task's own added to one argument: each is a probe, and the probes are bounded."""


def task_words(text: str) -> list[str]:
    """The single words a task quotes (``'zero'`` … ``'nine'``), in order: the values its inputs are made of."""
    return list(dict.fromkeys(m.group(2) for m in _QUOTED.finditer(text)))


def _with_words(value: Any, words: Sequence[str]) -> Iterator[Any]:
    """An input made of the task's quoted words, with words it lacks added: the values its examples left out
    (``sort_numbers('three one five')`` → ``'three one five zero'``). Only an input every part of which the
    task quotes: one made of other things may not take these words at all."""
    if isinstance(value, str):
        parts = value.split()
    elif isinstance(value, list) and all(isinstance(v, str) for v in value):
        parts = list(value)
    else:
        return
    if not parts or len(words) < 2 or not set(parts) <= set(words):
        return
    for w in [w for w in words if w not in parts][:MAX_WORDS]:
        yield f"{value} {w}" if isinstance(value, str) else [*value, w]


def derive_calls(examples: Sequence[StatedExample], name: str, task: str = "") -> list[str]:
    """Calls of ``name`` on inputs near the stated examples' (one argument changed at a time), none of them a
    stated example, at most :data:`MAX_CALLS`, in a fixed order. ``task``: the task's text, whose quoted words
    are inputs too (:func:`_with_words`)."""
    stated = [c for ex in examples if (c := called_function(ex)) is not None and c.name == name]
    seen = {repr(c.args) for c in stated}
    given = {a for c in stated for a in c.args if isinstance(a, str)}
    words = [w for w in task_words(task) if w not in given]  # an example's own argument is not a word of the task
    out: list[str] = []
    for call in stated:
        args = call.args
        for i, value in enumerate(args):
            for variant in chain(_variants(value, [*args[:i], *args[i + 1:]]), _with_words(value, words)):
                changed = [*args[:i], variant, *args[i + 1:]]
                key = repr(changed)
                if key in seen:
                    continue
                seen.add(key)
                out.append(call.render(changed))
                if len(out) >= MAX_CALLS:
                    return out
    return out


def reference_messages(*, title: str, description: str, name: str) -> list[dict[str, str]]:
    return [
        {"role": "system", "content": "You are an expert Python programmer. You write correct, complete code."},
        {"role": "user", "content": f"TASK: {title}\n\n{head(description, 6000)}\n\nWrite the Python function "
                                    f"`{name}` this task describes, from its description alone. Reply with one "
                                    "```python code block holding the whole function and the imports it needs, "
                                    "and nothing else."},
    ]


def reference_code(reply: str | None, name: str) -> str | None:
    """The reply's code when it defines ``name`` and parses; None otherwise."""
    blocks: list[str] = _CODE.findall(reply or "") or ([reply] if reply else [])
    for block in blocks:
        try:
            tree = ast.parse(block)
        except (SyntaxError, ValueError):
            continue
        if any(isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef) and n.name == name for n in tree.body):
            return block
    return None
