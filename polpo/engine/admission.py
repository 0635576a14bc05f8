"""Mission intake bookkeeping: what each file's bytes became, mission ids and run numbers, workspaces.

Ids: a mission is named after its file (``missions/calculator.json`` → ``calculator``); a new run of the same
file after the first finished is ``calculator#2``; another file with the same stem gets ``calculator-2``.
Tasks are ``MISSION:N`` (N = position in the file).
"""

from __future__ import annotations

import re
from collections import OrderedDict
from collections.abc import Callable, Iterable
from datetime import datetime
from pathlib import Path

import anyio

from polpo.agents.registry import AgentFactory
from polpo.clock import Clock
from polpo.config import Config
from polpo.engine.board import MissionBoard, wire
from polpo.engine.isolation import isolation_warnings
from polpo.engine.trim import trim
from polpo.events.catalog import MissionAccepted, MissionRejected, TaskCreated
from polpo.mission.schema import MissionSpec
from polpo.mission.security import mission_workspace
from polpo.model.doc import MissionDoc
from polpo.model.records import Mission, Task
from polpo.model.status import MissionStatus, SourceOutcome, TaskStatus
from polpo.store.protocol import SourceRecord, Store
from polpo.store.tx import Tx

__all__ = ["CACHED_SOURCES", "TASK_CHUNK", "Admission", "SourceCache", "created", "missing_tasks", "new_task",
           "slugify"]

TASK_CHUNK = 1000  # task rows and task:created events per transaction when a mission is accepted (default)

_SLUG = re.compile(r"[^A-Za-z0-9._-]+")


def slugify(stem: str) -> str:
    return _SLUG.sub("-", stem).strip("-.") or "mission"


def created(tx: Tx, tasks: Iterable[Task]) -> Tx:
    """The rows of new tasks and their ``task:created`` events."""
    for t in tasks:
        tx.task(t)
        tx.event(TaskCreated(title=t.title, agent=t.agent, depends_on=list(t.deps), priority=t.priority),
                 mission_id=t.mission_id, task_id=t.id)
    return tx


def new_task(m: Mission, i: int, default_agent: str | None, now: datetime) -> Task:
    """Pending task ``i`` of ``m``; its spec stays JSON in the mission's document until the task starts."""
    return Task(id=f"{m.id}:{i + 1}", mission_id=m.id, idx=i, title=m.doc.titles[i],
                agent=m.doc.assignees[i] or default_agent or "", doc=m.doc, status=TaskStatus.PENDING,
                updated_at=now)


def missing_tasks(m: Mission, default_agent: str | None) -> list[Task]:
    """Tasks of the mission's spec without a row (a crash while the mission was being written): added, pending."""
    have = {t.idx for t in m.tasks.values()}
    if len(have) == len(m.doc):
        return []
    out = []
    for i in range(len(m.doc)):
        if i not in have:
            t = new_task(m, i, default_agent, m.created_at)
            m.tasks[t.id] = t
            out.append(t)
    if out:
        m.tasks = dict(sorted(m.tasks.items(), key=lambda kv: kv[1].idx))
    return out


def rejection_text(reason: str, errors: list[dict[str, str]], more: int | None) -> str:
    """Why a file was rejected, in one line for its source row (what ``polpo status`` and the attention list say):
    the verdict and its first problems, each at its JSON path."""
    shown = "; ".join(f"{e['path']}: {e['message']}" if e.get("path") not in (None, "$") else e["message"]
                      for e in errors[:3])
    rest = len(errors) - 3 + (more or 0)
    return f"{reason}: {shown}" + (f" (and {rest} more)" if rest > 0 else "") if shown else reason


