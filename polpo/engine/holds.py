"""Checkpoints and delays: tasks that wait for a person, or for a set time, once other tasks have finished.

Decided on the board, by the node that decides for the mission (the cluster's leader), like quality gates: each
hold counts its afterTasks that are not terminal (wired from the tasks' states); when the last one finishes the
hold activates, once. Its blocksTasks count it in ``waiting_on`` until it is released, so they stay ``pending``
while every other task goes on.

* a **checkpoint** is ``reached`` (``checkpoint:reached`` with its message, to its ``notifyChannels``) and
  released by a person, ``polpo resume MISSION [CHECKPOINT]`` (``checkpoint:resumed`` with who and a note);
* a **delay** is ``started`` with its expiry stored (``delay:started``), and released by :meth:`Holds.tick` —
  called with the injected clock's time from the command inbox's loop, so on the leader only — once that time
  has passed (``delay:expired``). No coroutine sleeps for it: a restart reads the same expiry back.

The state row is in the same transaction as the event that announces it, so ``kill -9`` while paused leaves
the checkpoint reached and its tasks waiting, and a retry that re-opens an afterTask does not activate a hold a
second time.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import datetime

from polpo.clock import Clock, iso
from polpo.durations import format_duration
from polpo.engine.refused import Refused
from polpo.events.catalog import CheckpointReached, CheckpointResumed, DelayExpired, DelayStarted
from polpo.mission.schema import Checkpoint, Delay, MissionSpec
from polpo.model.holds import HoldKind, HoldState, HoldStatus
from polpo.model.records import Mission, Task
from polpo.model.status import MissionStatus
from polpo.store.protocol import Store
from polpo.store.tx import Tx

__all__ = ["Holds", "holds_of", "paused_at", "wire_holds"]

Key = tuple[HoldKind, str]


@dataclass(frozen=True)
class _Def:
    key: Key
    spec: Checkpoint | Delay


def holds_of(spec: MissionSpec) -> Iterator[_Def]:
    for c in spec.checkpoints:
        yield _Def((HoldKind.CHECKPOINT, c.name), c)
    for d in spec.delays:
        yield _Def((HoldKind.DELAY, d.name), d)


def wire_holds(m: Mission) -> dict[str, int]:
    """Derive each hold's open afterTasks and which holds wait on a title; the number of holds not released yet
    that block each title (what its ``waiting_on`` adds)."""
    by_title = {t.title: t for t in m.tasks.values()}
    m.hold_pending = {}
    m.holds_after = {}
    blocked: dict[str, int] = {}
    for h in holds_of(m.spec):
        after = [by_title[a] for a in dict.fromkeys(h.spec.after_tasks) if a in by_title]
        m.hold_pending[h.key] = sum(1 for t in after if not t.terminal)
        for t in after:
            m.holds_after.setdefault(t.title, []).append(h.key)
        state = m.holds.get(h.key)
        if state is None or state.status is not HoldStatus.RELEASED:
            for title in dict.fromkeys(h.spec.blocks_tasks):
                blocked[title] = blocked.get(title, 0) + 1
    return blocked


def resume_command(mission_id: str, name: str) -> str:
    return f"polpo resume {mission_id} {name}"


class Holds:
    """Activates and releases a mission's checkpoints and delays (see the module docstring)."""

    def __init__(self, store: Store, clock: Clock, missions: dict[str, Mission],
                 make_ready: Callable[[Task], None]) -> None:
        self.store = store
        self.clock = clock
        self.missions = missions  # the board's: the missions this node decides for
        self.make_ready = make_ready

    # -- the board's side ----------------------------------------------------------------------------------
    def after_terminal(self, tx: Tx, m: Mission, task: Task) -> None:
        """``task`` finished: the holds waiting on it count down; the last afterTask activates a hold."""
        for key in m.holds_after.get(task.title, ()):
            m.hold_pending[key] -= 1
            if m.hold_pending[key] <= 0:
                self._activate(tx, m, key)

    def settle(self, tx: Tx, m: Mission) -> None:
        """Activate holds whose afterTasks all finished while nothing recorded it (a crash in between)."""
        for h in holds_of(m.spec):
            if m.hold_pending.get(h.key, 0) <= 0:
                self._activate(tx, m, h.key)

    def _activate(self, tx: Tx, m: Mission, key: Key) -> None:
        if key in m.holds:  # once: reached, started or released already
            return
        spec = next(h.spec for h in holds_of(m.spec) if h.key == key)
        now = self.clock.now()
        channels = list(spec.notify_channels) or None
        after, blocks = list(spec.after_tasks), list(spec.blocks_tasks)
        if isinstance(spec, Delay):
            state = HoldState(HoldKind.DELAY, spec.name, HoldStatus.STARTED, now, expires_at=now + spec.duration)
            m.holds[key] = state
            tx.hold(m.id, state)
            tx.event(DelayStarted(mission_id=m.id, delay_name=spec.name, duration=format_duration(spec.duration),
                                  after_tasks=after, blocks_tasks=blocks, started_at=iso(now),
                                  expires_at=iso(now + spec.duration), message=spec.message,
                                  notify_channels=channels), mission_id=m.id)
            return
        state = HoldState(HoldKind.CHECKPOINT, spec.name, HoldStatus.REACHED, now)
        m.holds[key] = state
        tx.hold(m.id, state)
        tx.event(CheckpointReached(mission_id=m.id, checkpoint_name=spec.name, after_tasks=after, blocks_tasks=blocks,
                                   resume=resume_command(m.id, spec.name), message=spec.message,
                                   notify_channels=channels), mission_id=m.id)

    def _release(self, tx: Tx, m: Mission, key: Key, *, by: str | None = None, note: str | None = None) -> list[Task]:
        """The hold lets its blocksTasks go: they stop counting it (the caller makes them ready after submit)."""
        state = m.holds[key]
        state.status = HoldStatus.RELEASED
        state.released_at = self.clock.now()
        state.by, state.note = by, note
        tx.hold(m.id, state)
        spec = next(h.spec for h in holds_of(m.spec) if h.key == key)
        channels = list(spec.notify_channels) or None
        if key[0] is HoldKind.DELAY:
            tx.event(DelayExpired(mission_id=m.id, delay_name=spec.name, notify_channels=channels), mission_id=m.id)
        else:
            tx.event(CheckpointResumed(mission_id=m.id, checkpoint_name=spec.name, by=by or "user", note=note,
                                       notify_channels=channels), mission_id=m.id)
        freed = []
        for title in dict.fromkeys(spec.blocks_tasks):
            t = m.task_by_title(title)
            if t is not None:
                t.waiting_on -= 1
                freed.append(t)
        return freed

    # -- time ----------------------------------------------------------------------------------------------
    def tick(self, now: datetime | None = None) -> int:
        """Release every started delay whose expiry has passed (``now``: the injected clock's); how many."""
        now = now or self.clock.now()
        released = 0
        for m in list(self.missions.values()):
            due = [k for k, s in m.holds.items() if s.status is HoldStatus.STARTED and s.expires_at is not None
                   and s.expires_at <= now]
            if not due or m.status is not MissionStatus.RUNNING:
                continue
            tx = self.store.tx().decided()
            freed = [t for key in sorted(due, key=lambda k: k[1]) for t in self._release(tx, m, key)]
            self.store.submit(tx)
            for t in freed:
                self.make_ready(t)
            released += len(due)
        return released

    # -- a person ------------------------------------------------------------------------------------------
    def resume(self, mission_id: str, name: str | None, by: str, note: str | None) -> str:
        """Release the mission's reached checkpoint ``name`` (None: every reached one)."""
        m = self.missions.get(mission_id)
        if m is None:
            raise Refused(f"mission {mission_id!r} is not running; see `polpo status --all`")
        if m.status is not MissionStatus.RUNNING:
            raise Refused(f"mission {mission_id} is {m.status}: there is nothing to resume")
        reached = sorted(k for k, s in m.holds.items() if k[0] is HoldKind.CHECKPOINT
                         and s.status is HoldStatus.REACHED)
        if name is not None:
            defined = {h.key for h in holds_of(m.spec) if h.key[0] is HoldKind.CHECKPOINT}
            key: Key = (HoldKind.CHECKPOINT, name)
            if key not in defined:
                names = ", ".join(k[1] for k in sorted(defined)) or "none"
                raise Refused(f"mission {mission_id} has no checkpoint {name!r} (its checkpoints: {names})")
            if key not in reached:
                state = m.holds.get(key)
                why = ("was resumed already" if state is not None else
                       "is not reached yet: its afterTasks are still running")
                raise Refused(f"checkpoint {name!r} of mission {mission_id} {why}")
            reached = [key]
        elif not reached:
            raise Refused(f"mission {mission_id} is not paused at a checkpoint")
        tx = self.store.tx().decided()
        freed = [t for key in reached for t in self._release(tx, m, key, by=by, note=note)]
        self.store.submit(tx)
        for t in freed:
            self.make_ready(t)
        return f"resumed {', '.join(k[1] for k in reached)} of mission {mission_id}" + (
            f" ({len(freed)} task(s) may run)" if freed else "")


def paused_at(m: Mission) -> list[str]:
    """The checkpoints a mission is paused at (what ``polpo status`` shows)."""
    return sorted(k[1] for k, s in m.holds.items() if k[0] is HoldKind.CHECKPOINT and s.status is HoldStatus.REACHED)
