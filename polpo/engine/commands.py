"""What a person asks of running work: cancel a mission, retry a failed task (or release one on hold after an
outage), approve a blocked one, pass or fail one awaiting review (:mod:`.person_review`), run a file's identical
bytes again (``rerun``, from ``polpo submit --force``).

The CLI queues these in the store's command inbox (a CLI has no other channel into a running daemon); the
daemon polls the inbox every ``COMMAND_POLL`` seconds — never on a task's path — and answers in the same row.
An SLA violation with ``violation_action = "fail"`` comes through here too.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import replace
from typing import TYPE_CHECKING, Any

import anyio
from anyio.abc import TaskGroup

from polpo.clock import Clock
from polpo.command_args import decode
from polpo.config import Config
from polpo.engine.board import MissionBoard, wire
from polpo.engine.budget import budget
from polpo.engine.dispatcher import Dispatcher
from polpo.engine.human_pass import pass_by_person, why_not_passed
from polpo.engine.lifecycle import Trigger
from polpo.engine.overrides import human_score
from polpo.engine.people import PEOPLE_COMMANDS, People, not_waiting
from polpo.engine.person_review import VERDICT_COMMANDS, PersonReview, review_commands
from polpo.engine.questions import Questions
from polpo.engine.refused import Refused
from polpo.engine.reopen import reopenable
from polpo.engine.schedules import SCHEDULE_COMMANDS, Scheduler, ScheduleRefused
from polpo.engine.spend_book import SpendBook
from polpo.engine.spend_rules import Limit
from polpo.events.catalog import MissionCancelled, TaskApproved, TaskRetry, TaskStopRequested
from polpo.model.questions import QuestionKind
from polpo.model.records import Mission, Task
from polpo.model.status import AttemptKind, AttemptStatus, GateStatus, MissionStatus, StopReason, TaskStatus
from polpo.store import claim_writes
from polpo.store.errors import StoreError
from polpo.store.identity import StoreLost
from polpo.store.outage_wait import OutageWait
from polpo.store.protocol import Store
from polpo.store.tx import OUT_OF_TERM, Tx

if TYPE_CHECKING:
    from polpo.engine.admission import Admission

log = logging.getLogger("polpo.commands")

__all__ = ["COMMAND_POLL", "SLA_REASON", "CommandRefused", "Commands"]

COMMAND_POLL = 0.25  # seconds
SLA_REASON = "SLA violated: deadline passed"


class CommandRefused(Exception):
    """A command that does not apply; the message says why."""


def retry_target(target: str) -> tuple[str, Limit | None]:
    """``TASK``, or the task with the budget ``polpo retry --budget USD --tokens N`` raised it to (its ``usd`` and
    ``tokens`` arguments, :mod:`polpo.command_args`)."""
    task_id, args = decode(target)
    if not args:
        return task_id, None
    for key, value in args.items():
        if key not in ("usd", "tokens") or isinstance(value, bool) or not isinstance(value, int | float) or not (
                0 < value < 1e12):
            raise CommandRefused(f"retry {task_id}: {key}={value!r} is not usd=AMOUNT or tokens=COUNT (positive)")
    usd, tokens = args.get("usd"), args.get("tokens")
    return task_id, Limit(float(usd) if usd is not None else None, int(tokens) if tokens is not None else None)


class Commands:
    def __init__(self, cfg: Config, store: Store, clock: Clock, board: MissionBoard, dispatcher: Dispatcher,
                 load: Callable[[str], Awaitable[Mission | None]], admission: Admission | None = None,
                 schedules: Scheduler | None = None, spend: SpendBook | None = None,
                 questions: Questions | None = None) -> None:
        self.cfg = cfg
        self.schedules = schedules  # pause / resume / remove a schedule
        self.spend = spend  # `polpo retry TASK --budget`: the task's raised budget (polpo.engine.spend_book)
        self.admission = admission  # what each file's bytes became (for rerun)
        self.store = store
        self.clock = clock
        self.board = board
        self.dispatcher = dispatcher
        self._load = load  # a finished mission, read back into the board (for a retry)
        self.people = People(store, clock, board)  # resume, reject, override: what a person says
        self.reviews = PersonReview(store, clock, board, dispatcher.resume)  # work the judge could not decide
        self.questions = questions or Questions(cfg, store, clock, board, None)  # answers, tool calls' approvals
        self._timers_away = OutageWait("the leader's timer loop", log)  # delays, approvals, questions

    async def cancel(self, mid: str, by: str = "user") -> str:
        """Cancel a mission; with several daemons, first take its tasks back from the cluster's queue."""
        m = self.board.missions.get(mid)
        if m is None:
            raise CommandRefused(f"mission {mid!r} is not running")
        held = await self._seize([t for t in m.tasks.values() if not t.terminal])
        if mid not in self.board.missions:
            raise CommandRefused(f"mission {mid!r} is not running")
        return self.cancel_mission(mid, by, held=held)

    async def _seize(self, tasks: list[Task]) -> Mapping[str, str]:
        """Tasks another node runs (task id -> node); the others are this daemon's to change from now on."""
        ids = [t.id for t in tasks if t.id not in self.dispatcher.running]
        return await self.dispatcher.source.seize(ids) if ids else {}

    def _stop_remote(self, tx: Tx, t: Task, node: str, reason: StopReason) -> None:
        claim_writes.stop(tx, t.id, reason.value)
        tx.event(TaskStopRequested(node=node, reason=reason.value), mission_id=t.mission_id, task_id=t.id)

    def cancel_mission(self, mid: str, by: str = "user", *, held: Mapping[str, str] | None = None) -> str:
        m = self.board.missions.get(mid)
        if m is None:
            raise CommandRefused(f"mission {mid!r} is not running")
        m.status = MissionStatus.CANCELLING
        tx = self.store.tx().decided().mission(m)
        tx.event(MissionCancelled(by=by), mission_id=m.id)
        for t in m.tasks.values():
            if self.dispatcher.stop_task(t.id, StopReason.CANCEL):
                continue  # the runner records the cancellation once its agent is stopped
            if held and t.id in held:  # another node runs it: it records the cancellation once it has stopped
                self._stop_remote(tx, t, held[t.id], StopReason.CANCEL)
                continue
            if not t.terminal:
                self.board.transition(tx, t, Trigger.CANCEL, "mission cancelled")
                m.closed.add(t.id)
                m.open_tasks -= 1
        self.store.submit(tx)
        if m.open_tasks <= 0:
            self.board.complete_mission(m)
        return f"cancelling mission {mid}"

    async def _task_and_mission(self, task_id: str) -> tuple[Mission | None, Task | None, bool]:
        """The task's mission (a finished one read back into the board), the task, and whether it was read back
        (it leaves memory again when nothing comes of the command: :meth:`_looked_only`)."""
        mid = task_id.rsplit(":", 1)[0]
        loaded = mid not in self.board.missions
        m = self.board.missions.get(mid) or await self._load(mid)
        return m, (m.tasks.get(task_id) if m is not None else None), loaded

    def _looked_only(self, m: Mission | None, loaded: bool) -> None:
        if loaded and m is not None and not m.status.open:
            self.board.forget(m)  # a finished mission read back only to look: it leaves memory again

    async def retry_task(self, task_id: str, raised: Limit | None = None) -> str:
        """``raised``: the task's budget from now on (``polpo retry TASK --budget USD --tokens N``)."""
        m, task, loaded = await self._task_and_mission(task_id)
        if raised is not None and self.spend is not None and m is not None and task is not None and (
                task.status in (TaskStatus.ON_HOLD, TaskStatus.FAILED)):
            self.spend.raise_task(task_id, m.id, raised)
        if m is not None and task is not None and task.status is TaskStatus.ON_HOLD:
            return self._release_hold(task)
        if m is None or task is None or task.status is not TaskStatus.FAILED:
            self._looked_only(m, loaded)
            if m is None or task is None:
                raise CommandRefused(f"no task {task_id!r}")
            if task.status is TaskStatus.AWAITING_REVIEW:
                approve, reject = review_commands(task_id)
                raise CommandRefused(f"task {task_id} waits for a person's review, not a retry: `{approve}` passes "
                                     f"it, `{reject}` fails it")
            raise CommandRefused(f"task {task_id} is {task.status}; only failed tasks and tasks on hold can be "
                                 "retried")
        tx = self.store.tx().decided()
        self.board.resume(tx, m, "retry", task_id)
        task.retries = task.fix_attempts = task.interruptions = 0
        task.next_kind = AttemptKind.RETRY
        self.board.transition(tx, task, Trigger.MANUAL_RETRY, "retried by user")
        max_retries = budget(task.spec, m.spec, self.cfg.defaults).max_retries
        tx.event(TaskRetry(attempt=1, max_retries=max_retries, manual=True), mission_id=m.id, task_id=task.id)
        reopened = self._reopen_cascade(tx, m, task)
        wire(m)
        self.store.submit(tx)
        for t in [task, *reopened]:
            self.board.make_ready(t)
        self.board.settle_gates(m)
        return f"retrying {task_id}" + (f" (and {len(reopened)} task(s) that waited on it)" if reopened else "")

    async def override(self, task_id: str, args: dict[str, Any]) -> str:
        """A person's verdict over the judge's, stored (:mod:`.overrides`); a pass of failed work also makes the
        task done (:mod:`.human_pass`)."""
        said = await self.people.apply("override", task_id, args)
        if not args.get("passed"):
            return said
        m, task, loaded = await self._task_and_mission(task_id)
        if m is None or task is None:
            return said
        why = why_not_passed(m, task)
        if why is not None:
            self._looked_only(m, loaded)
            return f"{said}; the task stays {task.status}: {why}" if task.status is TaskStatus.FAILED else said
        score = human_score(True, args.get("score"))
        by = str(args.get("by") or "user")
        return f"{said}; " + pass_by_person(self.store, self.board, m, task, score, by, self._reopen_cascade)

    def _release_hold(self, task: Task) -> str:
        """A task on hold after an outage (engine/outage.py): its assessment runs again — not its agent — when
        the agent's result is stored; else (the agent's own model failed) the attempt runs again."""
        attempt = self.board.attempts.get(task.id)
        tx = self.store.tx().decided()
        if attempt is not None and attempt.status is AttemptStatus.FINISHED:
            self.board.transition(tx, task, Trigger.REASSESS, "retried by user: the assessment runs again")
            self.store.submit(tx)
            self.dispatcher.resume(task)
            return f"re-assessing {task.id} (its agent does not run again)"
        self.board.transition(tx, task, Trigger.RESUME, "retried by user after the model provider failed")
        self.store.submit(tx)
        self.board.make_ready(task)
        return f"running {task.id} again"

    def _reopen_cascade(self, tx: Tx, m: Mission, cause: Task) -> list[Task]:
        """Re-open the tasks that failed only because of ``cause`` (:mod:`.reopen`), and reset failed gates."""
        for g in m.spec.quality_gates:
            if m.gate_state.get(g.name) is GateStatus.FAILED:
                m.gate_state[g.name] = GateStatus.WAITING
                tx.gate(m.id, g.name, GateStatus.WAITING, f"re-opened: {cause.title} is back", None, self.clock.now())
        out = reopenable(m, cause.id)
        for t in out:
            t.retries = t.fix_attempts = 0
            self.board.transition(tx, t, Trigger.REOPEN, f"re-opened: {cause.title}, which it waited on, is back")
        return out

    def approve_task(self, task_id: str) -> str:
        task = self.board.tasks.get(task_id)
        if task is None:
            raise CommandRefused(not_waiting(task_id))
        if task.status is not TaskStatus.AWAITING_APPROVAL:
            raise CommandRefused(f"task {task_id} is {task.status}, not awaiting approval")
        tx = self.store.tx().decided()
        tx.event(TaskApproved(next=task.next_kind), mission_id=task.mission_id, task_id=task.id)
        self.board.transition(tx, task, Trigger.APPROVE, "approved by user")
        self.store.submit(tx)
        self.board.make_ready(task)
        return f"approved {task_id}: its {task.next_kind} runs next"

    async def rerun_source(self, source: str) -> str:
        """Forget what a file's bytes became, so the same bytes written again start a new run.

        The daemon starts nothing for bytes it has seen (an editor's extra events, a restart). ``polpo submit
        --force`` queues this command, waits for the answer, then writes the file again. The source row keeps
        its mission id with an empty hash, which matches no bytes, so this survives a restart too.
        """
        adm = self.admission
        if adm is None:
            raise CommandRefused("this daemon cannot rerun files")
        active = adm.active_for_source(source)
        if active is not None:
            raise CommandRefused(f"mission {active.id} from {source} is still running: cancel it "
                                 f"(polpo cancel {active.id}) or wait for it to finish")
        info = await adm.source(source)
        if info is None or not info.hash:
            return f"{source}: nothing to forget; its bytes start a run when written"
        adm.record(replace(info, hash="", stamp=None))
        last = f" (last: mission {info.mission_id})" if info.mission_id else ""
        return f"{source}: forgotten{last}; the same bytes start a new run when written again"

    async def fail_for_sla(self, t: Task) -> None:
        """``violation_action = "fail"``: the task fails through the state machine, its agent is killed, no retry.
        A task another node runs is asked to stop there; that node records the failure once it has stopped."""
        if t.terminal or self.dispatcher.stop_task(t.id, StopReason.SLA):
            return  # a running one: the runner kills the process group and records the failure
        held = await self._seize([t])
        if t.status.terminal:  # decided meanwhile
            return
        tx = self.store.tx()
        if t.id in held:
            self._stop_remote(tx, t, held[t.id], StopReason.SLA)
            self.store.submit(tx)
            return
        self.board.transition(tx, t, Trigger.SLA_FAIL, SLA_REASON)
        self.store.submit(tx)
        self.board.after_change(t)

    async def apply(self, kind: str, target: str) -> tuple[str, str]:
        """(status, answer) of one command: ``done`` or ``refused``."""
        try:
            if kind in VERDICT_COMMANDS:  # a person's verdict on work the judge could not decide
                said = await self.reviews.answer(kind, *decode(target))
                if said is not None:
                    return "done", said
            if kind == "cancel":
                return "done", await self.cancel(target)
            if kind == "retry":
                return "done", await self.retry_task(*retry_target(target))
            if kind in ("approve", "reject", "answer"):
                said = await self._person(kind, *decode(target))
                if said is not None:
                    return "done", said
            if kind == "rerun":
                return "done", await self.rerun_source(target)
            if kind in SCHEDULE_COMMANDS and self.schedules is not None:
                schedule_id, args = decode(target)
                return "done", await self.schedules.command(kind, schedule_id, str(args.get("by") or "user"))
            if kind == "override":
                return "done", await self.override(*decode(target))
            if kind in PEOPLE_COMMANDS:
                return "done", await self.people.apply(kind, *decode(target))
            return "refused", f"unknown command {kind!r}"
        except (CommandRefused, ScheduleRefused, Refused) as e:
            return "refused", str(e)

    async def _person(self, kind: str, task_id: str, args: dict[str, Any]) -> str | None:
        """``approve``, ``reject`` and ``answer`` of a task: its agent's question or tool call, its approval
        "before", or its sideEffects re-run (None: the reject of an approval "before", for :class:`People`)."""
        by = str(args.get("by") or "user")
        if kind == "answer":
            return await self.questions.answer(task_id, str(args.get("answer") or ""), by)
        call = await self.questions.open_question(task_id, QuestionKind.TOOL)
        if call is not None:
            reason = args.get("note") if kind == "approve" else str(args.get("reason") or "refused")
            return self.questions.decide_tool(task_id, call, kind == "approve", by, reason)
        if kind == "reject":
            return None
        if self.people.waits_before(task_id):  # approval "before" its first attempt
            return self.people.approve(task_id, by, args.get("note"))
        return self.approve_task(task_id)

    async def run_inbox(self, poll: float = COMMAND_POLL) -> None:
        """Apply the commands the CLI queued in the store, until cancelled (the timers' slow work, a model that
        answers for a person, runs in this loop's task group: it ends with the loop, as leadership does)."""
        async with anyio.create_task_group() as tg:
            try:
                await self._inbox(poll, tg)
            except StoreLost:  # this node may no longer write (fenced, its database gone): it is stopping and
                return         # says why; the commands stay queued for the next leader (nemesis seed 4137)

    async def _inbox(self, poll: float, tg: TaskGroup) -> None:
        wait = OutageWait("the command inbox", log)
        while True:
            try:
                queued = await self.store.queued_commands()
                wait.ok()
            except Exception as e:  # the database is away: the commands wait in it (never the daemon's end)
                delay = wait.failed(e)
                if delay is None:
                    raise
                await anyio.sleep(delay)
                continue
            for c in queued:
                try:
                    status, answer = await self.apply(c.kind, c.target)
                except StoreLost:
                    raise
                except Exception as exc:  # a bug in one command must not end the inbox (or the daemon)
                    if (delay := wait.failed(exc)) is not None:  # it stays queued: applied when the database is back
                        await anyio.sleep(delay)
                        break
                    log.exception("command %s %s failed", c.kind, c.target)
                    status, answer = "refused", f"internal error: {type(exc).__name__}: {exc}"
                done = self.store.tx().decided().command_done(c.id, status, answer, self.clock.now())
                try:
                    await self.store.commit(done)
                except StoreError:
                    if done.error == OUT_OF_TERM:
                        return  # this node no longer leads: the command stays queued for the next leader
                    raise
            await self.timers(tg)
            await anyio.sleep(poll)

    async def timers(self, tg: TaskGroup) -> None:
        """Delays that expired, approvals and questions that timed out, by the injected clock (the leader's inbox
        loop)."""
        try:
            now = self.clock.now()
            self.board.holds.tick(now)
            self.people.tick(now)
            await self.questions.tick(tg)
        except StoreLost:  # this node may no longer write: it is stopping and says why
            return
        except Exception as exc:  # a bug here must not end the inbox; the next poll tries again
            if self.store.away(exc):  # the database away (nemesis seed 1012): one line, not a traceback a poll
                self._timers_away.failed(exc)
                return
            log.exception("the checkpoint, delay, approval and question timers failed")
            return
        self._timers_away.ok()