class Admission:
    """Ids, runs and what each file's bytes became, read from the store when a file needs them: nothing is held
    per finished mission (a bounded cache of the files seen last spares the reads of an editor's extra events)."""

    def __init__(self, cfg: Config, store: Store, clock: Clock, board: MissionBoard, agents: AgentFactory) -> None:
        self.cfg = cfg
        self.store = store
        self.clock = clock
        self.board = board
        self.agents = agents
        self.sources = SourceCache(CACHED_SOURCES)
        self.next_seq = 1
        self.task_chunk = TASK_CHUNK
        self._naming = anyio.Lock()  # one id chosen at a time, until its mission row is stored

    async def load(self) -> None:
        """Where the acceptance numbers go on. Nothing per finished mission or file is read: a file's record, an
        id, a run number are read when a file needs them."""
        self.sources.clear()  # (a new leader: another node may have written them meanwhile)
        self.next_seq = await self.store.last_mission_seq() + 1

    async def source(self, path: str) -> SourceRecord | None:
        """What became of the last bytes seen at ``path``."""
        found = self.sources.get(path)
        if found is None:
            found = await self.store.source(path)
            if found is not None:
                self.sources.put(found)
        return found

    def active_for_source(self, source: str) -> Mission | None:
        return next((m for m in self.board.missions.values() if m.source == source), None)

    async def new_mission_id(self, source: str) -> tuple[str, int]:
        """``stem``, ``stem#2`` … for the runs of one file; ``stem-2`` when another file took the stem's id."""
        known = await self.source(source)
        run = (known.runs if known is not None else 0) + 1
        base = slugify(Path(source).stem)
        mid = base if run == 1 else f"{base}#{run}"
        n = 2
        while mid in self.board.missions or await self.store.mission_exists(mid):
            mid = f"{base}-{n}" if run == 1 else f"{base}-{n}#{run}"
            n += 1
        return mid, run

    def workspace_for(self, mid: str, spec: MissionSpec, source: str) -> Path:
        if spec.workspace:  # intake has checked it lies below [security]'s roots (polpo.mission.security)
            return mission_workspace(spec.workspace, source)
        return self.cfg.state_dir / "workspaces" / mid.replace("#", "-")

    def build_mission(self, *, mid: str, run: int, spec: MissionSpec, source: str, digest: str,
                      warnings: list[str]) -> Mission:
        """The mission and its pending tasks. It keeps ``spec`` as its stored JSON (:class:`MissionDoc`), not as
        models: a ``spec`` from :func:`polpo.intake.check.check_mission` is a document's head already."""
        now = self.clock.now()
        m = Mission(id=mid, seq=self.next_seq, name=spec.name or Path(source).stem, source=source, hash=digest,
                    run=run, doc=MissionDoc.of(spec), workspace=self.workspace_for(mid, spec, source),
                    status=MissionStatus.RUNNING, created_at=now, warnings=warnings,
                    home=None if spec.settings.affinity == "any" else self.cfg.daemon.node)
        self.next_seq += 1
        default_agent = self.agents.default_agent(spec)
        for i in range(len(m.doc)):
            t = new_task(m, i, default_agent, now)
            m.tasks[t.id] = t
        wire(m)
        return m

    async def accept(self, *, spec: MissionSpec, source: str, digest: str, warnings: list[str],
                     before: Callable[[Tx, str], None] | None = None, stamp: str | None = None,
                     schedule: str | None = None) -> Mission:
        """Start a run of a valid mission: its row, ``mission:accepted``, then its tasks' rows and ``task:created``.

        Tasks are written in chunks of :data:`TASK_CHUNK`, each committed before the next is built, so a mission
        of 50 000 tasks never holds 50 000 rows and events in memory at once. A crash between two chunks leaves
        a mission with fewer task rows than its stored spec has tasks; recovery creates the rest
        (:func:`missing_tasks`). Tasks of a committed chunk may start while later chunks are written.
        ``before(tx, mission_id)`` adds to the mission's own transaction (a schedule's firing and its cursor).
        ``stamp``: the file as it was read (polpo.intake.stamps), kept with its record. ``schedule``: the run is a
        firing of that schedule; the file's record stays the schedule's (its file is never filed away).
        """
        async with self._naming:  # (another accept, a schedule's firing, must not take the same id meanwhile)
            mid, run = await self.new_mission_id(source)
            # first, before anything is numbered or stored: a passing fault here (a read-only or full disk…) is
            # raised for the intake to try the file again later (polpo.fsfaults), and leaves nothing behind
            workspace = self.workspace_for(mid, spec, source)
            await anyio.to_thread.run_sync(lambda: workspace.mkdir(parents=True, exist_ok=True))
            m = self.build_mission(mid=mid, run=run, spec=spec, source=source, digest=digest, warnings=warnings)
            m.warnings = [*m.warnings, *isolation_warnings(m.doc, m.workspace)]
            # the validated spec as canonical JSON (m.doc): what a restart reads back is exactly what runs now
            tx = self.store.tx()
            if before is not None:
                before(tx, mid)
            tx.mission(m)
            if schedule is None:
                record = SourceRecord(source, digest, SourceOutcome.ACCEPTED, mid, run, stamp)
            else:
                known = await self.source(source)
                record = SourceRecord(source, digest, SourceOutcome.SCHEDULED, schedule, run,
                                      known.stamp if known is not None and known.hash == digest else None)
            self.sources.put(record)
            tx.source(record, m.created_at)
            tx.event(MissionAccepted(name=m.name, file=source, hash=digest, run=run, task_count=len(m.tasks),
                                     workspace=str(m.workspace), warnings=m.warnings), mission_id=mid)
            self.board.add(m)
            tasks = list(m.tasks.values())
            created(tx, tasks[:self.task_chunk])
            await self.store.commit(tx)
        for t in tasks[:self.task_chunk]:
            self.board.make_ready(t)
        for start in range(self.task_chunk, len(tasks), self.task_chunk):
            chunk = tasks[start:start + self.task_chunk]
            await self.store.commit(created(self.store.tx(), chunk))
            for t in chunk:
                self.board.make_ready(t)
        await anyio.to_thread.run_sync(trim)  # the check's and the chunks' garbage goes back before the next file
        return m

    def record(self, record: SourceRecord) -> None:
        """Remember what became of these bytes (so the same bytes again start nothing)."""
        self.sources.put(record)
        self.store.submit(self.store.tx().source(record, self.clock.now()))

    def reject(self, source: str, digest: str, *, reason: str, errors: list[dict[str, str]], lines: list[str],
               more: int | None = None, busy_with: str | None = None, known: SourceRecord | None = None,
               stamp: str | None = None) -> None:
        """``mission:rejected`` for these bytes, stored with the source row so a restart does not retry them
        (``known``: the path's record until now, whose run count it keeps)."""
        outcome = SourceOutcome.BUSY if busy_with else SourceOutcome.REJECTED
        record = SourceRecord(source, digest, outcome, busy_with, known.runs if known is not None else 0, stamp,
                              rejection_text(reason, errors, more))
        self.sources.put(record)
        tx = self.store.tx().source(record, self.clock.now())
        tx.event(MissionRejected(file=source, hash=digest, reason=reason, errors=errors, lines=lines, more=more),
                 mission_id=busy_with or slugify(Path(source).stem))
        self.store.submit(tx)


CACHED_SOURCES = 1024  # file records kept in memory (the files seen last)


class SourceCache:
    """The records of the files seen last (least recently used out): a bound, not a copy of the table."""

    def __init__(self, size: int) -> None:
        self.size = size
        self._items: OrderedDict[str, SourceRecord] = OrderedDict()

    def get(self, path: str) -> SourceRecord | None:
        found = self._items.get(path)
        if found is not None:
            self._items.move_to_end(path)
        return found

    def put(self, record: SourceRecord) -> None:
        self._items[record.path] = record
        self._items.move_to_end(record.path)
        while len(self._items) > self.size:
            self._items.popitem(last=False)

    def clear(self) -> None:
        self._items.clear()

    def __len__(self) -> int:
        return len(self._items)
