"""What to do after an assessment: done, fix, retry, escalate, block or fail. Pure.

Budget: a failed assessment of a run that exited 0 gets up to ``max_fix_attempts`` targeted fixes; after that
(or straight away when the agent itself failed) a full retry, up to ``max_retries``. ``fix_attempts`` resets
on each retry and on nothing else, so without escalation a task runs at most
``(max_retries + 1) · (max_fix_attempts + 1)`` times.

Escalation (``retryPolicy``) has up to two levels, in this order: ``escalateModel`` (the same LLM agent on a
stronger model), then ``fallbackAgent``. With ``escalateAfter = k`` the k-th full retry and every later one
step up one level while levels remain: the escalation spends retries that were budgeted anyway. Without it,
each level is a new cycle after the retries are exhausted: one run plus its fixes, so escalation adds at
most ``levels · (max_fix_attempts + 1)`` runs. Then the task fails.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

Action = Literal["done", "fix", "retry", "escalate", "block", "fail"]


@dataclass(frozen=True)
class Counters:
    retries: int = 0
    fix_attempts: int = 0
    level: int = 0  # escalation level reached (0: the task's own agent and model)


@dataclass(frozen=True)
class Budget:
    max_retries: int
    max_fix_attempts: int


@dataclass(frozen=True)
class Target:
    kind: Literal["model", "agent"]
    value: str


@dataclass(frozen=True)
class Escalation:
    targets: tuple[Target, ...] = ()
    after: int | None = None  # escalateAfter: the retry number from which retries escalate


NO_ESCALATION = Escalation()


@dataclass(frozen=True)
class Decision:
    action: Action
    counters: Counters
    reason: str
    target: Target | None = None  # set when this decision moves to a new escalation level


def escalation_targets(*, escalate_model: str | None, fallback_agent: str | None,
                       agent_is_llm: bool) -> tuple[Target, ...]:
    """The levels a task may climb; a stronger model only means something for an LLM agent."""
    targets: list[Target] = []
    if escalate_model and agent_is_llm:
        targets.append(Target("model", escalate_model))
    if fallback_agent:
        targets.append(Target("agent", fallback_agent))
    return tuple(targets)


def decide(*, passed: bool, agent_ok: bool, counters: Counters, budget: Budget,
           side_effects: bool = False, escalation: Escalation = NO_ESCALATION, permanent: str | None = None,
           plateau: bool = False) -> Decision:
    """``permanent``: why the agent cannot run for this task whatever is tried again (the task fails at once).
    ``plateau``: the fix loop stopped improving the score (:func:`plateaued`): no more fixes, as when they are
    used up."""
    if passed and agent_ok:
        return Decision("done", counters, "all checks passed")
    if permanent is not None:
        return Decision("fail", counters, f"the agent cannot run this task: {permanent}")
    if side_effects:
        return Decision("block", counters, "task has side effects: approve a re-run with `polpo approve`")
    c = counters
    if agent_ok and c.fix_attempts < budget.max_fix_attempts and not plateau:
        return Decision("fix", Counters(c.retries, c.fix_attempts + 1, c.level),
                        f"fix attempt {c.fix_attempts + 1}/{budget.max_fix_attempts}")
    levels = len(escalation.targets)
    if c.retries < budget.max_retries:
        n = c.retries + 1
        if escalation.after is not None and n >= escalation.after and c.level < levels:
            target = escalation.targets[c.level]
            return Decision("retry", Counters(n, 0, c.level + 1),
                            f"retry {n}/{budget.max_retries}, escalated to {target.kind} {target.value}", target)
        return Decision("retry", Counters(n, 0, c.level), f"retry {n}/{budget.max_retries}")
    if c.level < levels:
        target = escalation.targets[c.level]
        return Decision("escalate", Counters(c.retries, 0, c.level + 1),
                        f"retries exhausted ({budget.max_retries}); escalating to {target.kind} {target.value}",
                        target)
    return Decision("fail", counters, f"retries exhausted ({budget.max_retries})"
                    + (", escalation exhausted" if levels else "")
                    + ("; the fixes stopped improving the score" if plateau else ""))


def plateaued(scores: Sequence[float], attempts: int, margin: float,
              improved: Sequence[bool] | None = None) -> bool:
    """The last ``attempts`` scores of a fix loop (in order) did not beat the best before them by ``margin``:
    another fix is not worth its cost (the quality-scoring plateau). False until there is a before.

    Scores within ``margin`` of each other are too close to tell apart; ``improved[i]`` says whether attempt
    ``i`` was judged better than the one before it side by side, in both orders
    (:mod:`polpo.review.pairwise`): a recent attempt judged better, and close to the best, is progress."""
    if len(scores) <= attempts:
        return False
    recent, before = max(scores[-attempts:]), max(scores[:-attempts])
    if recent >= before + margin:
        return False
    return not (improved is not None and any(improved[-attempts:]) and recent >= before - margin)


def max_runs(budget: Budget, escalation: Escalation = NO_ESCALATION) -> int:
    """The most runs a task can take under ``decide`` (interruptions by a crash not counted)."""
    base = (budget.max_retries + 1) * (budget.max_fix_attempts + 1)
    levels = len(escalation.targets)
    if escalation.after is not None:
        # retries from `after` on climb levels; only the levels they could not reach add cycles at the end
        reachable = max(0, budget.max_retries - escalation.after + 1)
        levels = max(0, levels - reachable)
    return base + levels * (budget.max_fix_attempts + 1)
