"""The daemon's working copy of missions, tasks, attempts and assessments.

The store is the truth; these objects mirror its rows so the engine can decide without a query per step.
Every change to them is written through a ``Tx`` before anything acts on it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from polpo.checks.base import CheckOutcome
from polpo.mission.schema import MissionSpec, Notifications, TaskSpec
from polpo.model.doc import MissionDoc
from polpo.model.holds import HoldKind, HoldState
from polpo.model.spend import SpendRows
from polpo.model.status import (
    AssessmentStatus,
    AttemptKind,
    AttemptStatus,
    GateStatus,
    MissionStatus,
    TaskStatus,
)

__all__ = ["Assessment", "Attempt", "Mission", "Task"]


@dataclass(eq=False)
class Attempt:
    id: str
    task_id: str
    mission_id: str
    number: int
    kind: AttemptKind
    agent: str
    status: AttemptStatus
    started_at: datetime
    prompt: str = ""
    pid: int | None = None
    pid_ticks: int | None = None
    exit_code: int | None = None
    signal: int | None = None
    timed_out: bool = False
    error: str | None = None
    stdout_tail: str = ""
    stderr_tail: str = ""
    stdout_bytes: int = 0
    stderr_bytes: int = 0
    duration: float | None = None
    files: dict[str, Any] | None = None  # created/modified/deleted lists + attributed/tracking/note (polpo.changes)
    verdict: str | None = None  # passed | failed, once assessed
    finished_at: datetime | None = None
    model: str | None = None
    outcomes: list[dict[str, Any]] | None = None
    tokens: int | None = None
    cost: float | None = None
    tokens_in: int | None = None
    tokens_out: int | None = None
    permanent: bool = False  # it could not start for a reason a new attempt cannot change
    node: str | None = None  # the node that ran it ([daemon] node)
    transcript: list[dict[str, Any]] | None = None  # stored in its own table; kept here for the reviewers

    @property
    def agent_ok(self) -> bool:
        """The agent ran and said it succeeded (exit 0, no timeout, no spawn error)."""
        return self.exit_code == 0 and not self.timed_out and self.error is None


@dataclass(eq=False)
class Assessment:
    id: str
    attempt_id: str
    task_id: str
    trigger: AttemptKind
    status: AssessmentStatus
    created_at: datetime
    passed: bool | None = None
    message: str | None = None
    finished_at: datetime | None = None
    checks: list[CheckOutcome] = field(default_factory=list)
    global_score: float | None = None
    scores: list[dict[str, Any]] | None = None


@dataclass(eq=False, slots=True)
class Task:
    """A task's state. Its spec stays in the mission's :class:`MissionDoc` as JSON while it waits: :attr:`spec`
    parses it on first use and keeps it until the board drops it (:meth:`drop_spec`) when the turn ends."""

    id: str
    mission_id: str
    idx: int
    title: str
    agent: str
    doc: MissionDoc  # the mission's document; this task is its ``idx``-th
    status: TaskStatus
    updated_at: datetime
    reason: str | None = None
    attempts: int = 0
    retries: int = 0
    fix_attempts: int = 0
    total_fixes: int = 0
    interruptions: int = 0
    next_kind: AttemptKind = AttemptKind.INITIAL
    feedback: str | None = None
    started_at: datetime | None = None
    finished_at: datetime | None = None
    score: float | None = None  # global score of the assessment that passed it (LLM review), else None
    escalation_level: int = 0
    model: str | None = None  # model override after escalation
    judge_used: bool = False
    expectations: list[dict[str, Any]] | None = None  # judge-corrected expectations (JSON), else the spec's
    waiting_for: str | None = None  # what it waits for from a person (lifecycle.waiting_for), None when it does not
    questions: int = 0  # questions asked and tool calls that waited for approval (polpo.model.questions)
    # derived from the mission's tasks and gates, not stored (tuples: most are empty, and () is shared)
    deps: tuple[str, ...] = ()
    dependents: tuple[str, ...] = ()
    waiting_on: int = 0  # dependencies not done + gates not passed
    gates: tuple[str, ...] = ()  # names of gates that block this task
    _spec: TaskSpec | None = field(default=None, init=False, repr=False)

    @property
    def terminal(self) -> bool:
        return self.status.terminal

    @property
    def spec(self) -> TaskSpec:
        """The task's spec, parsed from the mission's stored JSON on first use (kept until :meth:`drop_spec`)."""
        s = self._spec
        if s is None:
            s = self._spec = self.doc.task(self.idx)
        return s

    @property
    def spec_loaded(self) -> bool:
        return self._spec is not None

    def drop_spec(self) -> None:
        """Forget the parsed spec (the turn ended); the next use parses it again."""
        self._spec = None

    # read while the task waits: from the document, never by parsing the spec
    @property
    def priority(self) -> float:
        return self.doc.priority(self.idx)

    @property
    def deadline(self) -> Any:
        return self.doc.deadline(self.idx)

    @property
    def notifications(self) -> Notifications | None:
        return self.doc.notifications(self.idx)


@dataclass(eq=False)
class Mission:
    id: str
    seq: int
    name: str
    source: str
    hash: str
    run: int
    doc: MissionDoc  # the stored document; ``spec`` is its head
    workspace: Path
    status: MissionStatus
    created_at: datetime
    warnings: list[str] = field(default_factory=list)
    reason: str | None = None
    report: dict[str, Any] | None = None
    finished_at: datetime | None = None
    home: str | None = None  # the node its tasks run on ("affinity": "node"); None: any node
    tasks: dict[str, Task] = field(default_factory=dict)  # id -> task, in file order
    open_tasks: int = 0  # not terminal
    closed: set[str] = field(default_factory=set)  # tasks counted as finished (the board decides each one once)
    gate_state: dict[str, GateStatus] = field(default_factory=dict)
    # derived by wiring: gate name -> afterTasks not yet terminal; task title -> gates waiting on it
    gate_pending: dict[str, int] = field(default_factory=dict)
    gates_after: dict[str, list[str]] = field(default_factory=dict)
    spent: SpendRows = field(default_factory=lambda: SpendRows())
    """What this node's calls for the mission spent (the rows it wrote): the report's spend."""
    # checkpoints and delays (polpo.engine.holds): stored state by (kind, name); wired like the gates
    holds: dict[tuple[HoldKind, str], HoldState] = field(default_factory=dict)
    hold_pending: dict[tuple[HoldKind, str], int] = field(default_factory=dict)
    holds_after: dict[str, list[tuple[HoldKind, str]]] = field(default_factory=dict)
    _by_title: dict[str, Task] = field(default_factory=dict, repr=False)

    @property
    def spec(self) -> MissionSpec:
        """The mission's spec; its ``tasks`` parse from the stored JSON on each access (use the tasks' ``spec``)."""
        return self.doc.head

    @spec.setter
    def spec(self, value: MissionSpec) -> None:
        """A new document from ``value`` (tests and tools that change a spec in memory; the store keeps its own)."""
        self.doc = MissionDoc.of(value)

    def task_by_title(self, title: str) -> Task | None:
        """O(1) after the first call: titles are unique and a mission's tasks never change."""
        if len(self._by_title) != len(self.tasks):
            self._by_title = {t.title: t for t in self.tasks.values()}
        return self._by_title.get(title)
