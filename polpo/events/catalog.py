"""The event catalog: one payload type per event, and the event record as persisted and logged.

Names follow Polpo's catalog where Polpo has one (``task:transition``, ``assessment:complete`` …), so
notification rules written for Polpo keep working; ``mission:accepted`` / ``mission:rejected`` are ours,
because Polpo has no watched folder.

A payload is a frozen dataclass with snake_case fields; :mod:`polpo.events.pipeline` turns it into the
camelCase ``data`` object once, when the store stamps the event. A field whose default is ``None`` is left out
of ``data`` while it is ``None``; every other field is always present (``null`` included).

Longer than 400 lines because it is the one list of every event's payload (a few lines each): split, the catalog
would no longer be one place to read.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, ClassVar, TypeVar, dataclass_transform

import orjson

__all__ = ["ALL_EVENTS", "PAYLOADS", "Event", "Payload"]


class Payload:
    """Base of every event payload; ``NAME`` is the event's name."""

    __slots__ = ()
    NAME: ClassVar[str]


P = TypeVar("P", bound=Payload)


@dataclass_transform(frozen_default=True, kw_only_default=True)
def _event(name: str) -> Callable[[type[P]], type[P]]:
    """Class decorator: a frozen keyword-only payload dataclass registered under ``name``."""

    def wrap(cls: type[P]) -> type[P]:
        cls.NAME = name
        out = dataclass(frozen=True, slots=True, kw_only=True)(cls)
        PAYLOADS[name] = out
        return out

    return wrap


PAYLOADS: dict[str, type[Payload]] = {}

# ------------------------------------------------------------------------------------------------ missions


@_event("mission:accepted")
class MissionAccepted(Payload):
    name: str
    file: str
    hash: str
    run: int
    task_count: int
    workspace: str
    warnings: list[str]


@_event("mission:rejected")
class MissionRejected(Payload):
    file: str
    hash: str
    reason: str  # invalid | still running | internal error | not a regular file | too large | unreadable
    errors: list[dict[str, str]]  # [{path, message}]
    lines: list[str]  # "FILE: $.path: reason", as `polpo validate` prints them
    more: int | None = None  # problems left out of errors/lines


@_event("mission:completed")
class MissionCompleted(Payload):
    outcome: str  # completed | failed | cancelled
    all_passed: bool
    report: dict[str, Any]


@_event("mission:filed")
class MissionFiled(Payload):
    """A finished mission's file moved to the ``done/`` folder beside it (``[retention] finished_files``)."""

    file: str  # where it was
    to: str  # where it is now


@_event("mission:cancelled")
class MissionCancelled(Payload):
    by: str


@_event("mission:resumed")
class MissionResumed(Payload):
    by: str
    task_id: str


# ----------------------------------------------------------------------------- schedules (polpo.schedules)


@_event("schedule:created")
class ScheduleCreated(Payload):
    schedule_id: str
    file: str
    expression: str
    timezone: str
    next_run_at: str | None  # None: nothing left to fire


@_event("schedule:triggered")
class ScheduleTriggered(Payload):
    schedule_id: str
    expression: str
    scheduled_for: str  # the instant the firing belongs to (later than it when caught up or queued)
    catch_up: bool  # a firing missed while the daemon was down (catchUp)


@_event("schedule:skipped")
class ScheduleSkipped(Payload):
    schedule_id: str
    reason: str  # a run is active | missed while the daemon was down | queue full
    scheduled_for: str  # the newest firing let go
    count: int  # firings let go (at least: a long downtime is counted in part)


@_event("schedule:queued")
class ScheduleQueued(Payload):
    schedule_id: str
    scheduled_for: str
    behind: str  # the run it waits for
    queued: int  # firings waiting now


@_event("schedule:changed")
class ScheduleChanged(Payload):
    schedule_id: str
    action: str  # paused | resumed | removed
    by: str


