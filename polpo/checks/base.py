"""What every check type provides, what it is given, and what it returns.

A check type (``file_exists``, ``test``, ``script``, ``llm_review`` …) is a :class:`CheckType` in one module: the
expectation's model (how a mission file writes it), its rank (cheap checks run first), a label and a description, the fields
the expectation judge may correct, and ``run``. Adding a type means adding its model to
:mod:`polpo.checks.expectations`, a module with its ``CheckType`` and a line in :mod:`polpo.checks.registry`'s
index; nothing else in the daemon names a type. Light on purpose: the store and the CLI import it.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Protocol, TypeAlias

from polpo.docmodel import Model

if TYPE_CHECKING:  # for annotations only: the judge's machinery loads when an llm_review runs, not with every check
    from polpo.clock import Clock
    from polpo.llm.client import ChatClient, ModelSettings
    from polpo.review.dimensions import Dim
    from polpo.review.panel import PanelOptions
    from polpo.review.reviewer import ReviewerTrace

__all__ = ["CheckContext", "CheckOutcome", "CheckType", "Chosen", "Correction", "ReviewBackend"]


@dataclass(frozen=True)
class CheckOutcome:
    """One check's result: stored as a row, announced by an event, fed back to the agent, read by gates."""

    type: str
    label: str
    passed: bool
    message: str
    details: str | None = None
    duration: float = 0.0
    index: int = -1
    global_score: float | None = None  # llm_review: the consensus score the threshold was compared with
    scores: list[dict[str, Any]] | None = None  # llm_review: per dimension, with every reviewer's vote
    dimension_source: str | None = None  # llm_review: given | generated | default
    tokens: int | None = None
    cost: float | None = None
    error: str | None = None  # the check could not be done (judge unreachable …): not a verdict on the work
    retryable: bool = True  # with ``error``: whether trying again later can help (an outage, not a bad key)
    tier: str | None = None  # the tier the check ran in (explicit ``tiers``, or the implied cascade)
    review: dict[str, Any] | None = None  # llm_review: the panel's summary (votes, outliers, stability, cache)
    undecided: str | None = None  # llm_review: why the judge cannot tell, and a person must decide
    person: dict[str, Any] | None = None  # the verdict a person gave when the judge could not tell
    metric: dict[str, Any] | None = None  # metric: the value, its bounds and baseline (polpo.checks.metric_rules)

    @property
    def status(self) -> str:
        """``passed``, ``failed``, ``error`` (an infrastructure failure is nobody's verdict) or ``undecided``
        (the judge cannot tell: a person decides)."""
        if self.error is not None:
            return "error"
        return "undecided" if self.undecided is not None else "passed" if self.passed else "failed"

    def at(self, index: int, duration: float | None = None) -> CheckOutcome:
        """The same outcome, placed at expectation ``index`` (and timed, when the check did not time itself)."""
        return replace(self, index=index, duration=self.duration if duration is None else round(duration, 4))

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"index": self.index, "type": self.type, "label": self.label, "passed": self.passed,
                               "message": self.message, "details": self.details, "duration": self.duration}
        out.update(self.row_json() or {})
        return out

    def row_json(self) -> dict[str, Any] | None:
        """What a check row keeps beyond its columns (the ``scores`` JSON column), or None when nothing."""
        out: dict[str, Any] = {}
        if self.global_score is not None:
            out["globalScore"] = self.global_score
            out["scores"] = self.scores or []
        if self.error is not None:
            out["error"] = {"reason": self.error, "retryable": self.retryable}
        if self.tier is not None:
            out["tier"] = self.tier
        if self.review is not None:
            out["review"] = self.review
        if self.undecided is not None:
            out["undecided"] = self.undecided
        if self.person is not None:
            out["person"] = self.person
        if self.metric is not None:
            out["metric"] = self.metric
        return out or None

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> CheckOutcome:
        return cls(type=d["type"], label=d["label"], passed=bool(d["passed"]), message=d["message"],
                   details=d.get("details"), duration=d.get("duration") or 0.0, index=d.get("index", -1),
                   **cls.fields_from_row_json(d))

    @staticmethod
    def fields_from_row_json(d: Mapping[str, Any] | None) -> dict[str, Any]:
        """The keyword arguments :meth:`row_json` stored (for reading a check row back)."""
        d = d or {}
        err = d.get("error") if isinstance(d.get("error"), Mapping) else None
        return {"global_score": d.get("globalScore"), "scores": d.get("scores"), "tier": d.get("tier"),
                "review": d.get("review"), "undecided": d.get("undecided"), "person": d.get("person"),
                "metric": d.get("metric"), "error": err.get("reason") if err else None,
                "retryable": bool(err.get("retryable", True)) if err else True}


