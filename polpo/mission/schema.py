"""The mission file as pydantic v2 models: camelCase in JSON, snake_case in Python, unknown keys rejected.

A superset of Polpo's mission document. Polpo fields polpo does not implement are *tolerated*: each model
lists them (``TOLERATED``, plus ``TOLERATED_PREFIXES`` for families such as ``enableGit``/``enablePdf``), a
validator takes them out before ``extra="forbid"`` sees them, and the loader names each one in a warning —
so Polpo documents load, nothing is dropped silently, and a real typo is still an error.
Cross-field checks that need the whole document (titles, references, cycles) live in ``loader.py``.

Every number has a sane range (counts, priorities, temperatures, durations, deadline years), so nothing a file
says can overflow the arithmetic, the JSON encoder or the database further on.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Annotated, Any, Literal, Self

from pydantic import AfterValidator, Field, field_validator, model_validator

from polpo.checks.registry import EXPECTATION_TYPES, Expectation
from polpo.docmodel import Message, Model, Name, NonEmpty, Short, ShortNonEmpty
from polpo.durations import Deadline as _Deadline
from polpo.durations import Duration as _Duration
from polpo.mission.notifications import RULE_TOLERATED, current_event_name
from polpo.mission.schedule import ScheduleFields

MAX_COUNT = 100  # retries, fix attempts, escalation steps
MAX_CONCURRENCY = 1000
MAX_TURNS = 10_000
MAX_PRIORITY = 1e6
MAX_SPAN = timedelta(days=3660)  # ten years: the longest duration, and a relative deadline
_YEARS = (1900, 9000)  # a deadline instant's year, far enough from datetime's limits for any time zone


def _bounded_span(td: timedelta) -> timedelta:
    if td > MAX_SPAN:
        raise ValueError("the duration is too long: at most ten years (P3660D)")
    return td


def _bounded_deadline(v: datetime | timedelta) -> datetime | timedelta:
    if isinstance(v, timedelta):
        return _bounded_span(v)
    if not _YEARS[0] <= v.year <= _YEARS[1]:
        raise ValueError(f"the year must be between {_YEARS[0]} and {_YEARS[1]}")
    return v


Duration = Annotated[_Duration, AfterValidator(_bounded_span)]
Deadline = Annotated[_Deadline, AfterValidator(_bounded_deadline)]
Count = Annotated[int, Field(ge=0, le=MAX_COUNT)]

# ----------------------------------------------------------------------------------------- notifications


class NotificationRule(Model):
    """Polpo's scoped rule: events (globs) of this mission or task go to the named channels of the config.

    Retired Polpo event names (``plan:completed``) are mapped to polpo's (``mission:completed``); the loader
    warns about each. ``template`` replaces the one-line summary; ``{{field}}`` in it is read from the event.
    """

    TOLERATED = RULE_TOLERATED
    id: str | None = None
    name: str | None = None
    events: list[NonEmpty] = Field(min_length=1)
    channels: list[NonEmpty] = Field(min_length=1)
    severity: Literal["info", "warning", "critical"] = "info"
    template: str | None = None

    @field_validator("events", mode="before")
    @classmethod
    def _current_names(cls, v: Any) -> Any:
        return [current_event_name(e) if isinstance(e, str) else e for e in v] if isinstance(v, list) else v


class Notifications(Model):
    """Mission- or task-scoped notification rules.

    ``inherit`` (default true): the config's ``[[notify.rules]]`` (and, for a task, the mission's rules) apply
    too. ``false``: for an event one of these rules matches, only this scope's rules apply (Polpo's
    "scoped rules win"); other events still go where the wider scope sends them.
    """

    rules: list[NotificationRule] = []
    inherit: bool = True


# ------------------------------------------------------------------------------------------------- tasks

Isolation = Literal["none", "worktree"]


class RetryPolicy(Model):
    escalate_after: int | None = Field(None, ge=1, le=MAX_COUNT)
    fallback_agent: Name | None = None
    escalate_model: ShortNonEmpty | None = None


class ExpectedOutcome(Model):
    type: Literal["file", "text", "url", "json", "media"]
    label: ShortNonEmpty
    description: str | None = None
    path: str | None = None
    mime_type: str | None = None
    required: bool = True
    tags: list[str] = []


TIER_POLICIES = ("REJECT_ON_ANY_FAIL", "ACCEPT_ON_ALL_PASS", "FINAL_TIER")


class Tier(Model):
    """One tier of a cascade (agent-judge's ``CascadedJury``); see :mod:`polpo.assessment.tiers`."""

    name: Name
    policy: Literal["REJECT_ON_ANY_FAIL", "ACCEPT_ON_ALL_PASS", "FINAL_TIER"]
    expectations: list[Expectation] = Field(min_length=1)


class Budget(Model):
    """What LLM calls may spend: USD and/or tokens (input + output); either key may be left out."""

    usd: float | None = Field(None, gt=0, le=1e6, allow_inf_nan=False)
    tokens: int | None = Field(None, gt=0, le=10**12)


class Plateau(Model):
    """Stop fixing when the score has not improved by ``margin`` over the last ``attempts`` attempts."""

    attempts: int = Field(2, ge=1, le=MAX_COUNT)
    margin: float = Field(0.1, ge=0, le=4, allow_inf_nan=False)


class TaskSpec(Model):
    TOLERATED = frozenset({"metrics", "confidence", "group", "phase"})
    title: Name
    description: NonEmpty
    assign_to: Name | None = None
    # Sequence with a shared empty default: a mission of 50 000 tasks does not carry 150 000 empty lists
    depends_on: Sequence[Name] = ()
    expectations: Sequence[Expectation] = ()
    tiers: Sequence[Tier] | None = None  # instead of expectations: checks in a cascade of tiers
    expected_outcomes: Sequence[ExpectedOutcome] = ()
    priority: float = Field(1.0, gt=0, le=MAX_PRIORITY, allow_inf_nan=False)
    deadline: Deadline | None = None
    max_retries: Count | None = None
    max_fix_attempts: Count | None = None
    max_duration: Duration | None = None
    retry_policy: RetryPolicy | None = None
    side_effects: bool = False
    notifications: Notifications | None = None
    isolation: Isolation | None = None  # None: the mission's setting (see MissionSettings.isolation)
    budget: Budget | None = None  # None: the mission's taskBudget (polpo.engine.spend_book)
    plateau: Plateau | None = None  # None: the mission's
    # "before": a person approves the task before its first attempt (polpo approve / reject); see engine/approvals.py
    approval: Literal["before"] | None = None
    approval_timeout: Duration | None = None
    approval_timeout_action: Literal["fail", "approve"] = "fail"

    @field_validator("depends_on", "expectations", "expected_outcomes")
    @classmethod
    def _shared_empty(cls, v: Sequence[Any]) -> Sequence[Any]:
        return v if v else ()  # an empty list from a file is the same value as the default

    @model_validator(mode="after")
    def _tiers(self) -> Self:
        if self.tiers is None:
            return self
        if self.expectations:
            raise ValueError("give either expectations or tiers, not both (tiers hold their own expectations)")
        if not self.tiers:
            raise ValueError("tiers must list at least one tier")
        if self.tiers[-1].policy != "FINAL_TIER":
            raise ValueError(f'the last tier ("{self.tiers[-1].name}") must have policy FINAL_TIER: its result '
                             "is the verdict")
        early = [t.name for t in self.tiers[:-1] if t.policy == "FINAL_TIER"]
        if early:
            raise ValueError(f"only the last tier may be FINAL_TIER; {', '.join(early)} comes before it")
        names = [t.name for t in self.tiers]
        dup = sorted({n for n in names if names.count(n) > 1})
        if dup:
            raise ValueError(f"tier names must be unique; repeated: {', '.join(dup)}")
        return self

    @property
    def all_expectations(self) -> list[Any]:
        """Every expectation, tiers flattened in order: the positions checks, traces and corrections use."""
        if self.tiers is None:
            return list(self.expectations)
        return [e for t in self.tiers for e in t.expectations]


class TeamAgent(Model):
    """An agent defined inline in the mission; ``type`` None means an LLM agent on the default model."""

    # Polpo's AgentConfig fields we do not implement, and its enableX capability flags (enablePdf…); enableGit is
    # implemented: the agent's tasks run in their own git worktree (polpo.engine.isolation) unless they say otherwise.
    TOLERATED = frozenset({
        "reasoning", "reportsTo", "skills", "allowedTools", "allowedPaths", "volatile",
        "missionGroup", "identity", "maxTurnsPerTask", "createdAt", "browserProfile", "emailAllowedDomains",
        "image_model", "video_model", "vision_model", "transcribe_model", "tts_model", "search_provider",
        "version", "author", "tags"})
    TOLERATED_PREFIXES = ("enable",)
    name: Name
    type: Literal["command", "llm"] | None = None
    role: Short | None = None
    model: Short | None = None
    command: list[NonEmpty] | None = None
    timeout: Duration | None = None
    max_concurrency: int | None = Field(None, ge=1, le=MAX_CONCURRENCY)
    max_turns: int | None = Field(None, ge=1, le=MAX_TURNS)
    system_prompt: str | None = None
    api_base: str | None = None
    api_key_env: str | None = None  # the agent's own key; only a variable [security] team_key_envs lists
    temperature: float | None = Field(None, ge=0, le=2)
    env: dict[str, str] = {}
    enable_git: bool | None = None
    ignore_files: list[NonEmpty] | None = None  # its own state files, kept out of its changes and commits

    @classmethod
    def is_tolerated(cls, key: str) -> bool:
        return key != "enableGit" and super().is_tolerated(key)

    @model_validator(mode="after")
    def _command_needs_argv(self) -> Self:
        if self.type == "command" and not self.command:
            raise ValueError('a command agent needs "command": [program, args…]')
        return self


class QualityGate(Model):
    TOLERATED = frozenset({"condition"})
    name: Name
    after_tasks: list[Name] = Field(min_length=1)
    blocks_tasks: list[Name] = Field(min_length=1)
    min_score: float | None = Field(None, ge=1, le=5, allow_inf_nan=False)
    require_all_passed: bool = False
    notify_channels: list[str] = []


class Checkpoint(Model):
    """A stop for a person: once every afterTask is terminal, the blocksTasks wait for ``polpo resume``."""

    name: Name
    after_tasks: list[Name] = Field(min_length=1)
    blocks_tasks: list[Name] = Field(min_length=1)
    message: Message | None = None
    notify_channels: list[str] = []


class Delay(Model):
    """A wait: once every afterTask is terminal, the blocksTasks wait ``duration`` (its expiry is stored)."""

    name: Name
    after_tasks: list[Name] = Field(min_length=1)
    blocks_tasks: list[Name] = Field(min_length=1)
    duration: Duration
    message: Message | None = None
    notify_channels: list[str] = []


class MissionSettings(Model):
    """``isolation``: ``"worktree"`` runs each task in its own git worktree and branch when the workspace is a git
    repository (polpo.engine.isolation); ``"none"`` runs every task in the workspace itself. Unset (the default):
    ``"none"``, except for tasks of a team agent with ``enableGit`` — a shared workspace is what a folder that is
    not a repository, uncommitted files and non-code missions need, and it is what polpo did before.

    ``affinity`` matters only when several daemons share a PostgreSQL store: ``"node"`` (the default) runs every
    task on the node that accepted the mission (it waits for that node if it is down); ``"any"`` lets every node
    run its tasks, so its workspace must be on storage all nodes see."""

    TOLERATED = frozenset({"enableVolatileTeams", "volatileCleanup", "maxQuestionRounds", "maxResolutionAttempts"})
    max_retries: Count | None = None
    max_fix_attempts: Count | None = None
    max_concurrency: int | None = Field(None, ge=1, le=MAX_CONCURRENCY)
    auto_correct_expectations: bool | None = None
    isolation: Isolation | None = None
    affinity: Literal["node", "any"] | None = None
    budget: Budget | None = None  # the whole mission's LLM spend
    task_budget: Budget | None = None  # each task's, unless it sets its own
    on_budget: Literal["fail", "hold"] | None = None  # a task over its own budget: failed (default) or on_hold
    plateau: Plateau | None = None  # None: fixes go on until maxFixAttempts


class MissionSpec(ScheduleFields):  # schedule, timezone, endDate, overlap, catchUp, misfireGrace
    TOLERATED = frozenset({"expectedOutcomes", "prompt"})
    schema_version: Literal[1] | None = None
    name: Short | None = None
    description: str | None = None
    tasks: list[TaskSpec] = Field(min_length=1)
    team: list[TeamAgent] = []
    quality_gates: list[QualityGate] = []
    checkpoints: list[Checkpoint] = []
    delays: list[Delay] = []
    quality_threshold: float | None = Field(None, ge=1, le=5, allow_inf_nan=False)
    deadline: Deadline | None = None
    workspace: str | None = None
    settings: MissionSettings = MissionSettings()
    notifications: Notifications | None = None

    def task_by_title(self, title: str) -> TaskSpec | None:
        return next((t for t in self.tasks if t.title == title), None)


TOLERANT_MODELS: tuple[type[Model], ...] = (MissionSpec, MissionSettings, TaskSpec, TeamAgent, QualityGate,
                                            NotificationRule, Tier)


def mission_json_schema() -> dict[str, Any]:
    """JSON Schema for editors; tolerated Polpo keys are allowed properties so Polpo documents are not flagged."""
    schema = MissionSpec.model_json_schema(by_alias=True, mode="validation")
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["$id"] = "urn:polpo:schema:mission:1"
    schema["title"] = "polpo mission"
    defs = schema.get("$defs", {})
    note = {"description": "Polpo field, accepted but not implemented by polpo (a warning)"}
    for model in TOLERANT_MODELS:
        target = schema if model is MissionSpec else defs.get(model.__name__)
        if target is None:
            continue
        props = target.setdefault("properties", {})
        for key in sorted(model.TOLERATED):
            props.setdefault(key, dict(note))
        for prefix in model.TOLERATED_PREFIXES:
            target.setdefault("patternProperties", {})[f"^{prefix}[A-Z]"] = dict(note)
    return schema


__all__ = [
    "EXPECTATION_TYPES", "TOLERANT_MODELS", "Checkpoint", "Delay", "Expectation", "ExpectedOutcome", "Isolation", "MissionSettings",
    "MissionSpec", "NotificationRule", "Notifications", "QualityGate", "RetryPolicy", "TaskSpec", "TeamAgent", "Tier",
    "mission_json_schema",
]