@_event("schedule:expired")
class ScheduleExpired(Payload):
    schedule_id: str
    end_date: str | None = None  # None: its only instant has fired


# --------------------------------------------------------------------------------------------------- tasks


@_event("task:created")
class TaskCreated(Payload):
    title: str
    agent: str
    depends_on: list[str]
    priority: float


@_event("task:transition")
class TaskTransition(Payload):
    from_: str
    to: str
    trigger: str
    reason: str | None = None
    attempt: int | None = None
    kind: str | None = None
    agent: str | None = None
    exit_code: int | None = None
    error: str | None = None


@_event("task:recovered")
class TaskRecovered(Payload):
    previous_status: str
    attempt: int | None
    action: str
    interruptions: int | None = None


@_event("task:timeout")
class TaskTimeout(Payload):
    elapsed: float | None
    timeout: float | None


@_event("task:fix")
class TaskFix(Payload):
    attempt: int
    max_fix: int
    check: str | None = None  # the first failed check, "type label"


@_event("task:retry")
class TaskRetry(Payload):
    attempt: int
    max_retries: int
    manual: bool | None = None
    reason: str | None = None
    check: str | None = None


@_event("task:retry:blocked")
class TaskRetryBlocked(Payload):
    reason: str


@_event("task:maxRetries")
class TaskMaxRetries(Payload):
    retries: int
    max_retries: int
    escalating: bool | None = None


@_event("task:approved")
class TaskApproved(Payload):
    next: str


@_event("task:error")
class TaskError(Payload):
    """A bug in polpo while handling this task: the task failed with this error; the daemon went on."""

    error: str
    where: str


# -------------------------------------------------------------------------------------------------- agents


@_event("agent:spawned")
class AgentSpawned(Payload):
    agent_name: str
    attempt: int
    pid: int | None
    kind: str
    model: str | None


@_event("agent:finished")
class AgentFinished(Payload):
    agent_name: str
    attempt: int
    exit_code: int | None
    duration: float | None
    timed_out: bool
    error: str | None
    files_changed: int
    files_note: str | None = None  # why the files are not attributed ("shared workspace: …"), when they are not
    model: str | None = None  # an LLM agent's model and its calls' spend (cost None: the price is unknown)
    tokens_in: int | None = None
    tokens_out: int | None = None
    cost: float | None = None
    mcp: dict[str, dict[str, float]] | None = None  # its MCP tool calls: {server: {calls, errors, seconds}}


# per-task isolation (polpo.engine.isolation): a task in its own worktree, its work merged or in conflict


@_event("task:worktree")
class TaskWorktree(Payload):
    path: str
    branch: str
    start: str  # the commit it starts from: the mission's base with its dependencies' work merged in
    repository: str
    note: str | None = None  # e.g. the repository has uncommitted changes, which the worktree does not have


@_event("task:merged")
class TaskMerged(Payload):
    branch: str
    into: str
    commit: str | None  # the task's last commit (None: it changed nothing)
    merge: str | None  # the merge commit (None: nothing new to merge)


@_event("task:merge:conflict")
class TaskMergeConflict(Payload):
    branch: str
    into: str
    files: list[str]


@_event("agent:interrupted")
class AgentInterrupted(Payload):
    """An LLM agent's own model provider failed (unreachable, 5xx, timeouts, auth): the attempt is interrupted,
    not failed; it runs again after ``delay`` s, or the task waits on hold (``waiting``)."""

    attempt: int
    reason: str
    retryable: bool
    retry: int
    max_retries: int
    delay: float | None = None
    waiting: bool = False


@_event("escalation:triggered")
class EscalationTriggered(Payload):
    level: int
    handler: str
    target: str
    agent: str
    model: str | None


# ---------------------------------------------------------------------------------------------- assessment


@_event("assessment:started")
class AssessmentStarted(Payload):
    attempt: int
    trigger: str
    total: int


@_event("assessment:check:started")
class CheckStarted(Payload):
    index: int
    total: int
    type: str
    label: str


