"""The task state machine: a pure table of (state, trigger) → state.

States keep Polpo's names so its users read the log the same way. Unlike Polpo, every change goes through
this table and is announced by a ``task:transition`` event — there is no "unsafe" side door.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Final

from polpo.model.status import TaskStatus

__all__ = ["STATES", "TRANSITIONS", "TRIGGERS", "WAITS_FOR", "InvalidTransition", "Trigger", "is_terminal",
           "next_state", "waiting_for"]


class Trigger(StrEnum):
    DISPATCH = "dispatch"
    SPAWNED = "spawned"
    INTERRUPTED = "interrupted"
    FINISHED = "finished"
    PASS = "pass"
    FIX = "fix"
    RETRY = "retry"
    ESCALATE = "escalate"
    EXHAUSTED = "exhausted"
    BLOCK = "block"
    APPROVE = "approve"
    DEPENDENCY_FAILED = "dependency_failed"
    GATE_FAILED = "gate_failed"
    MANUAL_RETRY = "manual_retry"
    REOPEN = "reopen"
    CANCEL = "cancel"
    SLA_FAIL = "sla_fail"
    INTERNAL_ERROR = "internal_error"
    OUTAGE = "outage"
    REASSESS = "reassess"
    RESUME = "resume"
    ASK_APPROVAL = "ask_approval"
    REJECT = "reject"
    BUDGET = "budget"
    BUDGET_HOLD = "budget_hold"
    NO_BASELINE = "no_baseline"
    HUMAN_PASS = "human_pass"
    ASK_REVIEW = "ask_review"
    REVIEWED = "reviewed"
    ASK = "ask"
    ASK_TOOL = "ask_tool"
    ANSWER = "answer"
    REFUSE = "refuse"
    UNANSWERED = "unanswered"


S = TaskStatus
T = Trigger
_OPEN: Final = (S.PENDING, S.ASSIGNED, S.IN_PROGRESS, S.REVIEW, S.AWAITING_APPROVAL, S.AWAITING_ANSWER, S.ON_HOLD,
                S.AWAITING_REVIEW)

STATES: Final = tuple(TaskStatus)

TRANSITIONS: Final[dict[tuple[TaskStatus, Trigger], TaskStatus]] = {
    (S.PENDING, T.DISPATCH): S.ASSIGNED,              # picked by the dispatcher; attempt row written
    (S.ASSIGNED, T.SPAWNED): S.IN_PROGRESS,           # the agent's process started
    (S.ASSIGNED, T.INTERRUPTED): S.PENDING,           # daemon stopped before the agent started
    (S.IN_PROGRESS, T.FINISHED): S.REVIEW,            # agent exited (any exit code, timeout or spawn error)
    (S.IN_PROGRESS, T.INTERRUPTED): S.PENDING,        # daemon stopped or crashed while the agent ran
    (S.REVIEW, T.PASS): S.DONE,
    (S.REVIEW, T.FIX): S.PENDING,                     # targeted fix with feedback
    (S.REVIEW, T.RETRY): S.PENDING,                   # full retry from scratch
    (S.REVIEW, T.ESCALATE): S.PENDING,                # retries used up: a stronger model or a fallback agent
    (S.REVIEW, T.EXHAUSTED): S.FAILED,                # retries used up
    (S.REVIEW, T.BLOCK): S.AWAITING_APPROVAL,         # sideEffects: a person must approve a re-run
    (S.AWAITING_APPROVAL, T.APPROVE): S.PENDING,
    (S.PENDING, T.ASK_APPROVAL): S.AWAITING_APPROVAL,  # approval "before": a person approves the first attempt
    (S.AWAITING_APPROVAL, T.REJECT): S.FAILED,        # `polpo reject TASK --reason`, or an approval timeout
    (S.PENDING, T.DEPENDENCY_FAILED): S.FAILED,
    (S.PENDING, T.GATE_FAILED): S.FAILED,
    (S.FAILED, T.MANUAL_RETRY): S.PENDING,            # `polpo retry TASK`
    (S.FAILED, T.REOPEN): S.PENDING,                  # its failed dependency was retried
    (S.FAILED, T.HUMAN_PASS): S.DONE,                 # `polpo override TASK --pass`: a person passed its work
    (S.REVIEW, T.OUTAGE): S.ON_HOLD,                  # the judge stayed unreachable: nobody's verdict
    (S.IN_PROGRESS, T.OUTAGE): S.ON_HOLD,             # the LLM agent's own model stayed unreachable
    (S.ON_HOLD, T.REASSESS): S.REVIEW,                # `polpo retry`: the assessment runs again, not the agent
    (S.ON_HOLD, T.RESUME): S.PENDING,                 # `polpo retry` after an agent's model outage
    (S.PENDING, T.BUDGET): S.FAILED,                  # its task's or mission's budget is spent: it does not start
    (S.REVIEW, T.BUDGET): S.FAILED,                   # the next call would not fit its budget: no fix, no retry
    (S.REVIEW, T.BUDGET_HOLD): S.ON_HOLD,             # the same with onBudget "hold": `polpo retry --budget`
    (S.REVIEW, T.ASK_REVIEW): S.AWAITING_REVIEW,      # the judge cannot tell: a person passes or fails the work
    (S.AWAITING_REVIEW, T.REVIEWED): S.REVIEW,        # a person's verdict: the assessment completes with it
    (S.ASSIGNED, T.NO_BASELINE): S.FAILED,            # a metric's baseline could not be measured: no agent ran
    (S.IN_PROGRESS, T.ASK): S.AWAITING_ANSWER,        # the LLM agent called ask_human: its attempt stops there
    (S.REVIEW, T.ASK): S.AWAITING_ANSWER,             # a command agent's output is a question (before any check)
    (S.IN_PROGRESS, T.ASK_TOOL): S.AWAITING_APPROVAL,  # a call approve_tools names waits for a person
    (S.AWAITING_ANSWER, T.ANSWER): S.PENDING,         # `polpo answer TASK TEXT` (or the timeout's policy)
    (S.AWAITING_APPROVAL, T.REFUSE): S.PENDING,       # a tool call refused: the agent goes on without it
    (S.AWAITING_ANSWER, T.UNANSWERED): S.FAILED,      # nobody answered in time and [questions] on_timeout = "fail"
    (S.AWAITING_APPROVAL, T.UNANSWERED): S.FAILED,    # nobody approved a call in time, on_approval_timeout = "fail"
    **{(s, T.CANCEL): S.FAILED for s in _OPEN},
    **{(s, T.SLA_FAIL): S.FAILED for s in _OPEN},
    **{(s, T.INTERNAL_ERROR): S.FAILED for s in _OPEN},  # a bug in polpo while handling the task
}

TRIGGERS: Final = tuple(sorted({t for _, t in TRANSITIONS}))

WAITS_FOR: Final[dict[tuple[TaskStatus, Trigger], str]] = {
    (S.PENDING, T.ASK_APPROVAL): "approval",          # approval "before": approve or reject its first attempt
    (S.REVIEW, T.BLOCK): "side_effects",              # sideEffects: approve its fix or retry
    (S.REVIEW, T.BUDGET_HOLD): "budget",              # onBudget "hold": raise its budget
    (S.REVIEW, T.OUTAGE): "judge",                    # the judge stayed unreachable: retry its assessment
    (S.IN_PROGRESS, T.OUTAGE): "provider",            # the agent's model stayed unreachable: retry it
    (S.IN_PROGRESS, T.ASK): "question",               # its agent asked a person: answer it
    (S.REVIEW, T.ASK): "question",
    (S.IN_PROGRESS, T.ASK_TOOL): "tool",              # its agent waits to make a call approve_tools names
    (S.REVIEW, T.ASK_REVIEW): "review",               # the judge could not tell: pass or fail the work
}
"""What a task waits for from a person after a step (stored as ``tasks.waiting_for``; :mod:`polpo.attention` says
what to do about each). A step that is not here ends the wait."""


class InvalidTransition(ValueError):
    def __init__(self, state: str, trigger: str) -> None:
        allowed = sorted(t for (s, t) in TRANSITIONS if s == state)
        super().__init__(
            f"invalid transition: {state!r} on {trigger!r} (allowed: {', '.join(allowed) or 'none'})"
        )
        self.state = state
        self.trigger = trigger


def next_state(state: TaskStatus | str, trigger: Trigger | str) -> TaskStatus:
    try:
        return TRANSITIONS[(TaskStatus(state), Trigger(trigger))]
    except (KeyError, ValueError):
        raise InvalidTransition(str(state), str(trigger)) from None


def waiting_for(state: TaskStatus, trigger: Trigger) -> str | None:
    """What a task that was in ``state`` waits for from a person after ``trigger`` (None: nothing)."""
    return WAITS_FOR.get((state, trigger))


def is_terminal(state: str) -> bool:
    return state in (TaskStatus.DONE, TaskStatus.FAILED)
