"""Cascaded tiers (agent-judge's ``CascadedJury``): which checks run together, and what each tier's result means.

A task's ``tiers`` run in order; within a tier the checks run cheapest first. A tier's policy turns its results
into a decision (pure, :func:`tier_decision`):

* ``REJECT_ON_ANY_FAIL`` — a failed check rejects: the assessment fails here and later tiers never run; when
  all pass the cascade goes on. An error (the judge was unreachable) leaves the assessment undecided: it is
  retried later, since the check that could have rejected never ran.
* ``ACCEPT_ON_ALL_PASS`` — all passed accepts at once (later tiers, LLM reviews included, never run);
  otherwise — a failure or an error — the cascade escalates to the next tier.
* ``FINAL_TIER`` — the last tier; its result is the verdict (a failure fails, else an error leaves it undecided).

A check the judge could not decide (``undecided``: a calibrated rule put its score where the panel cannot tell,
:mod:`polpo.review.rule`) is neither a pass nor a fail: a rejecting or final tier with one and no failure decides
``person`` — the assessment waits for a person's verdict (the task is ``awaiting_review``) — after any error,
which is tried again first; an accepting tier escalates, as for an error.

Plain ``expectations`` are the implied cascade that has always been polpo's order: the checks that do not need a
successful agent (files, commands) as a ``REJECT_ON_ANY_FAIL`` tier named ``checks``, then the rest (the LLM
reviews) as the ``FINAL_TIER`` named ``review``; a task with only one kind has the one final tier.
A check that needs a successful agent is not run (``skipped``) when the agent failed or a check of the same tier
failed before it; a skipped check counts as not passed.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

from polpo.checks.registry import check_for

__all__ = ["ACCEPT", "FINAL", "POLICIES", "REJECT", "Decision", "TierPlan", "plan", "tier_decision"]

REJECT, ACCEPT, FINAL = "REJECT_ON_ANY_FAIL", "ACCEPT_ON_ALL_PASS", "FINAL_TIER"
POLICIES = (REJECT, ACCEPT, FINAL)
Decision = Literal["pass", "fail", "error", "person", "next"]
Result = Literal["passed", "failed", "error", "undecided", "skipped"]


@dataclass(frozen=True)
class TierPlan:
    name: str
    policy: str
    indices: tuple[int, ...]
    """Positions in the task's flat expectation list, in the order they run (cheapest first)."""
    explicit: bool = True


def _by_rank(indices: Sequence[int], exps: Sequence[Any]) -> tuple[int, ...]:
    return tuple(sorted(indices, key=lambda i: (check_for(exps[i].type).rank, i)))


def plan(tiers: Sequence[Any] | None, exps: Sequence[Any]) -> list[TierPlan]:
    """The tiers of a task: its own (``name``, ``policy``, ``expectations`` each), else the implied cascade."""
    if tiers:
        out, start = [], 0
        for t in tiers:
            n = len(t.expectations)
            out.append(TierPlan(t.name, t.policy, _by_rank(range(start, start + n), exps)))
            start += n
        return out
    cheap = [i for i, e in enumerate(exps) if not check_for(e.type).needs_agent_success]
    costly = [i for i, e in enumerate(exps) if check_for(e.type).needs_agent_success]
    if cheap and costly:
        return [TierPlan("checks", REJECT, _by_rank(cheap, exps), False),
                TierPlan("review", FINAL, _by_rank(costly, exps), False)]
    if exps:
        return [TierPlan("review" if costly else "checks", FINAL, _by_rank(range(len(exps)), exps), False)]
    return []


def tier_decision(policy: str, results: Sequence[Result]) -> Decision:
    """What a tier's check results mean under its policy (see the module docstring). Pure."""
    if policy == ACCEPT:
        return "pass" if all(r == "passed" for r in results) else "next"
    if any(r in ("failed", "skipped") for r in results):
        return "fail"
    if "error" in results:
        return "error"
    if "undecided" in results:
        return "person"
    return "next" if policy == REJECT else "pass"
