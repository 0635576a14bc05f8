"""The engine's side of deadlines: which entities have one, what was already emitted, what a violation does.

The arithmetic is pure (:mod:`polpo.sla.deadlines`); the timer is :class:`polpo.sla.monitor.SlaMonitor`. This
module reads the running missions, writes each mark to ``sla_marks`` in the same transaction as its event (so a
restart never repeats one), and applies ``violation_action = "fail"`` through the state machine.

Deadlines: a task's or mission's ``deadline`` is an ISO-8601 instant, or an ISO-8601 duration counted from the
mission's start (its acceptance). ``sla:met`` is recorded when a task finishes *done* or a mission *completed*
on time; finishing late records ``sla:violated`` then, if the monitor had not already.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from datetime import datetime
from typing import Any

import orjson

from polpo.config import SlaSettings
from polpo.engine.board import MissionBoard
from polpo.events.catalog import Event, Payload, SlaMet, SlaViolated, SlaWarning
from polpo.model.records import Mission, Task
from polpo.model.status import MissionStatus, TaskStatus
from polpo.sla.deadlines import Mark, completion_mark, resolve_deadline, sla_status
from polpo.store.outage_wait import OutageWait
from polpo.store.protocol import Store
from polpo.store.tx import Tx

log = logging.getLogger("polpo.sla")

__all__ = ["SlaKeeper", "extra_channels"]


class SlaKeeper:
    def __init__(self, sla: SlaSettings, store: Store, board: MissionBoard,
                 fail: Callable[[Task], Awaitable[None]]) -> None:
        self.sla = sla
        self.store = store
        self.board = board
        self.fail = fail  # violation_action = "fail": fail the task through the state machine
        self.marks: dict[str, set[str]] = {}  # entity id → kinds already emitted (open missions' only)
        self.unfailed: dict[str, Task] = {}  # violated tasks a database outage kept from failing: tried each tick
        self._loaded: set[str] = set()  # open missions whose stored marks are in ``marks``
        self._outage = OutageWait("the SLA check", log)

    async def load(self, mission_ids: list[str]) -> None:
        for mid in mission_ids:
            await self._load(mid)

    async def _load(self, mid: str) -> None:
        for entity_id, kind in await self.store.sla_marks(mid):
            self.marks.setdefault(entity_id, set()).add(kind)
        self._loaded.add(mid)

    def _forget(self, m: Mission) -> None:
        """A finished mission's marks leave memory (a retry that brings it back reads them again)."""
        self._loaded.discard(m.id)
        self.marks.pop(m.id, None)
        for tid in m.tasks:
            self.marks.pop(tid, None)

    def _deadline(self, m: Mission, value: Any) -> datetime | None:
        if value is None:
            return None
        try:
            return resolve_deadline(value, m.created_at)
        except ValueError:
            return None

    async def check(self, now: datetime) -> None:
        """One monitor tick: warnings and violations for every open entity with a deadline."""
        tx = self.store.tx()
        violated: list[Task] = []
        for m in list(self.board.missions.values()):
            if m.status is not MissionStatus.RUNNING:
                continue
            if m.id not in self._loaded and (m.spec.deadline is not None or any(
                    t.deadline is not None for t in m.tasks.values() if not t.terminal)):
                await self._load(m.id)  # (brought back by a retry: its marks were forgotten when it finished)
            deadline = self._deadline(m, m.spec.deadline)
            if deadline is not None:
                for mark in sla_status(now, m.created_at, deadline, self.sla.warning_threshold,
                                       self.marks.get(m.id, set()), entity_id=m.id, entity_type="mission"):
                    self._record(tx, m, None, mark, now)
                    if mark.kind == "violated":
                        violated.extend(t for t in m.tasks.values() if not t.terminal)
            for t in m.tasks.values():
                if t.terminal:
                    continue
                deadline = self._deadline(m, t.deadline)
                if deadline is None:
                    continue
                for mark in sla_status(now, m.created_at, deadline, self.sla.warning_threshold,
                                       self.marks.get(t.id, set()), entity_id=t.id, entity_type="task"):
                    self._record(tx, m, t, mark, now)
                    if mark.kind == "violated":
                        violated.append(t)
        self.store.submit(tx)
        if self.sla.violation_action == "fail":
            await self._fail_all([*self.unfailed.values(), *violated])

    async def _fail_all(self, violated: list[Task]) -> None:
        """Fail each violated task; one an outage kept from failing is tried again at the next tick (its mark is
        written, so the check itself would not find it again)."""
        for t in dict.fromkeys(violated):
            if t.terminal or t.mission_id not in self.board.missions:
                self.unfailed.pop(t.id, None)
                continue
            try:
                await self.fail(t)
            except Exception as e:
                if self._outage.failed(e) is None:
                    raise
                self.unfailed[t.id] = t
                continue
            self._outage.ok()
            self.unfailed.pop(t.id, None)

    def _record(self, tx: Tx, m: Mission, t: Task | None, mark: Mark, now: datetime) -> None:
        entity = t.id if t is not None else m.id
        self.marks.setdefault(entity, set()).add(mark.kind)
        kind = "task" if t is not None else "mission"
        tx.sla_mark(entity, mark.kind, kind, m.id, orjson.dumps(mark.data).decode(), now)
        tx.event(_payload(mark), mission_id=m.id, task_id=t.id if t is not None else None)

    def on_task_terminal(self, tx: Tx, t: Task, m: Mission) -> None:
        if t.status is not TaskStatus.DONE or t.finished_at is None:
            return
        deadline = self._deadline(m, t.deadline)
        if deadline is None:
            return
        mark = completion_mark(t.finished_at, deadline, entity_id=t.id, entity_type="task",
                               already=self.marks.get(t.id, set()))
        if mark is not None:
            self._record(tx, m, t, mark, t.finished_at)

    def on_mission_complete(self, tx: Tx, m: Mission) -> None:
        deadline = self._deadline(m, m.spec.deadline)
        if deadline is not None and m.status is MissionStatus.COMPLETED and m.finished_at is not None:
            mark = completion_mark(m.finished_at, deadline, entity_id=m.id, entity_type="mission",
                                   already=self.marks.get(m.id, set()))
            if mark is not None:
                self._record(tx, m, None, mark, m.finished_at)
        self._forget(m)


def _payload(mark: Mark) -> Payload:
    d = mark.data
    head: dict[str, Any] = {"entity_id": d["entityId"], "entity_type": d["entityType"], "deadline": d["deadline"]}
    if mark.kind == "warning":
        return SlaWarning(**head, elapsed=d["elapsed"], remaining=d["remaining"], percent_used=d["percentUsed"])
    if mark.kind == "violated":
        return SlaViolated(**head, overdue_ms=d["overdueMs"])
    return SlaMet(**head, margin_ms=d["marginMs"])


def extra_channels(cfg_sla: SlaSettings, event: str) -> list[str]:
    """The SLA's own channels for an SLA event (on top of the notify rules)."""
    if event == SlaWarning.NAME:
        return list(cfg_sla.warning_channels)
    if event in (SlaViolated.NAME, SlaMet.NAME):
        return list(cfg_sla.violation_channels)
    return []


_OWN_CHANNELS = ("quality:gate:", "checkpoint:", "delay:")  # events that carry their element's notifyChannels


def event_channels(cfg_sla: SlaSettings, ev: Event) -> list[str]:
    """Channels an event goes to on top of the notify rules: a gate's, checkpoint's or delay's own, the SLA's."""
    own = list(ev.data.get("notifyChannels") or []) if ev.event.startswith(_OWN_CHANNELS) else []
    return own + extra_channels(cfg_sla, ev.event)
