"""How a ``metric`` reads its number from a command's output, and how it judges it. Pure: text and numbers in.

**Reading.** The number is the last one the command printed on its standard output; with ``pattern``, the last
number in the pattern's last match (in its first group, when the pattern has groups), so ``TOTAL.*`` and
``Ran (\\d+) tests?`` both work. A number is an optional sign, digits with an optional decimal point, and an
optional exponent (``82.5``, ``-3``, ``.5``, ``1e-3``); ``1,234,567`` (groups of three) is one number. Digits
glued on their left to a letter, a digit, ``_`` or ``.`` belong to a word, not a number (``py311``, ``v2``).
A number too large for a float, or no number at all, is a reason instead of a value.

**Judging.** ``min`` and ``max`` are inclusive. With a baseline, "no worse" follows ``better``: with ``higher``
(the default) the value must be at least the baseline, with ``lower`` at most; ``tolerance`` loosens that by an
amount in the metric's units or by a percentage of the baseline (``"5%"``). Comparisons allow a rounding error
of 1e-9 (relative), as a number read twice from the same text is the same float anyway.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from polpo.checks.expectations import PERCENT, MetricExpectation

__all__ = ["NUMBER", "Judgement", "allowance", "fmt", "judge", "read_number"]

NUMBER = re.compile(r"(?<![\w.])[-+]?(?:\d{1,3}(?:,\d{3})+(?:\.\d+)?|\d+(?:\.\d+)?|\.\d+)(?:[eE][-+]?\d+)?")
_EPS = 1e-9


def fmt(v: float) -> str:
    """A value as people write it: ``80.1``, ``1234567``, ``1e+20`` (ten significant digits at most)."""
    return f"{v:.10g}"


def _last(found: Iterator[re.Match[str]]) -> re.Match[str] | None:
    last = None
    for last in found:  # noqa: B007 - the last one is wanted
        pass
    return last


def _value(text: str, offset: int, output: str) -> tuple[float, str] | str:
    """The last number in ``text`` (which starts at ``offset`` in ``output``) and its line, or why there is none."""
    found = _last(NUMBER.finditer(text))
    if found is None:
        return "no number"
    value = float(found.group().replace(",", ""))
    if not math.isfinite(value):
        return f"{found.group()!r} is too large to be a number polpo can compare"
    return value, _line_of(output, offset + found.start())


def read_number(output: str, pattern: str | None = None) -> tuple[float, str] | str:
    """``(value, the line it was read from)``, or why no number could be read (see the module docstring)."""
    if pattern is None:
        got = _value(output, 0, output)
        return "the command printed no number" if got == "no number" else got
    match = _last(re.finditer(pattern, output, re.MULTILINE))
    if match is None:
        return f"the command printed nothing that matches the pattern /{pattern}/"
    group = 1 if match.re.groups else 0
    text = match.group(group)
    if text is None:
        return f"the pattern /{pattern}/ matched, but its first group matched nothing"
    got = _value(text, match.start(group), output)
    return f"the pattern's match {text[:80]!r} holds no number" if got == "no number" else got


def _line_of(text: str, pos: int) -> str:
    """The line of ``text`` around ``pos``, stripped and cut to 200 characters."""
    start = text.rfind("\n", 0, pos) + 1
    end = text.find("\n", pos)
    line = text[start:end if end >= 0 else len(text)].strip()
    return line if len(line) <= 200 else line[:199] + "…"


def allowance(tolerance: float | str | None, baseline: float) -> float:
    """How much worse than ``baseline`` still passes: the tolerance itself, or its percentage of the baseline."""
    if tolerance is None:
        return 0.0
    if isinstance(tolerance, str):
        m = PERCENT.fullmatch(tolerance)
        return abs(baseline) * float(m.group(1)) / 100 if m else 0.0
    return float(tolerance)


@dataclass(frozen=True)
class Judgement:
    passed: bool
    message: str
    facts: dict[str, Any]
    """What was compared, as the check's ``metric`` record keeps it: value, min, max, baseline, better,
    tolerance, and ``limit`` (the worst value the baseline allowed)."""


def _at_least(v: float, limit: float) -> bool:
    return v >= limit - _EPS * max(1.0, abs(limit))


def _at_most(v: float, limit: float) -> bool:
    return v <= limit + _EPS * max(1.0, abs(limit))


def judge(value: float, exp: MetricExpectation, baseline: float | None, subject: str) -> Judgement:
    """The verdict on ``value``: within ``min``/``max``, and, with ``baseline: "before"``, no worse than
    ``baseline`` (None: none was measured, which fails: there is nothing to compare with)."""
    parts: list[str] = []
    passed = True
    facts: dict[str, Any] = {"value": value}
    if exp.min is not None:
        facts["min"] = exp.min
        ok = _at_least(value, exp.min)
        passed &= ok
        parts.append(f"at least the minimum {fmt(exp.min)}" if ok else f"below the minimum {fmt(exp.min)}")
    if exp.max is not None:
        facts["max"] = exp.max
        ok = _at_most(value, exp.max)
        passed &= ok
        parts.append(f"at most the maximum {fmt(exp.max)}" if ok else f"above the maximum {fmt(exp.max)}")
    if exp.baseline is not None:
        better = exp.direction
        facts.update(baseline=baseline, better=better)
        if exp.tolerance is not None:
            facts["tolerance"] = exp.tolerance
        if baseline is None:
            passed = False
            parts.append("no baseline was measured before the task ran: nothing to compare with")
        else:
            slack = allowance(exp.tolerance, baseline)
            limit = baseline - slack if better == "higher" else baseline + slack
            facts["limit"] = limit
            ok = _at_least(value, limit) if better == "higher" else _at_most(value, limit)
            passed &= ok
            gain = value - baseline if better == "higher" else baseline - value
            tol = f" by more than the tolerance {_tolerance_text(exp.tolerance)}" if slack else ""
            if not ok:
                said = f"worse than {fmt(baseline)} before the task{tol}"
            elif abs(gain) <= _EPS * max(1.0, abs(baseline)):
                said = f"the same as {fmt(baseline)} before the task"
            elif gain > 0:
                said = f"better than {fmt(baseline)} before the task"
            else:
                said = f"worse than {fmt(baseline)} before the task, within the tolerance " \
                       f"{_tolerance_text(exp.tolerance)}"
            parts.append(f"{said} ({better} is better)")
    return Judgement(passed, f"{subject} = {fmt(value)}: " + "; ".join(parts), facts)


def _tolerance_text(t: float | str | None) -> str:
    return t.strip() if isinstance(t, str) else fmt(float(t or 0))
