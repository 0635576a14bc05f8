"""Quality metrics per task, agent and mission, computed from the store (what Polpo's QualityController reports).

Computed on demand from rows the daemon already keeps, so they survive restarts and cannot drift from the
record (Polpo kept them in memory and, in production, never recorded assessments or retries). The
numbers are true aggregates of the raw rows, not running averages: ``min``/``max`` are real extremes, and
``avgScore`` divides by the assessments that *have* a score.

What counts, per level:

* **assessments**: completed rows of ``assessments`` (``status = complete``; every trigger, including
  re-assessments after the expectation judge). ``avgScore``/``minScore``/``maxScore`` use ``global_score``
  where not null; ``dimensionScores`` averages each dimension per assessment first (an assessment with two
  LLM reviews counts once), then across assessments.
* **retries / fixes**: a task's ``retries`` / ``total_fixes`` columns; a mission sums its tasks'; an agent
  counts the ``retry`` / ``fix`` attempts it ran.
* **deadlines**: ``sla_marks`` of kind ``met`` / ``violated`` (each entity has at most one of each). A task
  counts its own marks; a mission counts its tasks' marks and its own; an agent counts the marks of the tasks
  assigned to it.
* **agent**: an assessment is credited to the agent whose attempt was assessed (after an escalation to a
  fallback agent, the earlier attempts stay with the first agent).
* **spread**: ``dimensionSpread`` is, per dimension, the mean over assessments of the standard deviation of the
  judges' votes (every reviewer run and sample): how much the panel disagreed, not how the scores moved.
* **judge cache**: ``judgeCache {hits, misses}`` sums what each llm_review check recorded (``[judge] cache``).

Filters narrow the rows, then every level aggregates what is left: ``mission`` keeps one mission's rows;
``agent`` keeps the tasks assigned to that agent or attempted by it, their missions aggregated over those
tasks only, and that agent's own row.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from polpo.store.read import AssessmentRow, MarkRow, ReviewRow, Snapshot, TaskRow, metrics_snapshot
from polpo.store.spend_read import spend

__all__ = ["MetricsReport", "QualityMetrics", "aggregate", "compute", "dimension_averages", "dimension_spread",
           "quality_metrics", "with_spend"]

if TYPE_CHECKING:
    from polpo.store.read import Conn

EntityType = Literal["task", "agent", "mission"]


@dataclass
class QualityMetrics:
    entity_id: str
    entity_type: EntityType
    total_assessments: int = 0
    passed_assessments: int = 0
    avg_score: float | None = None
    min_score: float | None = None
    max_score: float | None = None
    dimension_scores: dict[str, float] = field(default_factory=dict)
    dimension_spread: dict[str, float] = field(default_factory=dict)
    cache_hits: int = 0
    cache_misses: int = 0
    total_retries: int = 0
    total_fixes: int = 0
    deadlines_met: int = 0
    deadlines_missed: int = 0
    spend_usd: float = 0.0
    passed_tasks: int = 0
    cost_unknown: list[str] = field(default_factory=list)  # models whose calls have no price
    context: dict[str, str] = field(default_factory=dict)  # task: missionId, title, agent

    def to_json(self) -> dict[str, Any]:
        return {"entityId": self.entity_id, "entityType": self.entity_type, **self.context,
                "totalAssessments": self.total_assessments, "passedAssessments": self.passed_assessments,
                "avgScore": _r(self.avg_score), "minScore": _r(self.min_score), "maxScore": _r(self.max_score),
                "dimensionScores": {k: _r(v) for k, v in self.dimension_scores.items()},
                "dimensionSpread": {k: _r(v) for k, v in self.dimension_spread.items()},
                "judgeCache": {"hits": self.cache_hits, "misses": self.cache_misses},
                "totalRetries": self.total_retries, "totalFixes": self.total_fixes,
                "deadlinesMet": self.deadlines_met, "deadlinesMissed": self.deadlines_missed,
                "spendUsd": round(self.spend_usd, 6), "passedTasks": self.passed_tasks,
                "costPerPassedTask": _r(self.cost_per_passed_task), "costUnknown": self.cost_unknown}

    @property
    def cost_per_passed_task(self) -> float | None:
        """USD spent on the entity's tasks (passed or not) per task that passed; None when none passed."""
        return self.spend_usd / self.passed_tasks if self.passed_tasks else None


def _r(v: float | None) -> float | None:
    return None if v is None else round(v, 4)


@dataclass
class MetricsReport:
    missions: list[QualityMetrics]
    agents: list[QualityMetrics]
    tasks: list[QualityMetrics]

    def to_json(self) -> dict[str, Any]:
        return {"missions": [m.to_json() for m in self.missions], "agents": [m.to_json() for m in self.agents],
                "tasks": [m.to_json() for m in self.tasks]}


# ------------------------------------------------------------------------------------------ pure math
def dimension_averages(assessments: Iterable[AssessmentRow]) -> dict[str, float]:
    """Mean per dimension: within an assessment first, then across the assessments that scored it."""
    per: dict[str, list[float]] = defaultdict(list)
    for a in assessments:
        mine: dict[str, list[float]] = defaultdict(list)
        for s in a.scores:
            name, score = s.get("dimension") or s.get("name"), s.get("score")
            if isinstance(name, str) and isinstance(score, int | float) and not isinstance(score, bool):
                mine[name].append(float(score))
        for name, vals in mine.items():
            per[name].append(sum(vals) / len(vals))
    return {name: sum(v) / len(v) for name, v in sorted(per.items())}


