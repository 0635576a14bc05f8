"""Questions in motion (:mod:`polpo.model.questions`): asked by an attempt, answered by a person or by the timeout's
policy, received by the task's next attempt.

* **Asked** (:meth:`Questions.ask`, in the attempt's own transaction): the question row, ``question:asked`` (or, for
  a tool call, ``approval:requested`` with the tool and its arguments) and the task's move to ``awaiting_answer``
  (``awaiting_approval``). A command agent's output is a question when it looks like one (Polpo's heuristic) and,
  with a model to ask, the model agrees (:meth:`Questions.from_output`).
* **Answered** by ``polpo answer`` / ``approve`` / ``reject`` (the HTTP API and the web view send the same
  commands): the row records who said what, ``question:answered`` (``approval:resolved``) announces it, the task is
  ``pending`` again. These are the leader's decisions, like every person's command.
* **Timed out** (:meth:`Questions.tick`, the leader's timer on the injected clock): ``[questions] on_timeout``
  answers with the model (:mod:`.answerer`, in a task of its own), goes on with a note that nobody answered, or
  fails the task; ``on_approval_timeout`` refuses the call, approves it, or fails the task.
* **Received** by the task's next attempt (:meth:`Questions.for_attempt`): an LLM agent's conversation goes on from
  its snapshot, a command agent runs again with every answer in its prompt; the row records the attempt that
  received it before anything else happens, so a restart never delivers it twice.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

import orjson
from anyio.abc import TaskGroup

from polpo.changes.tracker import files_count
from polpo.clock import Clock, iso
from polpo.config import Config
from polpo.engine.answerer import Answerer
from polpo.engine.board import MissionBoard
from polpo.engine.lifecycle import Trigger
from polpo.engine.refused import Refused
from polpo.events.catalog import ApprovalRequested, ApprovalResolved, QuestionAnswered, QuestionAsked
from polpo.llm.secrets import redact
from polpo.model.questions import (
    Ask,
    Clarification,
    Question,
    QuestionKind,
    QuestionStatus,
    answer_source,
    delivery_text,
    looks_like_question,
    resumes,
)
from polpo.model.records import Attempt, Mission, Task
from polpo.model.status import AttemptStatus, TaskStatus
from polpo.store.protocol import Store
from polpo.store.tx import Tx

log = logging.getLogger("polpo.questions")

__all__ = ["Questions", "Received"]

TICK_EVERY = 1.0  # seconds between two looks for questions whose time is up (a read of the open ones)
_WAITING = {QuestionKind.QUESTION: TaskStatus.AWAITING_ANSWER, QuestionKind.TOOL: TaskStatus.AWAITING_APPROVAL}


@dataclass(frozen=True)
class Received:
    """What a task's next attempt receives of its questions."""

    clarifications: tuple[Clarification, ...] = ()  # its answered questions
    questions_left: int = 0
    resume: Question | None = None  # an LLM agent's conversation to go on from
    answered: Question | None = None  # a command agent's answered question, received by this run


