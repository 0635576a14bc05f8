"""Every status and kind the daemon records, as ``StrEnum``s.

They are ``str`` subclasses, so rows, events and JSON keep the plain names ("pending", "done"…) that people
read in the log and that Polpo uses, while the code gets a closed set that mypy checks.
"""

from __future__ import annotations

from enum import StrEnum

__all__ = ["AssessmentStatus", "AttemptKind", "AttemptStatus", "GateStatus", "MissionStatus",
           "SourceOutcome", "StopReason", "TaskStatus"]


class TaskStatus(StrEnum):
    PENDING = "pending"
    ASSIGNED = "assigned"              # picked by the dispatcher; attempt row written
    IN_PROGRESS = "in_progress"        # the agent runs
    REVIEW = "review"                  # the agent finished; checks run
    AWAITING_APPROVAL = "awaiting_approval"  # a person must approve: a sideEffects re-run, a first run, a tool call
    AWAITING_ANSWER = "awaiting_answer"  # its agent asked a person a question (polpo.model.questions)
    ON_HOLD = "on_hold"                # the judge (or the agent's model) stayed unreachable: `polpo retry` resumes
    AWAITING_REVIEW = "awaiting_review"  # the judge cannot tell: a person passes or fails the work
    DONE = "done"
    FAILED = "failed"

    @property
    def terminal(self) -> bool:
        return self in _TERMINAL_TASK


_TERMINAL_TASK = frozenset({TaskStatus.DONE, TaskStatus.FAILED})


class MissionStatus(StrEnum):
    RUNNING = "running"
    CANCELLING = "cancelling"          # cancel requested; running agents are being stopped
    COMPLETED = "completed"
    FAILED = "failed"
    CANCELLED = "cancelled"

    @property
    def open(self) -> bool:
        return self in (MissionStatus.RUNNING, MissionStatus.CANCELLING)


class AttemptStatus(StrEnum):
    STARTING = "starting"              # row durable, process not started yet
    RUNNING = "running"
    FINISHED = "finished"              # the agent's result is stored
    INTERRUPTED = "interrupted"        # the daemon stopped or crashed while the agent ran

    @property
    def live(self) -> bool:
        return self in (AttemptStatus.STARTING, AttemptStatus.RUNNING)


class AttemptKind(StrEnum):
    """Why an attempt runs; an assessment's trigger is one of these, or ``judge`` (re-assessed after a correction)."""

    INITIAL = "initial"
    FIX = "fix"
    RETRY = "retry"
    JUDGE = "judge"


class AssessmentStatus(StrEnum):
    RUNNING = "running"
    COMPLETE = "complete"
    UNDECIDED = "undecided"            # the judge cannot tell (passed stays unknown): a person decides it


class GateStatus(StrEnum):
    WAITING = "waiting"
    PASSED = "passed"
    FAILED = "failed"


class SourceOutcome(StrEnum):
    """What became of a mission file's bytes."""

    ACCEPTED = "accepted"
    REJECTED = "rejected"
    BUSY = "busy"                      # edited while its mission still runs
    SCHEDULED = "scheduled"            # a schedule was made from them (polpo.engine.schedules)


class StopReason(StrEnum):
    """Why a running task was stopped from outside its runner."""

    CANCEL = "cancel"
    SHUTDOWN = "shutdown"
    SLA = "sla"
