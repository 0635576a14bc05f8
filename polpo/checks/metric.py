"""``metric``: a number a command prints, judged against ``min``/``max`` and against its value before the task ran.

The command runs as a ``test``'s does (:func:`polpo.checks.command.run_shell`: bash in the workspace, its own
process group, a timeout, the minimal environment plus ``POLPO_WORKSPACE`` and the attempt's marker), with
``POLPO_METRIC_PHASE`` set to ``before`` (measuring the baseline) or ``after`` (the check). It must exit 0 and
print a number (:func:`polpo.checks.metric_rules.read_number`); otherwise there is no value and the check fails
saying why, with the end of the command's output. ``baseline: "before"`` compares with the value
:mod:`polpo.engine.baselines` measured before the task's first attempt, stored and reused by every fix and retry;
the check is given it in its context. The expectation judge may not correct a metric: its number and the way it
is measured are the mission's bar, and a baseline was measured with that very command.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from polpo.checks.base import CheckContext, CheckOutcome, CheckType
from polpo.checks.command import failure_details, failure_reason, run_shell
from polpo.checks.expectations import MetricExpectation
from polpo.checks.labels import command_label, truncate
from polpo.checks.metric_rules import fmt, judge, read_number
from polpo.clock import Clock

__all__ = ["PHASE", "Measurement", "Metric", "MetricExpectation", "label", "measure", "subject"]

PHASE = "POLPO_METRIC_PHASE"
TAIL = 800  # characters of each output stream shown when no number could be read


@dataclass(frozen=True)
class Measurement:
    """One run of a metric's command: the value and the line it was read from, or why there is none."""

    value: float | None
    line: str = ""
    problem: str | None = None
    details: str | None = None  # the end of the output, when there is no value
    duration: float = 0.0


def _no_number_details(stdout: str, stderr: str) -> str:
    out = stdout.rstrip()
    lines = [f"its output ended with:\n{out[-TAIL:]}" if out else "its output was empty"]
    if stderr.strip():
        lines.append(f"its standard error ended with:\n{stderr.rstrip()[-TAIL:]}\n(only the standard output is "
                     "read: add 2>&1 to the command to read both)")
    return "\n".join(lines)


async def measure(exp: MetricExpectation, *, workspace: Path, clock: Clock, timeout: float,  # noqa: ASYNC109
                  phase: Literal["before", "after"], extra_env: Mapping[str, str] | None = None) -> Measurement:
    """Run the metric's command once and read its number (the timeout kills the command's whole group)."""
    start = clock.monotonic()
    proc = await run_shell(exp.command, workspace=workspace, clock=clock, timeout=timeout,
                           extra_env={**(extra_env or {}), PHASE: phase})
    duration = round(max(0.0, clock.monotonic() - start), 4)
    reason = failure_reason(proc, timeout)
    if reason is not None:
        return Measurement(None, problem=f"the command failed ({reason})", details=failure_details(proc),
                           duration=duration)
    got = read_number(proc.stdout_tail, exp.pattern)
    if isinstance(got, str):
        return Measurement(None, problem=got, details=_no_number_details(proc.stdout_tail, proc.stderr_tail),
                           duration=duration)
    return Measurement(got[0], line=got[1], duration=duration)


def label(exp: MetricExpectation) -> str:
    """The check's label: its name, else its command's first line."""
    return truncate(exp.name) if exp.name else command_label("metric", exp.command)


def subject(exp: MetricExpectation) -> str:
    """What a message calls the metric: its name, else its command."""
    return exp.name or f"`{command_label('metric', exp.command)}`"


def _bounds(exp: MetricExpectation) -> dict[str, Any]:
    out: dict[str, Any] = {k: v for k, v in (("min", exp.min), ("max", exp.max)) if v is not None}
    if exp.baseline is not None:
        out["better"] = exp.direction
    return out


class Metric(CheckType):
    type = "metric"
    rank = 1
    model = MetricExpectation

    def label(self, exp: MetricExpectation) -> str:
        return label(exp)

    def describe(self, exp: Mapping[str, Any]) -> str:
        rules = [f"at least {fmt(float(exp['min']))}" if exp.get("min") is not None else "",
                 f"at most {fmt(float(exp['max']))}" if exp.get("max") is not None else "",
                 f"no {'higher' if exp.get('better') == 'lower' else 'lower'} than before your work"
                 if exp.get("baseline") else ""]
        what = f" ({exp['name']})" if exp.get("name") else ""
        return f"metric: `{exp.get('command')}` prints a number{what} that must be {', '.join(r for r in rules if r)}"

    async def run(self, exp: MetricExpectation, ctx: CheckContext) -> CheckOutcome:
        timeout = exp.timeout.total_seconds() if exp.timeout is not None else ctx.check_timeout
        m = await measure(exp, workspace=ctx.workspace, clock=ctx.clock, timeout=timeout, phase="after",
                          extra_env=ctx.env)
        who = subject(exp)
        if m.value is None:
            facts = {"value": None, "problem": m.problem, **_bounds(exp)}
            if exp.baseline is not None:
                facts["baseline"] = ctx.baselines.get(ctx.index)
            return CheckOutcome(self.type, label(exp), False, f"{who}: no value: {m.problem}", m.details,
                                m.duration, metric=facts)
        baseline = ctx.baselines.get(ctx.index) if exp.baseline is not None else None
        verdict = judge(m.value, exp, baseline, who)
        details = f"read from the line: {m.line}"
        if baseline is not None:
            details += (f"\nbaseline {fmt(baseline)}, measured before the task's first attempt; the worst value it "
                        f"allows is {fmt(verdict.facts['limit'])} ({exp.direction} is better)")
        return CheckOutcome(self.type, label(exp), verdict.passed, verdict.message, details, m.duration,
                            metric={**verdict.facts, "line": m.line})
