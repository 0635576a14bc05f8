"""The task state machine: every allowed transition, and every other (state, trigger) pair refused."""

from __future__ import annotations

import itertools

import pytest

from polpo.engine.lifecycle import STATES, TRANSITIONS, TRIGGERS, InvalidTransition, is_terminal, next_state

EXPECTED = {
    ("pending", "dispatch"): "assigned",
    ("assigned", "spawned"): "in_progress",
    ("assigned", "interrupted"): "pending",
    ("in_progress", "finished"): "review",
    ("in_progress", "interrupted"): "pending",
    ("review", "pass"): "done",
    ("review", "fix"): "pending",
    ("review", "retry"): "pending",
    ("review", "escalate"): "pending",
    ("review", "exhausted"): "failed",
    ("review", "block"): "awaiting_approval",
    ("awaiting_approval", "approve"): "pending",
    ("pending", "ask_approval"): "awaiting_approval",
    ("awaiting_approval", "reject"): "failed",
    ("pending", "dependency_failed"): "failed",
    ("pending", "gate_failed"): "failed",
    ("failed", "manual_retry"): "pending",
    ("failed", "reopen"): "pending",
    ("failed", "human_pass"): "done",  # `polpo override TASK --pass`: a person passed failed work
    ("review", "outage"): "on_hold",
    ("in_progress", "outage"): "on_hold",
    ("on_hold", "reassess"): "review",
    ("on_hold", "resume"): "pending",
    ("pending", "budget"): "failed",
    ("review", "budget"): "failed",
    ("review", "budget_hold"): "on_hold",
    ("review", "ask_review"): "awaiting_review",  # the judge cannot tell: a person decides
    ("awaiting_review", "reviewed"): "review",  # a person's verdict: the assessment completes with it
    ("awaiting_review", "cancel"): "failed",
    ("awaiting_review", "sla_fail"): "failed",
    ("awaiting_review", "internal_error"): "failed",
    ("assigned", "no_baseline"): "failed",
    ("on_hold", "cancel"): "failed",
    ("on_hold", "sla_fail"): "failed",
    ("on_hold", "internal_error"): "failed",
    ("pending", "cancel"): "failed",
    ("assigned", "cancel"): "failed",
    ("in_progress", "cancel"): "failed",
    ("review", "cancel"): "failed",
    ("awaiting_approval", "cancel"): "failed",
    ("pending", "sla_fail"): "failed",
    ("assigned", "sla_fail"): "failed",
    ("in_progress", "sla_fail"): "failed",
    ("review", "sla_fail"): "failed",
    ("awaiting_approval", "sla_fail"): "failed",
    ("pending", "internal_error"): "failed",
    ("assigned", "internal_error"): "failed",
    ("in_progress", "internal_error"): "failed",
    ("review", "internal_error"): "failed",
    ("awaiting_approval", "internal_error"): "failed",
    # an agent that asks a person (polpo.model.questions)
    ("in_progress", "ask"): "awaiting_answer",  # ask_human: the attempt stops at the question
    ("review", "ask"): "awaiting_answer",  # a command agent's output is a question
    ("in_progress", "ask_tool"): "awaiting_approval",  # a call approve_tools names
    ("awaiting_answer", "answer"): "pending",
    ("awaiting_approval", "refuse"): "pending",  # the call refused: the agent goes on without it
    ("awaiting_answer", "unanswered"): "failed",
    ("awaiting_approval", "unanswered"): "failed",
    ("awaiting_answer", "cancel"): "failed",
    ("awaiting_answer", "sla_fail"): "failed",
    ("awaiting_answer", "internal_error"): "failed",
}


@pytest.mark.parametrize(("state", "trigger"), sorted(EXPECTED))
def test_allowed_transition(state: str, trigger: str) -> None:
    assert next_state(state, trigger) == EXPECTED[(state, trigger)]


def test_table_is_exactly_the_expected_one() -> None:
    assert dict(TRANSITIONS) == EXPECTED


@pytest.mark.parametrize(
    ("state", "trigger"), [p for p in itertools.product(STATES, TRIGGERS) if p not in EXPECTED]
)
def test_every_other_pair_is_refused(state: str, trigger: str) -> None:
    with pytest.raises(InvalidTransition) as err:
        next_state(state, trigger)
    assert state in str(err.value) and trigger in str(err.value)


def test_done_is_final() -> None:
    for trigger in TRIGGERS:
        with pytest.raises(InvalidTransition, match="allowed: none"):
            next_state("done", trigger)


def test_terminal_states() -> None:
    assert [s for s in STATES if is_terminal(s)] == ["done", "failed"]


def test_happy_path_reaches_done() -> None:
    s = "pending"
    for trigger in ("dispatch", "spawned", "finished", "pass"):
        s = next_state(s, trigger)
    assert s == "done"
