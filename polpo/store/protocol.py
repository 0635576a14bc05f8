"""The store seam: what the engine needs from a store, whatever keeps the data (SQLite, memory, PostgreSQL).

Writing is one primitive: submit a :class:`~polpo.store.tx.Tx` (rows + events); the store makes it durable, in
submission order, then publishes its events. Reading is a handful of named queries that return records, so
no SQL leaves ``polpo/store/``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from polpo.checks.base import CheckOutcome
from polpo.events.catalog import Event
from polpo.events.log import EventLog
from polpo.model.questions import Question
from polpo.model.records import Assessment, Attempt, Mission
from polpo.model.schedule import Schedule
from polpo.store.errors import StoreError
from polpo.store.prune import Pruned
from polpo.store.rows import SourceRecord
from polpo.store.tx import Tx

__all__ = ["CommandRecord", "LoadedMission", "SourceRecord", "Store", "StoreError",
           "Subscriber"]

Subscriber = Callable[[Event], None]


@dataclass(frozen=True)
class CommandRecord:
    """A retry / cancel / approve request queued by the CLI."""

    id: int
    kind: str
    target: str


@dataclass
class LoadedMission:
    """A mission with its tasks and gate states, and each task's latest attempt."""

    mission: Mission
    attempts: dict[str, Attempt] = field(default_factory=dict)


class Store(Protocol):
    event_log: EventLog | None
    node: str | None  # stamped on every event (``[daemon] node``)
    term: int | None  # the leadership term whose decisions are written (None: one node, it always leads)
    commits: int
    identity: str  # the store's UUID, written once at creation (polpo.store.identity)
    lost: str | None  # why nothing more is written: the database was deleted or replaced while running
    fenced: str | None  # why this node writes nothing more: it lost its lease (a cluster node)
    on_lost: Callable[[str], None] | None

    @property
    def last_seq(self) -> int: ...

    @property
    def where(self) -> str: ...

    def away(self, exc: BaseException) -> bool:
        """Whether a read's ``exc`` is an outage that passes (try again), not an answer about the read."""
        ...

    async def watch_identity(self) -> None:
        """Runs until the database is deleted or replaced, then stops the writer and calls ``on_lost``."""
        ...

    # -- writing -------------------------------------------------------------------------------------------
    def tx(self) -> Tx: ...

    def submit(self, tx: Tx) -> Tx:
        """Queue a change; it becomes durable in submission order. Does not wait."""
        ...

    async def commit(self, tx: Tx) -> None:
        """Queue a change and wait until it is durable and its events are published."""
        ...

    async def flush(self) -> None: ...

    def subscribe(self, fn: Subscriber) -> None: ...

    async def run_writer(self) -> None:
        """The single writer. Runs until cancelled; drains what is queued before it stops."""
        ...

    async def catch_up_log(self) -> int: ...

    async def close(self) -> None: ...

    # -- reading -------------------------------------------------------------------------------------------
    # what a daemon reads depends on its live work, never on its whole history: one file's record, one id, a page
    async def source(self, path: str) -> SourceRecord | None:
        """What became of the last bytes seen at ``path``."""
        ...

    async def sources_at(self, paths: Sequence[str]) -> list[SourceRecord]:
        """The records of those of ``paths`` that have one (the intake's start-up scan, a chunk at a time)."""
        ...

    async def mission_exists(self, mission_id: str) -> bool: ...

    async def last_mission_seq(self) -> int:
        """The newest mission's acceptance number (0: none)."""
        ...

    async def open_mission_ids(self) -> list[str]:
        """Missions still running or cancelling, in acceptance order."""
        ...

    async def load_mission(self, mission_id: str) -> LoadedMission | None: ...

    async def open_assessment(self, attempt_id: str) -> Assessment | None:
        """The attempt's assessment not decided yet (running, or undecided: a person decides) with the checks
        already stored, if any."""
        ...

    async def last_check(self, attempt_id: str, check_idx: int) -> CheckOutcome | None:
        """Check ``check_idx`` of the attempt's last complete assessment, or None."""
        ...

    async def sla_marks(self, mission_id: str) -> list[tuple[str, str]]:
        """(entity id, kind) of every SLA mark recorded for the mission and its tasks."""
        ...

    async def spend_rows(self, period: str) -> list[dict[str, Any]]:
        """The ``spend`` rows a daemon starts from: its open missions' and their tasks', and the day ``period``'s."""
        ...

    async def task_scores(self, task_id: str) -> list[tuple[int, str, float | None]]:
        """Each attempt's ``(number, kind, score of its last complete assessment)``, oldest first."""
        ...

    async def read_task_spend(self, m: Mission, task_id: str) -> None:
        """Every attempt's and review's spend of ``task_id``, whichever node ran it, onto ``m.spent``."""
        ...

    async def spend_now(self, mission_id: str | None, period: str | None) -> list[dict[str, Any]]:
        """The ``spend`` rows of a mission (its own and its tasks') and of a day, as every node counted them."""
        ...

    async def task_dimensions(self, task_id: str, check_idx: int) -> tuple[str, Any] | None:
        """(source, dimension list) stored for a task's review check, if any."""
        ...

    async def task_baselines(self, task_id: str) -> dict[int, float]:
        """Each metric's value before the task's first attempt, by its position in the task's expectations."""
        ...

    async def task_questions(self, task_id: str) -> list[Question]:
        """The task's questions and tool calls that waited for approval, oldest first (polpo.model.questions)."""
        ...

    async def due_questions(self, now: str) -> list[tuple[str, str, str, str]]:
        """``(id, task_id, mission_id, kind)`` of the questions still asked whose expiry is before ``now`` (ISO)."""
        ...

    async def queued_commands(self) -> list[CommandRecord]: ...

    async def schedules(self) -> list[Schedule]:
        """Every schedule not removed (polpo.model.schedule)."""
        ...

    async def events_after(self, seq: int, limit: int | None = None) -> list[Event]:
        """The stored events after ``seq``, oldest first (at most ``limit``)."""
        ...

    # -- retention (polpo.store.prune: what each removes, declared once) -------------------------------------
    async def prune_candidates(self, before: str, limit: int, keep_labelled: bool) -> list[str]: ...

    async def schedule_runs_beyond(self, source: str, keep: int, limit: int, keep_labelled: bool) -> list[str]: ...

    async def export_missions(self, ids: Sequence[str]) -> dict[str, dict[str, list[dict[str, Any]]]]: ...

    async def prune_missions(self, ids: Sequence[str], before: str) -> list[Pruned]: ...

    async def old_sources(self, after: tuple[str, str], before: str, limit: int) -> list[tuple[str, str]]: ...

    async def prune_sources(self, paths: Sequence[str]) -> int: ...

    async def prune_events(self, after: int, before: str, window: int) -> tuple[int, int | None]: ...

    async def prune_leftovers(self, before: str, before_day: str) -> int: ...

    async def reclaim(self, pages: int) -> int:
        """Give up to ``pages`` freed pages back to the file system (SQLite); how many went."""
        ...
