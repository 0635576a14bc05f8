"""The tool calls of an LLM agent's turn, and the stop and the return of a conversation that asked a person.

A turn's calls run in order (:func:`run_calls`). A call to ``ask_human``, or one that ``approve_tools`` names, stops
the conversation there (:func:`park`): the attempt ends with an :class:`~polpo.model.questions.Ask` holding the
conversation so far and the calls of the turn not run yet, and the engine stores it. When the answer came, the
next attempt goes on from it (:func:`go_on`): the parked call's result is the answer (or the approved call's own
result, or the refusal), recorded as received (``request.deliver``) before anything else happens, then the rest of
the turn's calls run, and the conversation continues. An approved call is recorded as started before it runs and
with its result after, so a restart never runs it twice: a call cut by a crash is reported to the model as such.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from polpo.agents.base import AgentRequest
from polpo.agents.toolbox import Bound, Toolbox
from polpo.agents.transcript import Transcript
from polpo.llm.client import ModelSettings, ToolCallOut
from polpo.mcp.errors import McpStartError
from polpo.model.questions import Ask, QuestionKind, delivery_text
from polpo.tools.ask import ASK_HUMAN
from polpo.tools.output import ToolOutput, fail

__all__ = ["RUNNING", "End", "Session", "go_on", "run_calls"]

WRAP_UP_TURNS = 2
"""When this many model turns are left, the tool results say so, so the model can finish in time."""
RUNNING = "[polpo: the approved call is running]"
"""An approved call's result while it runs: found after a crash, the call is not run again."""


def _redact_json(value: Any, mask: Any) -> Any:
    if isinstance(value, str):
        return mask(value)
    if isinstance(value, list):
        return [_redact_json(v, mask) for v in value]
    if isinstance(value, dict):
        return {mask(str(k)): _redact_json(v, mask) for k, v in value.items()}
    return value


@dataclasses.dataclass
class Session:
    """Mutable state of one attempt, so a timeout or a model error still returns everything gathered."""

    request: AgentRequest
    settings: ModelSettings
    transcript: Transcript
    max_turns: int = 50
    messages: list[dict[str, Any]] = dataclasses.field(default_factory=list)
    outcomes: list[dict[str, Any]] = dataclasses.field(default_factory=list)
    turn: int = 0
    tokens: int = 0
    tokens_in: int = 0
    tokens_out: int = 0
    costs: list[float] = dataclasses.field(default_factory=list)

    def add_outcome(self, outcome: Mapping[str, Any]) -> None:
        """Record a deliverable; the same label again replaces the earlier declaration."""
        safe = _redact_json(dict(outcome), self.transcript.redact)
        self.outcomes = [o for o in self.outcomes if o.get("label") != safe.get("label")]
        self.outcomes.append(safe)


@dataclasses.dataclass(frozen=True)
class End:
    """How the conversation ended (before any time limit)."""

    exit_code: int | None
    final_text: str = ""
    reason: str = ""
    error: str | None = None
    provider_error: str | None = None
    asks: Ask | None = None


def mcp_failed(s: Session, message: str) -> End:
    """An MCP server the attempt needs could not start: the attempt fails with the reason (not an outage)."""
    text = s.transcript.redact(message)
    s.transcript.error(s.turn, text, kind="mcp_start")
    return End(None, reason=text, error=text)


def record(s: Session, box: Toolbox, call: ToolCallOut, output: ToolOutput) -> str:
    """A call's result for the model (and the transcript); its text (for the repeat watch)."""
    s.transcript.tool(s.turn, call, output, name=box.name_of(call.name))
    content = s.transcript.redact(output.text)
    result = content
    left = s.max_turns - s.turn
    if 0 < left <= WRAP_UP_TURNS:
        content += (f"\n\n[Note: {left} model turn(s) left. Finish now: reply without tool calls with your "
                    "summary.]")
    s.messages.append({"role": "tool", "tool_call_id": call.id, "content": content})
    return result


async def run_calls(s: Session, box: Toolbox, calls: list[ToolCallOut]) -> list[tuple[str, str, str]] | End:
    """Run a turn's calls in order: ``(name, arguments, result)`` of each, or how the conversation ends (a call
    that waits for a person, an MCP server that cannot start)."""
    done = []
    for i, call in enumerate(calls):
        bound = box.bind(call.name, call.arguments)
        if isinstance(bound, ToolOutput):
            output = bound
        elif bound.name == ASK_HUMAN.name and s.request.questions_left <= 0:
            output = fail("this task may ask no more questions ([questions] max_per_task): decide yourself, say "
                          "what you assumed in your summary, and go on", "no_more_questions")
        elif bound.name == ASK_HUMAN.name or box.needs_approval(bound):
            return park(s, bound, calls[i:])
        else:
            try:
                output = await box.run(bound)
            except McpStartError as e:
                return mcp_failed(s, str(e))
        done.append((call.name, call.arguments, record(s, box, call, output)))
    return done


def park(s: Session, bound: Bound, calls: list[ToolCallOut]) -> End:
    """Stop at ``bound`` (``calls[0]``): the attempt ends asking, with what the conversation needs to go on."""
    snapshot = {"messages": s.messages, "pending": [dataclasses.asdict(c) for c in calls], "turn": s.turn,
                "outcomes": s.outcomes}
    if bound.name == ASK_HUMAN.name:
        ask = Ask(QuestionKind.QUESTION, "ask_human", str(bound.arguments["question"]), snapshot=snapshot)
        note = f"waiting for a person's answer: {ask.text}"
    else:
        ask = Ask(QuestionKind.TOOL, "tool", bound.name, arguments=bound.arguments, snapshot=snapshot)
        note = f"waiting for a person to approve {bound.name}"
    s.transcript.asked(s.turn, ask.kind.value, ask.text, ask.arguments)
    return End(0, final_text=note, reason=note, asks=ask)


async def go_on(s: Session, box: Toolbox) -> End | None:
    """Restore the conversation of ``s.request.resume`` and deliver what came back; an :class:`End` when it
    stops again (another call that waits, a server that cannot start)."""
    q = s.request.resume
    assert q is not None and q.snapshot is not None
    snap = q.snapshot
    s.messages, s.turn = list(snap["messages"]), int(snap["turn"])
    s.outcomes = list(snap.get("outcomes") or [])
    pending = [ToolCallOut(c["id"], c["name"], c["arguments"]) for c in snap["pending"]]
    first = pending[0]
    deliver = s.request.deliver
    text = delivery_text(q)
    s.transcript.answered(s.turn, q.id, q.answered_by, text)
    if q.kind is QuestionKind.QUESTION:
        output = ToolOutput(True, text)
    elif not q.approved:
        output = fail(text, "refused")
    elif q.result == RUNNING:
        output = fail("the daemon stopped while this approved call ran: whether it took effect is unknown; check "
                      "(with a tool that only reads) before you call it again", "interrupted")
    elif q.result is not None:
        output = ToolOutput(not q.result.startswith("Error:"), q.result)
    else:
        bound = box.bind(first.name, first.arguments)
        if isinstance(bound, ToolOutput):
            output = bound
        else:
            if deliver is not None:
                await deliver(RUNNING)
            try:
                output = await box.run(bound)
            except McpStartError as e:
                output = fail(f"it could not run: {e}", "mcp_start")
            if deliver is not None:
                await deliver(s.transcript.redact(output.text))
    if deliver is not None and (q.kind is QuestionKind.QUESTION or not q.approved or q.result is not None):
        await deliver(None)
    record(s, box, first, output)
    rest = await run_calls(s, box, pending[1:])
    return rest if isinstance(rest, End) else None
