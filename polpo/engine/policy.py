"""What to do after an assessment: done, fix, retry, block or fail. Pure.

Budget: a failed assessment of a run that exited 0 gets up to ``max_fix_attempts`` targeted fixes; after that
(or straight away when the agent itself failed) a full retry, up to ``max_retries``. ``fix_attempts`` resets
on each retry, so a task runs at most ``(max_retries + 1) · (max_fix_attempts + 1)`` times.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

Action = Literal["done", "fix", "retry", "block", "fail"]


@dataclass(frozen=True)
class Counters:
    retries: int = 0
    fix_attempts: int = 0


@dataclass(frozen=True)
class Budget:
    max_retries: int
    max_fix_attempts: int


@dataclass(frozen=True)
class Decision:
    action: Action
    counters: Counters
    reason: str


def decide(*, passed: bool, agent_ok: bool, counters: Counters, budget: Budget,
           side_effects: bool = False) -> Decision:
    if passed and agent_ok:
        return Decision("done", counters, "all checks passed")
    if side_effects:
        return Decision("block", counters, "task has side effects: approve a re-run with `polpo approve`")
    if agent_ok and counters.fix_attempts < budget.max_fix_attempts:
        return Decision("fix", Counters(counters.retries, counters.fix_attempts + 1),
                        f"fix attempt {counters.fix_attempts + 1}/{budget.max_fix_attempts}")
    if counters.retries < budget.max_retries:
        return Decision("retry", Counters(counters.retries + 1, 0),
                        f"retry {counters.retries + 1}/{budget.max_retries}")
    return Decision("fail", counters, f"retries exhausted ({budget.max_retries})")


def max_runs(budget: Budget) -> int:
    """The most runs a task can take under ``decide`` (interruptions by a crash not counted)."""
    return (budget.max_retries + 1) * (budget.max_fix_attempts + 1)