@_event("assessment:check:complete")
class CheckComplete(Payload):
    index: int
    total: int
    type: str
    label: str
    passed: bool
    message: str
    global_score: float | None = None
    scores: list[dict[str, Any]] | None = None
    error: str | None = None  # the check could not be done (not a fail): the assessment waits and retries
    tier: str | None = None
    undecided: str | None = None  # the judge cannot tell (not a fail): a person decides, why
    metric: dict[str, Any] | None = None  # a metric's value, bounds, baseline and the line it was read from


@_event("assessment:check:baseline")
class CheckBaseline(Payload):
    """A ``metric``'s value before the task's first attempt, stored before its agent starts; every fix and retry
    is compared with it. ``value`` None: it could not be measured (``problem``), and the task fails unstarted."""

    index: int
    label: str
    attempt: int
    value: float | None
    problem: str | None = None
    line: str | None = None  # the line of the output the value was read from
    duration: float


@_event("assessment:complete")
class AssessmentComplete(Payload):
    attempt: int
    trigger: str
    passed: bool
    checks_passed: bool
    message: str
    global_score: float | None
    scores: list[dict[str, Any]] | None
    tier: str | None = None  # the tier that decided (checks / review for plain expectations)
    tier_policy: str | None = None


@_event("assessment:deferred")
class AssessmentDeferred(Payload):
    """A check could not be done (the judge is unreachable): the assessment is tried again after ``delay`` s."""

    task_id: str
    reason: str
    retry: int
    max_retries: int
    delay: float


@_event("assessment:error")
class AssessmentError(Payload):
    """The assessment could not be done and its retries are spent (or cannot help): the task waits on hold
    until ``polpo retry TASK`` runs the assessment again. The agent's work is kept; nobody blamed it."""

    task_id: str
    reason: str
    retryable: bool


@_event("assessment:needs-person")
class AssessmentNeedsPerson(Payload):
    """The judge cannot tell whether the work passes (a calibrated rule's band, reviewers who disagree, evidence
    against a passing score): the task waits ``awaiting_review`` for a person; no fix or retry runs meanwhile."""

    title: str
    attempt: int
    reason: str
    global_score: float | None
    approve: str  # the command that passes the work
    reject: str  # and the one that fails it (then a fix, a retry or the end, as after a failed assessment)


@_event("assessment:person-verdict")
class AssessmentPersonVerdict(Payload):
    """A person passed or failed work the judge could not decide; stored as a label (``polpo labels export``)."""

    attempt: int
    passed: bool
    score: float | None  # the score they gave (None: a pass keeps the panel's score)
    reason: str
    by: str


@_event("assessment:corrected")
class AssessmentCorrected(Payload):
    task_id: str
    corrections: list[dict[str, Any]]
    rejected: list[dict[str, Any]]


@_event("assessment:judged")
class AssessmentJudged(Payload):
    changed: bool
    verdicts: list[dict[str, Any]]
    error: str | None
    skipped: str | None = None  # why the judge was not called (it could not change the verdict)


# ------------------------------------------------------------------------------------------------- quality


@_event("quality:gate:passed")
class GatePassed(Payload):
    mission_id: str
    gate_name: str
    notify_channels: list[str] | None = None
    avg_score: float | None = None


@_event("quality:gate:failed")
class GateFailed(Payload):
    mission_id: str
    gate_name: str
    reason: str
    notify_channels: list[str] | None = None
    avg_score: float | None = None


@_event("quality:threshold:failed")
class ThresholdFailed(Payload):
    avg_score: float
    threshold: float


# ------------------------------------------------------------------------------------------------------ SLA


@_event("sla:warning")
class SlaWarning(Payload):
    entity_id: str
    entity_type: str
    deadline: str
    elapsed: int  # ms
    remaining: int  # ms
    percent_used: float  # a 0–1 fraction (Polpo's name and unit)


