"""What one reviewer run works with: the attempt under review (:class:`ReviewContext`), its seat in the panel
(:class:`Seat`: the shared evidence, its own plan and scratch copy), and the run's mutable state
(:class:`ReviewRun`: the trace, every model call counted and recorded). Shared by the phases
(:mod:`polpo.review.explore`, :mod:`polpo.review.scoring`, :mod:`polpo.review.checklist`)."""

from __future__ import annotations

import math
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from polpo.clock import Clock
from polpo.llm.client import ChatClient, ChatReply, ModelSettings
from polpo.llm.failures import outran, pace
from polpo.llm.secrets import redact
from polpo.review import prompts
from polpo.review.evidence import CheckEvidence, Evidence, render_evidence
from polpo.review.scratch import Scratch
from polpo.review.seats import SeatPlan
from polpo.review.trace import ReviewerTrace
from polpo.review.work_files import WorkFile
from polpo.tools.catalog import TOOLS

__all__ = ["DEFAULT_MAX_TURNS", "MODEL_TOOL_RESULT_MAX", "REVIEW_TOOLS", "TRACE_TOOL_RESULT_MAX", "Question",
           "ReviewContext", "ReviewRun", "Seat"]

DEFAULT_MAX_TURNS = 20
MODEL_TOOL_RESULT_MAX = 60_000
TRACE_TOOL_RESULT_MAX = 4_000
TRACE_TEXT_MAX = 40_000
REVIEW_TOOLS = TOOLS.read_only()
"""What a reviewer may call in phase 1 on the workspace: the tools whose ``read_only`` flag is set (and
``run_command``, in a copy of the work: :mod:`polpo.review.explore`)."""


@dataclass(frozen=True)
class Question:
    """A checklist question (yes is good), the dimension it scores and its weight there."""

    text: str
    dimension: str = "checklist"
    weight: float = 1.0


@dataclass(frozen=True)
class ReviewContext:
    """What the reviewers know about the attempt under review."""

    title: str
    description: str
    criteria: str
    workspace: Path
    files_changed: list[str]
    """Files the attempt created or edited, relative to the workspace. Empty → output-based review (no tools)."""
    timeline: str
    """The execution timeline, output, stderr and registered outcomes, as text."""
    attempt: int = 1
    checks: tuple[CheckEvidence, ...] = ()
    """The cheap checks this assessment already ran (their outcomes are evidence)."""
    output: str | None = None
    """The work itself when it is only text (no files): its code blocks are run in a scratch folder."""
    reference: str = ""
    """A reference answer or expected output the task's author gave, to compare the work with."""
    anchors: tuple[Mapping[str, Any], ...] = ()
    """Scored examples shown as calibration anchors: ``{output, score, why?, task?}``."""
    checklist: tuple[Question, ...] = ()
    clock: Clock | None = None
    env: Mapping[str, str] = field(default_factory=dict)
    """Added to the environment of what the review runs (the attempt's marker, so a crash's orphans are found)."""


class ReviewRun:
    """Mutable state of one reviewer run, so a timeout still returns everything gathered so far."""

    def __init__(self, client: ChatClient, settings: ModelSettings, trace: ReviewerTrace) -> None:
        self.client = client
        self.settings = settings
        self.trace = trace
        self.start = time.monotonic()
        self.costs: list[float] = []
        self.pace: float | None = None
        """Seconds per generated token of this reviewer's last answered call (prompt included)."""
        self.in_flight_since: float | None = None

    def record(self, phase: int, msg: Mapping[str, Any], **extra: Any) -> None:
        entry: dict[str, Any] = {"phase": phase, "role": msg["role"]}
        content = msg.get("content")
        if content is not None:
            limit = TRACE_TOOL_RESULT_MAX if msg["role"] == "tool" else TRACE_TEXT_MAX
            entry["content"] = prompts.head(redact(str(content)), limit)
        if msg.get("tool_calls"):
            entry["toolCalls"] = [{"id": c["id"], "name": c["function"]["name"],
                                   "arguments": redact(c["function"]["arguments"])[:TRACE_TOOL_RESULT_MAX]}
                                  for c in msg["tool_calls"]]
        if msg.get("tool_call_id"):
            entry["toolCallId"] = msg["tool_call_id"]
        entry.update(extra)
        entry["at"] = round(time.monotonic() - self.start, 3)
        self.trace.messages.append(entry)

    async def chat(self, messages: Sequence[Mapping[str, Any]], **kwargs: Any) -> ChatReply:
        self.in_flight_since = sent = time.monotonic()
        reply = await self.client.chat(self.settings, [dict(m) for m in messages], **kwargs)
        self.in_flight_since = None
        if reply.cached:
            self.trace.cache_hits += 1
            return reply  # a cached answer costs nothing now
        self.trace.cache_misses += reply.cached is False
        self.trace.tokens += reply.prompt_tokens + reply.completion_tokens
        self.trace.tokens_in += reply.prompt_tokens
        self.trace.tokens_out += reply.completion_tokens
        self.pace = pace(time.monotonic() - sent, reply.completion_tokens)
        if reply.cost is not None:
            self.costs.append(reply.cost)
            self.trace.cost = math.fsum(self.costs)
        return reply

    def ran_away(self) -> bool:
        """At a time limit: was the call in flight generating longer than a whole reply takes at the speed this
        reviewer's answered calls showed? Otherwise the server was only slow (:func:`~polpo.llm.failures.outran`)."""
        in_flight = 0.0 if self.in_flight_since is None else time.monotonic() - self.in_flight_since
        return outran(in_flight, self.settings.max_tokens, self.pace)


@dataclass
class Seat:
    """What one reviewer run gets from its panel: the work's changed files and the evidence (both read once
    for every seat), its plan, and its own scratch copy for commands (made only if it runs one)."""

    files: tuple[WorkFile, ...]
    evidence: Evidence = field(default_factory=Evidence)
    plan: SeatPlan = field(default_factory=lambda: SeatPlan(0))
    logprobs: bool = True
    scratch: Scratch | None = None

    def evidence_text(self) -> str:
        return render_evidence(self.evidence, self.plan.order)