class Questions:
    def __init__(self, cfg: Config, store: Store, clock: Clock, board: MissionBoard,
                 answerer: Answerer | None) -> None:
        self.cfg = cfg
        self.store = store
        self.clock = clock
        self.board = board
        self.answerer = answerer
        self._last_tick = -1e9
        self._answering: set[str] = set()  # questions a model is answering now

    # -- asked ----------------------------------------------------------------------------------------------
    def ask(self, tx: Tx, m: Mission, task: Task, attempt: Attempt, ask: Ask) -> Question:
        """Record ``ask`` in the attempt's transaction; the task waits for a person."""
        qc, now = self.cfg.questions, self.clock.now()
        tool = ask.kind is QuestionKind.TOOL
        timeout = qc.approval_timeout if tool else qc.timeout
        snapshot = orjson.loads(redact(orjson.dumps(ask.snapshot).decode())) if ask.snapshot is not None else None
        q = Question(id=f"{attempt.id}/q", task_id=task.id, mission_id=m.id, attempt_id=attempt.id, kind=ask.kind,
                     source=ask.source, text=ask.text, asked_at=now, arguments=ask.arguments, snapshot=snapshot,
                     expires_at=now + timeout)
        task.questions += 1
        tx.question(q)
        ids = {"mission_id": m.id, "task_id": task.id}
        expires = iso(q.expires_at) if q.expires_at is not None else None
        if tool:
            tx.event(ApprovalRequested(title=task.title, approve=f"polpo approve {task.id}",
                                       reject=f"polpo reject {task.id} --reason TEXT", timeout_at=expires,
                                       timeout_action=qc.on_approval_timeout, tool=ask.text,
                                       arguments=ask.arguments), **ids)
            self.board.transition(tx, task, Trigger.ASK_TOOL, f"waits for a person to approve {ask.text}")
        else:
            tx.event(QuestionAsked(question=ask.text, source=ask.source, agent=attempt.agent, attempt=attempt.number,
                                   answer=f'polpo answer {task.id} "…"', timeout_at=expires,
                                   on_timeout=qc.on_timeout), **ids)
            first = (ask.text.strip().splitlines() or ["(an empty question)"])[0]
            self.board.transition(tx, task, Trigger.ASK, f"asks a person: {first[:200]}")
        return q

    async def from_output(self, m: Mission, task: Task, attempt: Attempt) -> bool:
        """A command agent's attempt that ended with a question: asked (the task waits); False: it did not ask
        (or may ask no more), and its checks run."""
        if not attempt.agent_ok or not looks_like_question(attempt.stdout_tail, files_count(attempt.files)):
            return False
        if (await self.for_attempt(task, None)).questions_left <= 0:
            return False
        question: str | None = attempt.stdout_tail.strip()
        if self.cfg.questions.classify and self.answerer is not None:
            try:
                question = await self.answerer.is_question(attempt.stdout_tail)
            except Exception as exc:  # the classifier's failure is not the task's: its checks decide (Polpo)
                log.warning("%s: the question classifier failed (%s); its output goes to its checks", task.id, exc)
                return False
        if question is None:
            return False
        tx = self.store.tx()
        self.ask(tx, m, task, attempt, Ask(QuestionKind.QUESTION, "output", question))
        self.store.submit(tx)
        return True

    # -- received -------------------------------------------------------------------------------------------
    async def for_attempt(self, task: Task, last: Attempt | None) -> Received:
        """What the task's next attempt receives (``last``: its previous attempt); nothing read for a task that
        never asked."""
        if task.questions == 0:
            return Received(questions_left=self.cfg.questions.max_per_task)
        await self.store.flush()  # the answer that made the task ready may be submitted, not yet written: read it
        qs = await self.store.task_questions(task.id)
        asked = [q for q in qs if q.kind is QuestionKind.QUESTION]
        latest = qs[-1] if qs else None
        resume = latest if resumes(latest, last.id if last is not None else None,
                                   last is not None and last.status is AttemptStatus.INTERRUPTED) else None
        clarifications = tuple(Clarification(q.text, q.answer or "", delivery_text(q)) for q in asked
                               if q.status is not QuestionStatus.ASKED)
        answered = latest if latest is not None and latest.status is QuestionStatus.ANSWERED else None
        return Received(clarifications if resume is None else (), max(0, self.cfg.questions.max_per_task - len(asked)),
                        resume, answered)

    def deliverer(self, q: Question, attempt: Attempt) -> Callable[[str | None], Awaitable[None]]:
        """``deliver(result)``: ``q`` reached ``attempt`` (with an approved call's result), durable when it returns."""
        async def deliver(result: str | None) -> None:
            q.status, q.delivered_in = QuestionStatus.DELIVERED, attempt.id
            if result is not None:
                q.result = result
            await self.store.commit(self.store.tx().question(q))
        return deliver

    # -- a person -------------------------------------------------------------------------------------------
    async def answer(self, task_id: str, text: str, by: str) -> str:
        """``polpo answer TASK TEXT``."""
        task = self._waiting(task_id, QuestionKind.QUESTION)
        if not text.strip():
            raise Refused("the answer is empty: say something the agent can use")
        q = await self.open_question(task_id, QuestionKind.QUESTION)
        if q is None:
            raise Refused(f"task {task_id} has no question waiting for an answer")
        self._answered(q, task, text.strip(), by)
        return f"answered {task_id}: its agent goes on with the answer"

    async def open_question(self, task_id: str, kind: QuestionKind) -> Question | None:
        """The task's question of ``kind`` waiting for a person, when its task waits for one."""
        task = self.board.tasks.get(task_id)
        if task is None or task.status is not _WAITING[kind] or task.questions == 0:
            return None
        qs = await self.store.task_questions(task_id)
        latest = qs[-1] if qs else None
        return latest if latest is not None and latest.open and latest.kind is kind else None

    def decide_tool(self, task_id: str, q: Question, approved: bool, by: str, reason: str | None,
                    status: str | None = None) -> str:
        """``polpo approve`` / ``reject`` of a tool call (``status`` timeout: its approval timed out)."""
        task = self._waiting(task_id, QuestionKind.TOOL)
        q.status, q.approved, q.answer = QuestionStatus.ANSWERED, approved, reason
        q.answered_by, q.answered_at = by, self.clock.now()
        tx = self.store.tx().decided().question(q)
        tx.event(ApprovalResolved(status=status or ("approved" if approved else "rejected"), by=by, reason=reason,
                                  tool=q.text), mission_id=task.mission_id, task_id=task.id)
        if approved:
            self.board.transition(tx, task, Trigger.APPROVE, f"{q.text} approved by {by}")
        else:
            self.board.transition(tx, task, Trigger.REFUSE, f"{q.text} refused by {by}: {reason or 'no reason'}")
        self.store.submit(tx)
        self.board.make_ready(task)
        return (f"approved {q.text} for {task_id}: it runs when the agent goes on" if approved else
                f"refused {q.text} for {task_id}: the agent is told, and goes on without it")

    def _waiting(self, task_id: str, kind: QuestionKind) -> Task:
        task = self.board.tasks.get(task_id)
        if task is None:
            raise Refused(f"no running task {task_id!r}; see `polpo status --all`")
        if task.status is not _WAITING[kind]:
            raise Refused(f"task {task_id} is {task.status}, not waiting for "
                          + ("an answer" if kind is QuestionKind.QUESTION else "a tool call's approval"))
        return task

    def _answered(self, q: Question, task: Task, text: str, by: str) -> None:
        q.status, q.answer, q.answered_by, q.answered_at = QuestionStatus.ANSWERED, text, by, self.clock.now()
        tx = self.store.tx().decided().question(q)
        tx.event(QuestionAnswered(question=q.text, answer=text, by=by, source=answer_source(by)),
                 mission_id=task.mission_id, task_id=task.id)
        self.board.transition(tx, task, Trigger.ANSWER, f"answered by {by}")
        self.store.submit(tx)
        self.board.make_ready(task)

    # -- time -----------------------------------------------------------------------------------------------
    async def tick(self, tg: TaskGroup) -> int:
        """Apply the timeout's policy to every question whose time is up (the leader's timer, at most every
        :data:`TICK_EVERY` seconds); how many."""
        if time.monotonic() - self._last_tick < TICK_EVERY:
            return 0
        self._last_tick = time.monotonic()
        due = [d for d in await self.store.due_questions(iso(self.clock.now())) if d[0] not in self._answering]
        for qid, task_id, _, kind in due:
            q = await self.open_question(task_id, QuestionKind(kind))
            if q is None or q.id != qid:
                await self._withdraw(qid, task_id)
                continue
            if q.kind is QuestionKind.TOOL:
                self._tool_timed_out(q)
            elif self.cfg.questions.on_timeout == "fail":
                self._unanswered(q, "nobody answered its question in time ([questions] on_timeout = \"fail\")")
            elif self.cfg.questions.on_timeout == "answer" and self.answerer is not None:
                self._answering.add(q.id)
                tg.start_soon(self._model_answers, q)
            else:
                self._answered(q, self.board.tasks[task_id], self._late(), "timeout")
        return len(due)

    async def _withdraw(self, qid: str, task_id: str) -> None:
        """A question whose task no longer waits for it (its mission was cancelled…): it waits for nobody now."""
        await self.store.flush()  # its answer, submitted and not yet written, made its task stop waiting: keep it
        for q in await self.store.task_questions(task_id):
            if q.id == qid and q.open:
                q.status = QuestionStatus.WITHDRAWN
                self.store.submit(self.store.tx().decided().question(q))

    def _late(self) -> str:
        return f"Nobody answered within {self.cfg.questions.timeout.total_seconds():g} s."

    def _tool_timed_out(self, q: Question) -> None:
        action = self.cfg.questions.on_approval_timeout
        if action == "fail":
            self._unanswered(q, f"nobody approved its call of {q.text} in time (on_approval_timeout = \"fail\")")
            return
        wait = self.cfg.questions.approval_timeout.total_seconds()
        self.decide_tool(q.task_id, q, action == "approve", "timeout",
                         f"nobody answered within {wait:g} s (on_approval_timeout = \"{action}\")", "timeout")

    def _unanswered(self, q: Question, why: str) -> None:
        task = self.board.tasks[q.task_id]
        q.status, q.answered_by, q.answered_at = QuestionStatus.ANSWERED, "timeout", self.clock.now()
        tx = self.store.tx().decided().question(q)
        if q.kind is QuestionKind.TOOL:
            tx.event(ApprovalResolved(status="timeout", by="timeout", reason=why, tool=q.text),
                     mission_id=task.mission_id, task_id=task.id)
        self.board.transition(tx, task, Trigger.UNANSWERED, why)
        self.store.submit(tx)
        self.board.after_change(task)

    async def _model_answers(self, q: Question) -> None:
        assert self.answerer is not None
        task = self.board.tasks.get(q.task_id)
        try:
            if task is None:
                return
            try:
                text = await self.answerer.answer(self.board.mission_of(task), task, q.text)
                by = f"model:{self.answerer.model}"
            except Exception as exc:  # the model that answers for a person is down: the agent goes on without it
                log.warning("%s: the answering model failed (%s); the agent goes on without an answer", q.id, exc)
                text, by = f"{self._late()} The model that answers in their place failed too.", "timeout"
            current = await self.open_question(q.task_id, QuestionKind.QUESTION)
            if current is not None and current.id == q.id:  # a person may have answered meanwhile
                self._answered(current, task, text or self._late(), by if text else "timeout")
        finally:
            self._answering.discard(q.id)