Chosen: TypeAlias = "tuple[list[Dim], str, str | None]"  # dimensions, source (given | generated | default), a note


class ReviewBackend(Protocol):
    """What an ``llm_review`` check needs from the daemon: judges, a stored yardstick, a place for traces."""

    @property
    def llm(self) -> ChatClient: ...

    @property
    def judges(self) -> Sequence[ModelSettings]: ...

    @property
    def reviewer_timeout(self) -> float: ...

    @property
    def options(self) -> PanelOptions:
        """The config's panel rules (reviewer_error, uncertain_band, calibration); samples come from the check."""
        ...

    def cached(self, seat: int) -> ChatClient | None:
        """The judge-call cache's client for a seat's first run (``[judge] cache``), or None when it is off."""
        ...

    async def dimensions(self, check_idx: int, choose: Callable[[], Awaitable[Chosen]]) -> Chosen:
        """The check's stored dimension set, else ``choose()``'s, stored so every later attempt uses it."""
        ...

    async def previous_review(self, check_idx: int, attempt: int) -> Mapping[str, Any] | None:
        """The review (``CheckOutcome.review``) of check ``check_idx`` of the task's attempt ``attempt``, or None."""
        ...

    def keep_traces(self, check_idx: int, traces: Sequence[ReviewerTrace], *, failed: bool = False) -> None:
        """Store each reviewer's whole trace (``failed``: of a review that could not be done, kept apart so a
        later successful try is not listed beside them)."""
        ...


@dataclass(frozen=True)
class CheckContext:
    """What a check may look at: the workspace and the attempt's evidence. No store, no engine."""

    workspace: Path
    clock: Clock
    check_timeout: float  # seconds, unless the expectation sets its own
    task_title: str = ""
    task_description: str = ""
    attempt_number: int = 1
    agent_ok: bool = True
    files_changed: list[str] = field(default_factory=list)
    timeline: str = ""
    env: Mapping[str, str] = field(default_factory=dict)  # added to a command's minimal environment
    index: int = 0  # the expectation's position in the task (a review's stored yardstick is kept per index)
    review: ReviewBackend | None = None
    expected_outcomes: Sequence[Mapping[str, Any]] = ()  # the task's expectedOutcomes (camelCase JSON)
    outcomes: Sequence[Mapping[str, Any]] = ()  # what the attempt declared it delivered
    output: str = ""  # the agent's own output (stdout's end): the work itself when it changed no file
    prior: Sequence[CheckOutcome] = ()  # the outcomes of this assessment's checks that ran before this one
    baselines: Mapping[int, float] = field(default_factory=dict)  # a metric's value before the task, by index


@dataclass(frozen=True)
class Correction:
    """A corrected expectation (JSON), the old and new value, and a note (e.g. a clamped threshold)."""

    expectation: dict[str, Any]
    old: Any
    new: Any
    note: str = ""


ExpectationModel = type[Model]


class CheckType:
    """Base of the check types; subclasses set the class attributes and implement ``run``."""

    type: ClassVar[str]
    rank: ClassVar[int]  # 0 files, 1 commands, 2 LLM calls: cheaper first, an LLM review only if they passed
    model: ClassVar[ExpectationModel]
    correctable: ClassVar[tuple[str, ...]] = ()  # fields the expectation judge may change (one per correction)
    needs_agent_success: ClassVar[bool] = False  # skipped when the agent failed or a cheaper check failed

    def label(self, exp: Any) -> str:
        return self.type

    def describe(self, exp: Mapping[str, Any]) -> str:
        """One line telling an agent how its work will be checked (from the expectation's JSON)."""
        return str(exp.get("type"))

    async def run(self, exp: Any, ctx: CheckContext) -> CheckOutcome:
        raise NotImplementedError

    def correct(self, exp: Mapping[str, Any], field_name: str, value: Any, *, floor: float,
                known_files: Collection[str] | None) -> Correction | str:
        """The expectation with ``field_name`` set to ``value``, or the reason the correction is refused."""
        return f"{self.type} expectations cannot be corrected"
