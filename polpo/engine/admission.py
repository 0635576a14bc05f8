"""Mission intake bookkeeping: what each file's bytes became, mission ids and run numbers, workspaces.

Ids: a mission is named after its file (``missions/calculator.json`` → ``calculator``); a new run of the same
file after the first finished is ``calculator#2``; another file with the same stem gets ``calculator-2``.
Tasks are ``MISSION:N`` (N = position in the file).
"""

from __future__ import annotations

import re
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

__all__ = ["TASK_CHUNK", "Admission", "created", "missing_tasks", "new_task", "slugify"]

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
    def __init__(self, cfg: Config, store: Store, clock: Clock, board: MissionBoard, agents: AgentFactory) -> None:
        self.cfg = cfg
        self.store = store
        self.clock = clock
        self.board = board
        self.agents = agents
        self.sources: dict[str, SourceRecord] = {}
        self.runs: dict[str, int] = {}  # source path -> last run number
        self.mission_ids: set[str] = set()
        self.next_seq = 1
        self.task_chunk = TASK_CHUNK

    async def load(self) -> None:
        """What earlier daemons admitted: sources, mission ids, run numbers."""
        for s in await self.store.sources():
            self.sources[s.path] = s
        for e in await self.store.mission_index():
            self.mission_ids.add(e.id)
            self.runs[e.source] = max(self.runs.get(e.source, 0), e.run)
            self.next_seq = max(self.next_seq, e.seq + 1)

    def active_for_source(self, source: str) -> Mission | None:
        return next((m for m in self.board.missions.values() if m.source == source), None)

    def new_mission_id(self, source: str) -> tuple[str, int]:
        run = self.runs.get(source, 0) + 1
        base = slugify(Path(source).stem)
        mid = base if run == 1 else f"{base}#{run}"
        n = 2
        while mid in self.mission_ids:
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

    def _register(self, m: Mission) -> None:
        self.mission_ids.add(m.id)
        self.runs[m.source] = max(self.runs.get(m.source, 0), m.run)

    async def accept(self, *, spec: MissionSpec, source: str, digest: str, warnings: list[str],
                     before: Callable[[Tx, str], None] | None = None) -> Mission:
        """Start a run of a valid mission: its row, ``mission:accepted``, then its tasks' rows and ``task:created``.

        Tasks are written in chunks of :data:`TASK_CHUNK`, each committed before the next is built, so a mission
        of 50 000 tasks never holds 50 000 rows and events in memory at once. A crash between two chunks leaves
        a mission with fewer task rows than its stored spec has tasks; recovery creates the rest
        (:func:`missing_tasks`). Tasks of a committed chunk may start while later chunks are written.
        ``before(tx, mission_id)`` adds to the mission's own transaction (a schedule's firing and its cursor).
        """
        mid, run = self.new_mission_id(source)
        # first, before anything is numbered or stored: a passing fault here (a read-only or full disk…) is raised
        # for the intake to try the file again later (polpo.fsfaults), and leaves nothing behind
        workspace = self.workspace_for(mid, spec, source)
        await anyio.to_thread.run_sync(lambda: workspace.mkdir(parents=True, exist_ok=True))
        m = self.build_mission(mid=mid, run=run, spec=spec, source=source, digest=digest, warnings=warnings)
        m.warnings = [*m.warnings, *isolation_warnings(m.doc, m.workspace)]
        # the validated spec as canonical JSON (m.doc): what a restart reads back is exactly what runs now
        tx = self.store.tx()
        if before is not None:
            before(tx, mid)
        tx.mission(m)
        self.sources[source] = SourceRecord(source, digest, SourceOutcome.ACCEPTED, mid)
        tx.source(source, digest, SourceOutcome.ACCEPTED, mid, m.created_at)
        tx.event(MissionAccepted(name=m.name, file=source, hash=digest, run=run, task_count=len(m.tasks),
                                 workspace=str(m.workspace), warnings=m.warnings), mission_id=mid)
        self._register(m)
        self.board.add(m)
        tasks = list(m.tasks.values())
        for start in range(0, len(tasks), self.task_chunk):
            chunk = tasks[start:start + self.task_chunk]
            created(tx, chunk)
            await self.store.commit(tx)
            for t in chunk:
                self.board.make_ready(t)
            tx = self.store.tx()
        await anyio.to_thread.run_sync(trim)  # the check's and the chunks' garbage goes back before the next file
        return m

    def record(self, source: str, digest: str, outcome: SourceOutcome, mission_id: str | None) -> None:
        """Remember what became of these bytes (so the same bytes again start nothing)."""
        self.sources[source] = SourceRecord(source, digest, outcome, mission_id)
        self.store.submit(self.store.tx().source(source, digest, outcome, mission_id, self.clock.now()))

    def reject(self, source: str, digest: str, *, reason: str, errors: list[dict[str, str]], lines: list[str],
               more: int | None = None, busy_with: str | None = None) -> None:
        """``mission:rejected`` for these bytes, stored with the source row so a restart does not retry them."""
        outcome = SourceOutcome.BUSY if busy_with else SourceOutcome.REJECTED
        self.sources[source] = SourceRecord(source, digest, outcome, busy_with)
        tx = self.store.tx().source(source, digest, outcome, busy_with, self.clock.now(),
                                    rejection_text(reason, errors, more))
        tx.event(MissionRejected(file=source, hash=digest, reason=reason, errors=errors, lines=lines, more=more),
                 mission_id=busy_with or slugify(Path(source).stem))
        self.store.submit(tx)

    def adopt(self, m: Mission) -> None:
        """A mission loaded back from the store (a restart, a retry of a finished one)."""
        self._register(m)