def dimension_spread(assessments: Iterable[AssessmentRow]) -> dict[str, float]:
    """Mean per dimension of the stored vote spread (σ of the judges' votes), over the assessments that have it."""
    per: dict[str, list[float]] = defaultdict(list)
    for a in assessments:
        for s in a.scores:
            name, spread = s.get("dimension"), s.get("spread")
            std = spread.get("std") if isinstance(spread, dict) else None
            if isinstance(name, str) and isinstance(std, int | float) and not isinstance(std, bool):
                per[name].append(float(std))
    return {name: sum(v) / len(v) for name, v in sorted(per.items())}


def aggregate(entity_id: str, entity_type: EntityType, assessments: Sequence[AssessmentRow], *,
              retries: int = 0, fixes: int = 0, marks: Iterable[MarkRow] = (),
              reviews: Iterable[ReviewRow] = ()) -> QualityMetrics:
    """One entity's metrics from its rows."""
    scores = [a.global_score for a in assessments if a.global_score is not None]
    kinds = [m.kind for m in marks]
    reviews = list(reviews)
    return QualityMetrics(
        entity_id=entity_id, entity_type=entity_type, total_assessments=len(assessments),
        passed_assessments=sum(1 for a in assessments if a.passed),
        avg_score=sum(scores) / len(scores) if scores else None,
        min_score=min(scores) if scores else None, max_score=max(scores) if scores else None,
        dimension_scores=dimension_averages(assessments), dimension_spread=dimension_spread(assessments),
        cache_hits=sum(r.hits for r in reviews), cache_misses=sum(r.misses for r in reviews),
        total_retries=retries, total_fixes=fixes,
        deadlines_met=kinds.count("met"), deadlines_missed=kinds.count("violated"))


def with_spend(row: QualityMetrics, tasks: Iterable[TaskRow], spend: dict[str, dict[str, Any]]) -> QualityMetrics:
    """Add what ``tasks`` spent (every LLM call made for them) and how many of them passed."""
    tasks = list(tasks)
    tallies = [spend[t.id] for t in tasks if t.id in spend]
    row.spend_usd = math.fsum(t.get("usd", 0.0) for t in tallies)
    row.passed_tasks = sum(1 for t in tasks if t.status == "done")
    row.cost_unknown = sorted({m for t in tallies for m in t.get("costUnknown", [])})
    return row


def compute(snap: Snapshot, *, agent: str | None = None) -> MetricsReport:
    """Every level's metrics from a snapshot; ``agent`` narrows as the module docstring says."""
    tasks = snap.tasks
    if agent is not None:
        attempted = {a.task_id for a in snap.attempts if a.agent == agent}
        tasks = [t for t in tasks if t.agent == agent or t.id in attempted]
    task_ids = {t.id for t in tasks}
    by_task: dict[str, list[AssessmentRow]] = defaultdict(list)
    for a in snap.assessments:
        if a.task_id in task_ids:
            by_task[a.task_id].append(a)
    task_marks: dict[str, list[MarkRow]] = defaultdict(list)
    mission_marks: dict[str, list[MarkRow]] = defaultdict(list)
    for m in snap.marks:
        if m.entity_type == "task" and m.entity_id in task_ids:
            task_marks[m.entity_id].append(m)
            mission_marks[m.mission_id].append(m)
        elif m.entity_type == "mission" and agent is None:
            mission_marks[m.mission_id].append(m)

    reviews_of: dict[str, list[ReviewRow]] = defaultdict(list)
    for r in snap.reviews:
        reviews_of[r.task_id].append(r)
    task_rows = [aggregate(t.id, "task", by_task[t.id], retries=t.retries, fixes=t.total_fixes,
                           marks=task_marks[t.id], reviews=reviews_of[t.id])
                 for t in tasks]
    for row, t in zip(task_rows, tasks, strict=True):
        row.context = {"missionId": t.mission_id, "title": t.title, "agent": t.agent}
        with_spend(row, [t], snap.spend)

    mission_rows = []
    for mid in snap.mission_order:
        mine = [t for t in tasks if t.mission_id == mid]
        if agent is not None and not mine:
            continue
        mission_rows.append(aggregate(
            mid, "mission", [a for t in mine for a in by_task[t.id]], retries=sum(t.retries for t in mine),
            fixes=sum(t.total_fixes for t in mine), marks=mission_marks[mid],
            reviews=[r for t in mine for r in reviews_of[t.id]]))
        with_spend(mission_rows[-1], mine, snap.spend)

    agent_names = sorted({t.agent for t in snap.tasks if t.agent} | {a.agent for a in snap.assessments if a.agent}
                         | {a.agent for a in snap.attempts if a.agent})
    if agent is not None:
        agent_names = [agent] if agent in agent_names else []
    assigned: dict[str, set[str]] = defaultdict(set)
    for t in snap.tasks:
        assigned[t.agent].add(t.id)
    agent_rows = [aggregate(
        name, "agent", [a for a in snap.assessments if a.agent == name],
        retries=sum(1 for a in snap.attempts if a.agent == name and a.kind == "retry"),
        fixes=sum(1 for a in snap.attempts if a.agent == name and a.kind == "fix"),
        marks=[m for m in snap.marks if m.entity_type == "task" and m.entity_id in assigned[name]],
        reviews=[r for tid in assigned[name] for r in reviews_of[tid]])
        for name in agent_names]
    for row in agent_rows:
        with_spend(row, [t for t in snap.tasks if t.agent == row.entity_id], snap.spend)
    return MetricsReport(missions=mission_rows, agents=agent_rows, tasks=task_rows)


def quality_metrics(con: Conn, *, mission: str | None = None,
                    agent: str | None = None) -> MetricsReport:
    """Metrics from an open connection (``polpo.store.read.connect``), filtered by mission id and/or agent."""
    snap = metrics_snapshot(con, mission=mission)
    snap.spend = {tid: tally for m in spend(con, snap.mission_order).values() for tid, tally in m["byTask"].items()}
    return compute(snap, agent=agent)
