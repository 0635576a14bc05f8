"""Work the judge cannot decide waits for a person: ``awaiting_review``, and the person's verdict.

With a calibrated rule (``[judge] calibration``, :mod:`polpo.review.rule`) the review panel passes, fails, or says
it cannot tell; an assessment with such a check and no failure is stored ``undecided`` (passed unknown,
:mod:`polpo.assessment.pipeline`). The runner then calls :func:`wait_for_person`: the task goes ``review →
awaiting_review`` (trigger ``ask_review``) with ``assessment:needs-person``, which names the commands that answer
it. Nothing runs for it meanwhile — no fix, no retry, no agent — and an isolated task keeps its worktree for the
person to look at. It is stored, so a restart (``kill -9`` included) leaves it waiting: recovery resumes only tasks
in ``review``.

The person's verdict (:meth:`PersonReview.answer`) is decided by the mission's leader, as an approval is: in one
transaction the undecided check becomes the person's (its ``person`` field; its score the person's when they give
one), the verdict is stored as an override row — a label for ``polpo labels export`` — and the task goes back to
``review`` (trigger ``reviewed``) and is offered to resume its assessment. Whichever node claims it completes that
same assessment with the person's verdict, running nothing, and decides as after any assessment: a pass is done
(merged first when isolated), a fail goes on as a failed assessment would — a fix told the reviewers' and the
person's reasons, a retry, or the end — counted as usual. A crash after the verdict resumes the same way.

Which commands: ``polpo approve TASK`` passes the work and ``polpo reject TASK --reason TEXT`` fails it — the words
an approval already uses for "go on" and "stop here", and a fail needs a reason since the next attempt is told it.
``polpo override TASK --pass|--fail`` does the same, for whoever thinks of it as overruling the judge.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Any

from polpo.assessment.pipeline import Verdict, combine_scores
from polpo.checks.base import CheckOutcome
from polpo.clock import Clock, iso
from polpo.engine.board import MissionBoard
from polpo.engine.lifecycle import Trigger
from polpo.engine.overrides import human_score
from polpo.engine.refused import Refused
from polpo.events.catalog import AssessmentNeedsPerson, AssessmentPersonVerdict
from polpo.model.records import Attempt, Task
from polpo.model.status import TaskStatus
from polpo.store.protocol import Store

__all__ = ["VERDICT_COMMANDS", "PersonReview", "review_commands", "wait_for_person"]

VERDICT_COMMANDS = frozenset({"approve", "reject", "override"})


def review_commands(task_id: str) -> tuple[str, str]:
    """The commands that pass and fail a task awaiting review, as a person types them."""
    return f"polpo approve {task_id}", f"polpo reject {task_id} --reason TEXT"


def wait_for_person(store: Store, board: MissionBoard, task: Task, attempt: Attempt, verdict: Verdict) -> None:
    """The judge cannot tell (``verdict.undecided``): ``task`` waits for a person; nothing runs for it meanwhile."""
    reason = verdict.undecided or "the judge cannot tell"
    approve, reject = review_commands(task.id)
    tx = store.tx()
    board.transition(tx, task, Trigger.ASK_REVIEW,
                     f"waiting for a person's review: {reason}; `{approve}` passes it, `{reject}` fails it")
    tx.event(AssessmentNeedsPerson(title=task.title, attempt=attempt.number, reason=reason,
                                   global_score=combine_scores(verdict.checks)[0], approve=approve, reject=reject),
             mission_id=task.mission_id, task_id=task.id)
    store.submit(tx)


def _given_score(value: object, passed: bool) -> tuple[float, float | None]:
    """(the label's score, the score the person gave or None); a score that is not 1..5 is refused."""
    if value is None:
        return human_score(passed, None), None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise Refused(f"the score must be a number from 1 to 5 (got {value!r})")
    score = human_score(passed, value)
    return score, score


def _decided(c: CheckOutcome, person: dict[str, Any]) -> CheckOutcome:
    """The undecided check, decided by the person (the panel's message and score kept beside theirs)."""
    verdict = "passed" if person["passed"] else "failed"
    return replace(c, passed=person["passed"], undecided=None, person={**person, "why": c.undecided,
                                                                        "panelScore": c.global_score},
                   global_score=c.global_score if person["score"] is None else person["score"],
                   message=f"{verdict} by {person['by']}, a person: {person['reason']} (the judge could not tell: "
                           f"{c.message})")


class PersonReview:
    """The person's verdict on a task awaiting review (the leader's, like every command)."""

    def __init__(self, store: Store, clock: Clock, board: MissionBoard, resume: Callable[[Task], None]) -> None:
        self.store = store
        self.clock = clock
        self.board = board
        self.resume = resume  # the dispatcher's: the task's assessment completes on whichever node claims it

    async def answer(self, kind: str, task_id: str, args: dict[str, Any]) -> str | None:
        """``approve`` passes, ``reject`` fails, ``override`` does what its ``passed`` says; None when the task
        does not await review (the command is then what it always was)."""
        task = self.board.tasks.get(task_id)
        if kind not in VERDICT_COMMANDS or task is None or task.status is not TaskStatus.AWAITING_REVIEW:
            return None
        passed = kind == "approve" or (kind == "override" and bool(args.get("passed")))
        by = str(args.get("by") or "user")
        reason = str(args.get("reason") or args.get("note") or "").strip()
        if not passed and not reason:
            raise Refused(f"say why {task_id} fails: --reason TEXT (its next attempt is told it)")
        label, given = _given_score(args.get("score"), passed)
        attempt = self.board.attempts.get(task_id)
        assessment = await self.store.open_assessment(attempt.id) if attempt is not None else None
        if task.status is not TaskStatus.AWAITING_REVIEW:  # decided while the store was read (a cancel)
            raise Refused(f"task {task_id} is {task.status} now, not awaiting review")
        undecided = [c for c in assessment.checks if c.undecided is not None] if assessment is not None else []
        if attempt is None or assessment is None or not undecided:
            raise Refused(f"task {task_id} awaits review, but its undecided assessment is not in the store")
        now = self.clock.now()
        said = reason or "approved"
        person = {"passed": passed, "by": by, "reason": said, "score": given, "at": iso(now)}
        tx = self.store.tx().decided()
        for c in undecided:
            tx.check(assessment.id, task.id, _decided(c, person), now)
        tx.override((task.id, task.mission_id, int(passed), label, None, combine_scores(assessment.checks)[0],
                     attempt.id, said, by, iso(now)))
        tx.event(AssessmentPersonVerdict(attempt=attempt.number, passed=passed, score=given, reason=said, by=by),
                 mission_id=task.mission_id, task_id=task.id)
        self.board.transition(tx, task, Trigger.REVIEWED, f"{'passed' if passed else 'failed'} by {by}: {said}")
        self.store.submit(tx)
        self.resume(task)
        if passed:
            return f"{task_id}: passed by {by}; it is done once its assessment completes"
        return f"{task_id}: failed by {by}; a fix, a retry or the end follows, as after a failed assessment"
