"""Scheduled missions in motion: a mission file with ``schedule`` makes a schedule; each firing starts a run.

A file with a ``schedule`` starts nothing when it is read: it makes (or, edited, replaces) a row in the store's
``schedules`` table and ``schedule:created``. At each firing the mission runs from that row's document, as a
new run of the file (``calculator``, ``calculator#2``, … — what ``submit --force`` does by hand), and the
schedule's cursor, ``schedule:triggered`` and the run's ``mission:accepted`` are one transaction: a crash
leaves either all of them or none, so a restart neither loses a firing nor runs it twice. What is due and what
runs are pure decisions (:mod:`polpo.schedules.plan`) over the injected clock's ``now``; the triggers are
APScheduler's (:mod:`polpo.schedules.triggers`). Only the leader runs :meth:`Scheduler.run` (the daemon starts
it with the term's other loops), so in a cluster one node fires.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from dataclasses import replace
from datetime import datetime
from pathlib import Path

import anyio

from polpo.clock import Clock, iso
from polpo.engine.admission import Admission, slugify
from polpo.events.catalog import (
    Payload,
    ScheduleChanged,
    ScheduleCreated,
    ScheduleExpired,
    ScheduleQueued,
    ScheduleSkipped,
    ScheduleTriggered,
)
from polpo.mission.schema import MissionSpec
from polpo.model.doc import MissionDoc
from polpo.model.records import Mission
from polpo.model.schedule import Schedule, ScheduleStatus
from polpo.model.status import MissionStatus, SourceOutcome
from polpo.schedules.plan import Policy, due, next_fire, on_overlap, plan
from polpo.schedules.triggers import Trigger
from polpo.store.identity import StoreLost
from polpo.store.outage_wait import OutageWait
from polpo.store.protocol import SourceRecord, Store
from polpo.store.tx import Tx

__all__ = ["MAX_SLEEP", "SCHEDULE_COMMANDS", "ScheduleRefused", "Scheduler"]

log = logging.getLogger("polpo.schedules")

MAX_SLEEP = 5.0  # seconds: the longest the loop sleeps, so a wall-clock step is noticed soon
SCHEDULE_COMMANDS = ("schedule-pause", "schedule-resume", "schedule-remove")
_MISSED = "missed while the daemon was down"

Cancel = Callable[[str, str], Awaitable[str]]


class ScheduleRefused(Exception):
    """A schedule command that does not apply; the message says why."""


class Scheduler:
    def __init__(self, store: Store, clock: Clock, admission: Admission, cancel: Cancel) -> None:
        self.store = store
        self.clock = clock
        self.admission = admission
        self._cancel = cancel  # overlap "cancel-previous": the engine's cancel command
        self.by_id: dict[str, Schedule] = {}
        self._parsed: dict[tuple[str, str], tuple[MissionSpec, Trigger, Policy]] = {}
        self._wake = anyio.Event()
        self._away = OutageWait("the schedules", log)  # the database away: said once, the next tick tries again

    async def load(self) -> None:
        self.by_id = {s.id: s for s in await self.store.schedules()}

    def wake(self) -> None:
        self._wake.set()

    def ended(self, m: Mission) -> None:
        """A mission ended: a firing queued behind it (overlap "queue") starts now, not at the next firing (the
        loop sleeps until then), so a backlog — firings caught up after a downtime — drains run after run."""
        if any(s.queued and s.source == m.source for s in self.by_id.values()):
            self.wake()

    def of_source(self, source: str) -> Schedule | None:
        return next((s for s in self.by_id.values() if s.source == source and s.open), None)

    def _parts(self, s: Schedule) -> tuple[MissionSpec, Trigger, Policy]:
        key = (s.id, f"{s.hash}@{iso(s.anchor)}")
        if key not in self._parsed:
            head = s.head()
            self._parsed[key] = (head, s.trigger(head), Schedule.policy_of(head))
        return self._parsed[key]

    def next_run(self, s: Schedule, now: datetime) -> datetime | None:
        _, trigger, _ = self._parts(s)
        return next_fire(trigger, s.cursor, s.anchor, now) if s.status is ScheduleStatus.ACTIVE else None

    # -- from the intake ------------------------------------------------------------------------------------
    async def from_file(self, source: str, digest: str, spec: MissionSpec, warnings: list[str],
                        stamp: str | None = None) -> str:
        """A valid file that has a schedule, or had one: make or replace its schedule; a file whose schedule
        was taken out runs now, as any file (its schedule goes). ``stamp``: the file as read (intake.stamps)."""
        old = self.of_source(source)
        known = await self.admission.source(source)
        if spec.schedule is None:
            assert old is not None
            await self._change(old, ScheduleStatus.REMOVED, "removed", "an edit of its file")
            active = self.admission.active_for_source(source)
            if active is not None:
                self.admission.reject(source, digest, reason="still running", errors=[], lines=[
                    f"{source}: $: mission {active.id!r} from this file is still running; its schedule is removed. "
                    f"Cancel it (polpo cancel {active.id}) or wait for it to finish, then save the file again"],
                    busy_with=active.id, known=known, stamp=stamp)
                return "busy"
            await self.admission.accept(spec=spec, source=source, digest=digest, warnings=warnings, stamp=stamp)
            return "accepted"
        now = self.clock.now()
        sid = old.id if old is not None else self._new_id(source)
        s = Schedule(id=sid, source=source, hash=digest, spec=MissionDoc.of(spec).text(), expr=spec.schedule,
                     timezone=spec.timezone, status=ScheduleStatus.ACTIVE, anchor=now, updated_at=now,
                     last_run=old.last_run if old is not None else None)
        nxt = self.next_run(s, now)
        record = SourceRecord(source, digest, SourceOutcome.SCHEDULED, sid, known.runs if known is not None else 0,
                              stamp)
        tx = self.store.tx().schedule(s).source(record, now)
        tx.event(ScheduleCreated(schedule_id=sid, file=source, expression=s.expr, timezone=s.timezone or "UTC",
                                 next_run_at=None if nxt is None else iso(nxt)), mission_id=sid)
        if nxt is None:
            s.status = ScheduleStatus.ENDED
            tx.schedule(s).event(ScheduleExpired(schedule_id=sid, end_date=_end_of(spec)), mission_id=sid)
        await self.store.commit(tx)
        self.admission.sources.put(record)
        self.by_id[sid] = s
        self.wake()
        return "scheduled"

    def _new_id(self, source: str) -> str:
        base = slugify(Path(source).stem)
        taken = {s.id for s in self.by_id.values() if s.source != source}
        sid, n = base, 2
        while sid in taken:
            sid, n = f"{base}-{n}", n + 1
        return sid

    # -- firing ---------------------------------------------------------------------------------------------
    async def run(self) -> None:
        """Fire what is due, sleep until the next firing (at most :data:`MAX_SLEEP`), until cancelled."""
        while True:
            now = self.clock.now()
            await self.tick(now)
            soonest = min((t for s in list(self.by_id.values()) if (t := self._next_safe(s, now)) is not None),
                          default=None)
            delay = MAX_SLEEP if soonest is None else min(MAX_SLEEP, max(0.05, (soonest - now).total_seconds()))
            with anyio.move_on_after(delay):
                await self._wake.wait()
            self._wake = anyio.Event()

    def _next_safe(self, s: Schedule, now: datetime) -> datetime | None:
        try:
            return self.next_run(s, now)
        except Exception:  # a schedule that cannot be read back is logged by tick; it must not stop the others
            return None

    async def tick(self, now: datetime) -> None:
        """Every active schedule, once: what is due runs, queues or is let go, each with its event."""
        for s in list(self.by_id.values()):
            if s.status is not ScheduleStatus.ACTIVE:
                continue
            try:
                await self._tick_one(s, now)
            except StoreLost:  # this node may no longer write (fenced, its database gone): it is stopping and
                return         # says why; the next leader fires what is due (nemesis seeds 36 and 43)
            except Exception as exc:
                if self.store.away(exc):  # a read met the database away: one line, and the next tick tries again
                    self._away.failed(exc)  # (what is due stays due: nemesis seed 57 logged a traceback)
                    return
                log.exception("schedule %s failed at %s", s.id, iso(now))  # a bug in one must not stop the others
        self._away.ok()

    def _active(self, source: str) -> Mission | None:
        return next((m for m in self.admission.board.missions.values()
                     if m.source == source and m.status is MissionStatus.RUNNING), None)

    async def _tick_one(self, s: Schedule, now: datetime) -> None:
        head, trigger, policy = self._parts(s)
        if s.queued and self._active(s.source) is None:  # a queued firing whose turn has come
            await self._start(s, now, replace(s, queued=s.queued - 1), catch_up=False)
        pending = due(trigger, s.cursor, s.anchor, now)
        decided = plan(pending, s.cursor, now, policy)
        first: list[Payload] = []
        if decided.missed or decided.dropped:
            newest = decided.missed[-1] if decided.missed else decided.fire[0]
            first.append(ScheduleSkipped(schedule_id=s.id, reason=_MISSED, scheduled_for=iso(newest),
                                         count=len(decided.missed) + decided.dropped))
        late = bool(decided.missed) or any(now - t > policy.misfire_grace for t in decided.fire)
        for t in decided.fire:
            active = self._active(s.source)
            action = on_overlap(policy, active is not None, s.queued)
            if action == "start" or action == "replace":
                if action == "replace" and active is not None:
                    await self._cancel(active.id, f"schedule {s.id}")
                await self._start(s, t, replace(s, cursor=t), catch_up=late, extra=first)
            else:
                after = replace(s, cursor=t, updated_at=now, queued=s.queued + (action == "queue"))
                assert active is not None
                note: Payload
                if action == "queue":
                    note = ScheduleQueued(schedule_id=s.id, scheduled_for=iso(t), behind=active.id, queued=after.queued)
                else:
                    reason = "queue full" if policy.overlap == "queue" else f"a run is active ({active.id})"
                    note = ScheduleSkipped(schedule_id=s.id, reason=reason, scheduled_for=iso(t), count=1)
                await self._save(after, [*first, note])
            first = []
        if first or (decided.cursor is not None and decided.cursor != s.cursor):
            await self._save(replace(s, cursor=decided.cursor, updated_at=now), first)
        if s.queued == 0 and next_fire(trigger, s.cursor, s.anchor, now) is None:
            await self._save(replace(s, status=ScheduleStatus.ENDED, updated_at=now),
                             [ScheduleExpired(schedule_id=s.id, end_date=_end_of(head))])

    async def _start(self, s: Schedule, at: datetime, after: Schedule, *, catch_up: bool,
                     extra: list[Payload] | None = None) -> None:
        """A run of the mission, in one transaction with the schedule's new state and ``schedule:triggered``."""
        spec = MissionDoc.parse(s.spec).head
        now = self.clock.now()

        def before(tx: Tx, mid: str) -> None:
            after.last_run, after.updated_at = mid, now
            tx.schedule(after)
            for p in extra or ():
                tx.event(p, mission_id=s.id)
            tx.event(ScheduleTriggered(schedule_id=s.id, expression=s.expr, scheduled_for=iso(at),
                                       catch_up=catch_up), mission_id=mid)

        await self.admission.accept(spec=spec, source=s.source, digest=s.hash, warnings=[], before=before,
                                    schedule=s.id)
        self._adopt(after)

    async def _save(self, after: Schedule, events: list[Payload]) -> None:
        tx = self.store.tx().schedule(after)
        for p in events:
            tx.event(p, mission_id=after.id)
        await self.store.commit(tx)
        self._adopt(after)

    def _adopt(self, after: Schedule) -> None:
        s = self.by_id.get(after.id)
        if s is None:
            self.by_id[after.id] = after
            return
        for f in ("status", "cursor", "queued", "last_run", "updated_at"):
            setattr(s, f, getattr(after, f))

    # -- commands ----------------------------------------------------------------------------------------------
    async def command(self, kind: str, target: str, by: str = "user") -> str:
        s = self.by_id.get(target)
        if s is None or not s.open:
            known = ", ".join(sorted(i for i, x in self.by_id.items() if x.open)) or "none"
            raise ScheduleRefused(f"no schedule {target!r} (schedules: {known}); see `polpo schedules`")
        if kind == "schedule-pause":
            if s.status is ScheduleStatus.PAUSED:
                raise ScheduleRefused(f"schedule {target} is already paused")
            await self._change(s, ScheduleStatus.PAUSED, "paused", by)
            return f"paused schedule {target}: nothing fires until `polpo schedules resume {target}`"
        if kind == "schedule-resume":
            if s.status is ScheduleStatus.ACTIVE:
                raise ScheduleRefused(f"schedule {target} is not paused")
            await self._change(s, ScheduleStatus.ACTIVE, "resumed", by)
            nxt = self.next_run(s, self.clock.now())
            return f"resumed schedule {target}; next run {iso(nxt) if nxt else 'none'}"
        if kind == "schedule-remove":
            await self._change(s, ScheduleStatus.REMOVED, "removed", by)
            return f"removed schedule {target}; its runs so far stay (polpo status --all)"
        raise ScheduleRefused(f"unknown schedule command {kind!r}")

    async def _change(self, s: Schedule, status: ScheduleStatus, action: str, by: str) -> None:
        """Pause, resume or remove. Resumed, it fires from now on: what fell due while paused is let go."""
        now = self.clock.now()
        after = replace(s, status=status, updated_at=now, queued=0 if status is ScheduleStatus.REMOVED else s.queued)
        if status is ScheduleStatus.ACTIVE:
            _, trigger, _ = self._parts(s)
            passed = due(trigger, s.cursor, s.anchor, now, keep=1).instants
            after.cursor = passed[-1] if passed else s.cursor
        await self._save(after, [ScheduleChanged(schedule_id=s.id, action=action, by=by)])
        if status is ScheduleStatus.REMOVED:
            self.by_id.pop(s.id, None)
        self.wake()


def _end_of(spec: MissionSpec) -> str | None:
    return None if spec.end_date is None else iso(spec.end_date)