@_event("sla:violated")
class SlaViolated(Payload):
    entity_id: str
    entity_type: str
    deadline: str
    overdue_ms: int


@_event("sla:met")
class SlaMet(Payload):
    entity_id: str
    entity_type: str
    deadline: str
    margin_ms: int


# --------------------------------------------------------------------------------------------------- budgets


@_event("budget:warning")
class BudgetWarning(Payload):
    """An account's LLM spend reached ``[budget] warn_at`` of its budget (once per account and budget)."""

    scope: str  # task | mission | agent | daemon
    key: str  # the task id, mission id or agent name ("" for the daemon)
    measure: str  # usd | tokens
    spent: float
    limit: float
    period: str | None = None  # the UTC day of a daily budget


@_event("budget:exceeded")
class BudgetExceeded(Payload):
    """A call did not fit in a budget (or the spend passed it): the task stops, the mission starts no more
    tasks, or the agent's / daemon's new work waits for ``period``'s end (once per account and crossing)."""

    scope: str
    key: str
    measure: str
    spent: float
    limit: float
    needed: float | None = None  # what the refused call could have cost
    in_flight: float | None = None  # what calls still running had reserved (they count before they end)
    period: str | None = None


# ------------------------------------------------------------------------------------------ notifications


@_event("notification:sent")
class NotificationSent(Payload):
    channel: str
    event: str


@_event("notification:failed")
class NotificationFailed(Payload):
    channel: str
    event: str
    error: str


# ------------------------------------------------- people and time in the loop (polpo.engine.holds, approvals)


@_event("checkpoint:reached")
class CheckpointReached(Payload):
    """Every afterTask finished: the blocksTasks wait for a person (``resume`` says how to let them run)."""

    mission_id: str
    checkpoint_name: str
    after_tasks: list[str]
    blocks_tasks: list[str]
    resume: str  # the command that releases it
    message: str | None = None
    notify_channels: list[str] | None = None


@_event("checkpoint:resumed")
class CheckpointResumed(Payload):
    mission_id: str
    checkpoint_name: str
    by: str
    note: str | None = None
    notify_channels: list[str] | None = None


@_event("delay:started")
class DelayStarted(Payload):
    mission_id: str
    delay_name: str
    duration: str  # ISO-8601
    after_tasks: list[str]
    blocks_tasks: list[str]
    started_at: str
    expires_at: str
    message: str | None = None
    notify_channels: list[str] | None = None


@_event("delay:expired")
class DelayExpired(Payload):
    mission_id: str
    delay_name: str
    notify_channels: list[str] | None = None


@_event("approval:requested")
class ApprovalRequested(Payload):
    """A task with ``approval: "before"`` waits for a person before its first attempt; or an LLM agent's call of a
    tool ``approve_tools`` names (``tool``, with its ``arguments``) waits for one before it runs."""

    title: str
    approve: str  # the command that approves it
    reject: str  # and the one that rejects it
    timeout_at: str | None = None
    timeout_action: str | None = None
    tool: str | None = None  # a tool call's name (server.tool)
    arguments: dict[str, Any] | None = None  # and its arguments


@_event("approval:resolved")
class ApprovalResolved(Payload):
    status: str  # approved | rejected | timeout
    by: str
    reason: str | None = None
    tool: str | None = None  # a tool call's


@_event("question:asked")
class QuestionAsked(Payload):
    """An agent asked a person a question (``ask_human``, or a command agent's output); the task waits for the
    answer, which ``answer`` gives."""

    question: str
    source: str  # ask_human | output
    agent: str
    attempt: int
    answer: str  # the command that answers it
    timeout_at: str | None = None
    on_timeout: str | None = None  # answer (a model) | continue | fail


@_event("question:answered")
class QuestionAnswered(Payload):
    """The answer the task's next attempt receives."""

    question: str
    answer: str
    by: str  # a person, "model:MODEL", or "timeout"
    source: str  # person | model | timeout


