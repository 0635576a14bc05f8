"""The agent protocol: what the dispatcher hands an agent, and what it gets back."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from polpo.model.questions import Ask, Clarification, Question
from polpo.model.status import AttemptKind

__all__ = ["Agent", "AgentRequest", "AgentResult"]


@dataclass(frozen=True)
class AgentRequest:
    """One attempt at one task."""

    task_id: str
    mission_id: str
    mission_name: str
    attempt_id: str
    attempt_number: int
    kind: AttemptKind
    title: str
    description: str
    """The task's original description (unchanged across fix/retry attempts)."""
    prompt: str
    """Full instructions for this attempt, built by the caller; on a fix it includes the feedback."""
    feedback: str | None
    """Feedback of the failed checks (fix/retry attempts), else None."""
    workspace: Path
    timeout: float | None
    """Seconds; None lets the agent use its own default."""
    expectations: list[dict[str, Any]]
    """camelCase JSON of the task's expectations, for the agent's information."""
    env_marker: tuple[str, str]
    """(key, value) put in the child's environment so its orphans can be found after a daemon crash."""
    mission_goal: str = ""
    """The mission's description: the goal this task serves."""
    siblings: tuple[tuple[str, str], ...] = ()
    """(title, status) of the mission's other tasks, in file order."""
    model: str | None = None
    """Model override for LLM agents (escalation to a stronger model); None uses the agent's own."""
    expected_outcomes: list[dict[str, Any]] = field(default_factory=list)
    """The task's ``expectedOutcomes`` (camelCase JSON): deliverables to declare; required ones are checked."""
    clarifications: tuple[Clarification, ...] = ()
    """Every question of the task answered so far, with its answer."""
    questions_left: int = 0
    """Questions this attempt may still ask (``[questions] max_per_task`` less those the task asked)."""
    resume: Question | None = None
    """An LLM agent's question (or tool call) that was answered: the conversation goes on from its snapshot."""
    deliver: Callable[[str | None], Awaitable[None]] | None = None
    """Records that ``resume`` reached this attempt (with an approved call's result, once it ran), before the
    conversation goes on: a restart neither delivers it again nor runs the call twice."""


@dataclass(frozen=True)
class AgentResult:
    exit_code: int | None
    signal: int | None
    timed_out: bool
    stdout_tail: str
    stderr_tail: str
    stdout_bytes: int
    stderr_bytes: int
    duration: float
    error: str | None
    transcript: list[dict[str, Any]] | None = None
    """LLM agents: every turn (assistant text, tool calls, results, errors, tokens, cost, timestamps)."""
    outcomes: list[dict[str, Any]] = field(default_factory=list)
    """Deliverables the agent declared (``register_outcome``): {type: file|text|url|json, label, value}."""
    model: str | None = None
    tokens: int = 0
    cost: float | None = None
    tokens_in: int = 0
    tokens_out: int = 0
    permanent: bool = False
    """The agent could not start for a reason a new attempt cannot change: the task fails at once."""
    provider_error: str | None = None
    """An LLM agent whose own model provider failed (an LLM error kind: connection, timeout, server, rate_limit,
    auth): the attempt is interrupted by the provider, not a failed run of the agent."""
    asks: Ask | None = None
    """The agent stopped to ask a person (a question, or a tool call to approve): the task waits for the answer."""
    mcp: dict[str, dict[str, float]] | None = None
    """``{server: {calls, errors, seconds}}`` of the attempt's MCP tool calls."""

    @property
    def ok(self) -> bool:
        """Started, finished in time, and exited 0."""
        return self.error is None and not self.timed_out and self.exit_code == 0


class Agent(Protocol):
    name: str

    async def run(self, request: AgentRequest, *, on_start: Callable[[int | None], None]) -> AgentResult:
        """Do the work of ``request`` in ``request.workspace``.

        ``on_start(pid)`` is called as soon as a child process (its own process group) is running, so the caller
        can record it for orphan recovery. Failures of the work are reported in the result, not raised.
        """
        ...