@_event("task:verdict:overridden")
class VerdictOverridden(Payload):
    """A person overrode the judge's verdict on a task (the judge's scores are kept beside it)."""

    passed: bool
    was_passed: bool | None
    reason: str
    by: str


# --------------------------------------------------------------------------------------------------- daemon


@_event("orchestrator:started")
class OrchestratorStarted(Payload):
    version: str
    pid: int
    missions_dir: str
    state_dir: str
    agents: list[str]
    resumed_missions: int


@_event("orchestrator:shutdown")
class OrchestratorShutdown(Payload):
    pid: int
    unfinished_missions: int


@_event("fault:paused")
class FaultPaused(Payload):
    """Work met a fault that passes by itself (:mod:`polpo.fsfaults`: read-only or full disk, quota, no file
    descriptors, permissions): it waits and tries again, nothing is rejected or failed for it."""

    work: str  # intake | workspace | worktree | event log
    path: str  # the file or folder it was working on
    error: str  # e.g. "EROFS: Read-only file system", then the message
    retry_in: float  # seconds before the first new try (then doubling, up to 30 s)


@_event("fault:resumed")
class FaultResumed(Payload):
    """The work that paused for a passing fault went through."""

    work: str
    path: str
    waited: float  # seconds since the fault was first met
    tries: int  # failed tries before it went through


@_event("retention:pruned")
class RetentionPruned(Payload):
    """A pass of the retention (``[retention]``) removed what it keeps no longer."""

    missions: int  # finished missions removed, with every row of theirs (events included) and their workspaces
    events: int  # events of no kept mission, older than the retention
    records: int  # handled commands, past days' spend, the records of mission files that are gone
    exported: str | None = None  # the JSON-lines file the missions were written to first
    seconds: float = 0.0  # how long the pass took


# -------------------------------------------------------------------- several daemons, one PostgreSQL store


@_event("cluster:leader")
class ClusterLeader(Payload):
    """This node now accepts mission files and coordinates every mission."""

    node: str
    missions: int


@_event("cluster:node-lost")
class ClusterNodeLost(Payload):
    """A node's lease ran out while it held tasks: the leader records their attempts as interrupted."""

    node: str
    tasks: list[str]


@_event("task:stop-requested")
class TaskStopRequested(Payload):
    """The leader asks the node running a task to stop it (a mission cancel, an SLA failure)."""

    node: str
    reason: str


@_event("workspace:unreachable")
class WorkspaceUnreachable(Payload):
    """A node claimed a task of an ``"affinity": "any"`` mission whose workspace it cannot reach (not under its
    own workspace roots, or not there): it gave the task back and claims none of that mission's tasks again."""

    node: str
    workspace: str
    reason: str


@_event("attention:digest")
class AttentionDigest(Payload):
    """Every ``[notify] digest``, what waits for a person (``polpo status``'s first lines), when anything does:
    route it to a channel with a notify rule."""

    count: int
    items: list[dict[str, Any]]  # [{kind, state, target, title, todo, commands, since}]


ALL_EVENTS: tuple[str, ...] = tuple(sorted(PAYLOADS))


@dataclass(frozen=True, slots=True)
class Event:
    """One state change, as persisted in ``events`` and written to ``events.jsonl``."""

    seq: int
    ts: str
    event: str
    mission_id: str | None
    task_id: str | None
    data: dict[str, Any] = field(default_factory=dict)
    data_json: bytes = field(default=b"", compare=False, repr=False)  # ``data`` serialised once, by the store
    node: str | None = None  # the daemon that produced it (``[daemon] node``)

    def data_bytes(self) -> bytes:
        return self.data_json or orjson.dumps(self.data)

    def to_json_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"seq": self.seq, "ts": self.ts, "event": self.event}
        if self.mission_id is not None:
            out["missionId"] = self.mission_id
        if self.task_id is not None:
            out["taskId"] = self.task_id
        if self.node is not None:
            out["node"] = self.node
        out["data"] = self.data
        return out
