"""LLM agents: a model works on the task through tools, in a loop, until it answers without calling one.

Each attempt is one conversation through :meth:`polpo.llm.client.LLMClient.chat` (the only door to a model: it
retries transient errors and limits per-model concurrency). The model gets every tool of
:data:`polpo.tools.catalog.TOOLS` (the workspace file tools, ``run_command``, ``register_outcome``), called through
the registry's dispatcher with the attempt's :class:`~polpo.tools.registry.ToolContext`. A tool problem — malformed
JSON arguments, an unknown tool, a path the sandbox refuses, a failing command — goes back to the model as a tool
result starting with ``Error:`` so it can correct itself; it never ends the session. What ends it:

* an answer without tool calls → exit code 0, the answer is ``stdout_tail``; an *empty* answer (no text, no tool
  call: small local models do this) is re-asked with a short nudge up to ``empty_reply_nudges`` times, then the
  attempt fails (exit code 1) with the reason "the model gave no answer" rather than passing on nothing;
* the same tool calls with the same results three turns in a row (a nudge after the second:
  :mod:`polpo.agents.repetition`) → exit code 0 with a note saying so: the repeats changed nothing, the checks
  decide;
* ``max_turns`` model calls without such an answer → exit code 1, the reason in ``stderr_tail``;
* an :class:`~polpo.llm.client.LLMError` (after the client's own retries) → ``error``; when the provider
  itself failed (unreachable, 5xx, timeouts, rate limits, a refused key) also ``provider_error``: the runner
  then records the attempt as interrupted by the provider, not as a failed run (:mod:`polpo.engine.outage`);
  a failure that the evidence blames on the request (:mod:`polpo.llm.failures`) fails the attempt instead;
* the attempt's time limit → ``timed_out`` (a running command is killed with its process group).

The agent has no process of its own, so it never calls ``on_start`` (the runner marks an LLM attempt running
itself); the commands it runs carry the attempt's marker variable for orphan recovery instead. The whole session
is recorded in a :class:`~polpo.agents.transcript.Transcript`, with every string redacted.
"""

from __future__ import annotations

import dataclasses
import math
import os
import time
from collections.abc import Callable, Mapping
from typing import Any

import anyio

from polpo.agents.base import AgentRequest, AgentResult
from polpo.agents.prompts import outcomes_block
from polpo.agents.repetition import REPEAT_NUDGE, REPEATS_TO_END, Repeat, RepeatWatch, signature
from polpo.agents.transcript import Transcript
from polpo.checks.registry import describe_expectation
from polpo.clock import Clock
from polpo.llm.client import OUTAGE_KINDS, LLMClient, LLMError, ModelSettings, ToolCallOut
from polpo.tools.catalog import TOOLS
from polpo.tools.registry import ToolContext
from polpo.tools.replay import replayable

__all__ = ["DEFAULT_SYSTEM_PROMPT", "TAIL_CHARS", "LLMAgent", "build_system_prompt", "build_task_message"]

TAIL_CHARS = 4_000
"""stdout_tail / stderr_tail bound, like a command agent's tails (the full text is in the transcript)."""
WRAP_UP_TURNS = 2
"""When this many model turns are left, the tool results say so, so the model can finish in time."""
MAX_SIBLINGS = 40
DEFAULT_EMPTY_REPLY_NUDGES = 2
EMPTY_REPLY_NUDGE = ("Your last reply was empty: no text and no tool call. Continue the task by calling a tool, or, if "
                     "the task is done, reply with a short summary of what you did.")

DEFAULT_SYSTEM_PROMPT = """\
You are {name}, an autonomous agent{role} working on one task of a larger mission.

You work inside a workspace folder, only through your tools:
- read_file, list_dir, glob, grep to look at what is there;
- write_file and edit_file to create and change files;
- run_command to run a bash command in the workspace root (tests, builds, scripts); it has no interactive input \
and a time limit;
- register_outcome to declare a deliverable the task asks for (a file, a text, a URL, a JSON result).
All paths are relative to the workspace root; absolute paths and '..' are refused.

Work step by step: look at what exists, make the changes, then check them (for example by running the tests). \
A tool result starting with "Error:" means the call failed: read it, and correct the call or take another way.

When the task is done, reply WITHOUT calling any tool, with a short summary of what you did and anything left \
undone. That reply ends your session: you cannot act after it."""


def build_system_prompt(name: str, role: str | None = None, custom: str | None = None) -> str:
    """The default instructions, or ``custom`` (a mission's own system prompt) with the role appended."""
    if custom:
        return f"{custom}\n\nYour role: {role}" if role else custom
    return DEFAULT_SYSTEM_PROMPT.format(name=name, role=f" (role: {role})" if role else "")


def _siblings(request: AgentRequest) -> str:
    shown = [f"- {title} — {status}" for title, status in request.siblings[:MAX_SIBLINGS]]
    if len(request.siblings) > MAX_SIBLINGS:
        shown.append(f"- … and {len(request.siblings) - MAX_SIBLINGS} more")
    return "\n".join(shown)


def _attempt_note(request: AgentRequest) -> str | None:
    if request.kind == "fix":
        head = (f"## Attempt {request.attempt_number}: a targeted fix\n"
                "Your previous run finished but did not pass its checks. Its work is still in the workspace: do "
                "not start over, fix what the feedback lists.")
    elif request.kind == "retry":
        head = (f"## Attempt {request.attempt_number}: a retry\n"
                "The previous attempt failed. Do the task again (its leftovers may still be in the workspace), "
                "avoiding what went wrong.")
    else:
        return None
    return head + ("\n\nFeedback on the previous attempt:\n" + request.feedback if request.feedback else "")


def build_task_message(request: AgentRequest) -> str:
    """The user message, built from the request's fields (``request.prompt`` is the command agents' version)."""
    parts = [f"# Task: {request.title}\n\n{request.description}"]
    mission = f"## Mission: {request.mission_name}"
    if request.mission_goal.strip():
        mission += f"\n{request.mission_goal.strip()}"
    parts.append(mission)
    if request.siblings:
        parts.append("## Other tasks of the mission (title — status)\n" + _siblings(request))
    if request.expectations:
        parts.append("## Your work will be checked by\n"
                     + "\n".join(f"- {describe_expectation(e)}" for e in request.expectations))
    if request.expected_outcomes:
        parts.append("## Expected outcomes\n" + outcomes_block(request.expected_outcomes))
    note = _attempt_note(request)
    if note:
        parts.append(note)
    return "\n\n".join(parts)


def _redact_json(value: Any, mask: Callable[[str], str]) -> Any:
    if isinstance(value, str):
        return mask(value)
    if isinstance(value, list):
        return [_redact_json(v, mask) for v in value]
    if isinstance(value, dict):
        return {mask(str(k)): _redact_json(v, mask) for k, v in value.items()}
    return value


def _tail(text: str) -> str:
    return text[-TAIL_CHARS:]


@dataclasses.dataclass
class _Session:
    """Mutable state of one attempt, so a timeout or a model error still returns everything gathered."""

    request: AgentRequest
    settings: ModelSettings
    transcript: Transcript
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
class _End:
    """How the conversation ended (before any time limit)."""

    exit_code: int | None
    final_text: str = ""
    reason: str = ""
    error: str | None = None
    provider_error: str | None = None


class LLMAgent:
    """An :class:`~polpo.agents.base.Agent` backed by a model and a tool loop; see the module docstring."""

    def __init__(
        self,
        name: str,
        settings: ModelSettings,
        *,
        client: LLMClient,
        clock: Clock,
        max_turns: int = 50,
        system_prompt: str | None = None,
        default_timeout: float | None = None,
        role: str | None = None,
        command_timeout: float = 120.0,
        empty_reply_nudges: int = DEFAULT_EMPTY_REPLY_NUDGES,
    ) -> None:
        if max_turns < 1:
            raise ValueError(f"agent {name!r}: max_turns must be at least 1, got {max_turns}")
        if empty_reply_nudges < 0:
            raise ValueError(f"agent {name!r}: empty_reply_nudges must be 0 or more, got {empty_reply_nudges}")
        self.name = name
        self.settings = settings
        self.client = client
        self.clock = clock
        self.max_turns = max_turns
        self.system_prompt = build_system_prompt(name, role, system_prompt)
        self.default_timeout = default_timeout
        self.role = role
        self.command_timeout = command_timeout
        self.empty_reply_nudges = empty_reply_nudges
        self.tools: list[dict[str, Any]] = TOOLS.schemas()

    def __repr__(self) -> str:
        return f"LLMAgent(name={self.name!r}, model={self.settings.model!r})"

    async def run(self, request: AgentRequest, *, on_start: Callable[[int | None], None]) -> AgentResult:
        """One attempt: the conversation, bounded by the request's (or the agent's default) time limit."""
        start = time.monotonic()
        settings = dataclasses.replace(self.settings, model=request.model) if request.model else self.settings
        key = os.environ.get(settings.api_key_env, "") if settings.api_key_env else ""
        transcript = Transcript(self.clock, secrets=(key,) if key else ())
        try:
            await anyio.Path(request.workspace).mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            message = f"cannot create workspace {request.workspace}: {exc.strerror or exc}"
            return self._result(_End(None, error=message), transcript, None, start, settings)
        session = _Session(request, settings, transcript)
        context = ToolContext(request.workspace, clock=self.clock, env_marker=request.env_marker,
                              command_timeout=self.command_timeout, outcome_sink=session.add_outcome)
        limit = request.timeout if request.timeout is not None else self.default_timeout
        end: _End | None = None
        with anyio.move_on_after(math.inf if limit is None else max(0.0, limit)):
            end = await self._converse(session, context)
        if end is None:
            reason = f"timed out after {limit:g} s (turn {session.turn} of at most {self.max_turns})"
            transcript.error(session.turn, reason, kind="timeout")
            return self._result(_End(None, reason=reason), transcript, session, start, settings, timed_out=True)
        return self._result(end, transcript, session, start, settings)

    # ------------------------------------------------------------------------------------------- conversation

    async def _converse(self, s: _Session, context: ToolContext) -> _End:
        s.messages = [{"role": "system", "content": self.system_prompt},
                      {"role": "user", "content": build_task_message(s.request)}]
        empty = 0
        repeats = RepeatWatch()
        while s.turn < self.max_turns:
            s.turn += 1
            try:
                reply = await self.client.chat(s.settings, s.messages, tools=self.tools, tool_choice="auto")
            except LLMError as exc:
                return self._model_failed(s, exc.kind, exc.message)
            except Exception as exc:  # a malformed answer litellm let through (no choices, …)
                return self._model_failed(s, "other", f"{type(exc).__name__}: {exc}")
            s.transcript.assistant(s.turn, reply)
            s.tokens += reply.prompt_tokens + reply.completion_tokens
            s.tokens_in += reply.prompt_tokens
            s.tokens_out += reply.completion_tokens
            if reply.cost is not None:
                s.costs.append(reply.cost)
            s.messages.append(replayable(reply.as_message()))
            if not reply.tool_calls:
                if (reply.content or "").strip():
                    return _End(0, final_text=s.transcript.redact(reply.content or ""))
                empty += 1
                if empty > self.empty_reply_nudges:
                    return self._no_answer(s, empty)
                s.messages.pop()  # an empty assistant turn says nothing, and some providers refuse one (Anthropic)
                s.messages.append({"role": "user", "content": EMPTY_REPLY_NUDGE})
                continue
            done = [(call.name, call.arguments, await self._tool_turn(s, context, call)) for call in reply.tool_calls]
            seen = repeats.see(signature(done))
            if seen is Repeat.END:
                return self._repeating(s, done[0][0])
            if seen is Repeat.NUDGE:
                s.messages.append({"role": "user", "content": REPEAT_NUDGE})
        reason = (f"max_turns ({self.max_turns}) reached: the model was still calling tools and never gave its "
                  "final answer")
        s.transcript.error(s.turn, reason, kind="max_turns")
        return _End(1, reason=reason)

    @staticmethod
    def _no_answer(s: _Session, empty: int) -> _End:
        reason = (f"the model gave no answer: {empty} empty replies (no text, no tool call), "
                  f"{empty - 1} of them re-asked")
        s.transcript.error(s.turn, reason, kind="empty_reply")
        return _End(1, reason=reason)

    @staticmethod
    def _model_failed(s: _Session, kind: str, message: str) -> _End:
        text = s.transcript.redact(f"model call failed ({kind}): {message}")
        s.transcript.error(s.turn, text, kind=kind)
        return _End(None, reason=text, error=text, provider_error=kind if kind in OUTAGE_KINDS else None)

    @staticmethod
    def _repeating(s: _Session, tool: str) -> _End:
        """The model repeats itself (polpo.agents.repetition): the conversation ends; the checks decide."""
        note = (f"polpo ended the conversation: the model made the same {tool} call {REPEATS_TO_END} times in a row "
                "with the same result (nothing changed); the checks decide whether the work is done")
        s.transcript.error(s.turn, note, kind="repeated")
        return _End(0, final_text=note, reason=note)

    async def _tool_turn(self, s: _Session, context: ToolContext, call: ToolCallOut) -> str:
        """Run one tool call and append its result for the model; the result's text (for the repeat watch)."""
        output = await TOOLS.dispatch(context, call.name, call.arguments)
        s.transcript.tool(s.turn, call, output)
        content = s.transcript.redact(output.text)
        result = content
        left = self.max_turns - s.turn
        if 0 < left <= WRAP_UP_TURNS:
            content += (f"\n\n[Note: {left} model turn(s) left. Finish now: reply without tool calls with your "
                        "summary.]")
        s.messages.append({"role": "tool", "tool_call_id": call.id, "content": content})
        return result

    # ------------------------------------------------------------------------------------------------ result

    def _result(self, end: _End, transcript: Transcript, s: _Session | None, start: float,
                settings: ModelSettings, *, timed_out: bool = False) -> AgentResult:
        stderr = end.reason
        return AgentResult(
            exit_code=end.exit_code,
            signal=None,
            timed_out=timed_out,
            stdout_tail=_tail(end.final_text),
            stderr_tail=_tail(stderr),
            stdout_bytes=len(end.final_text.encode("utf-8", errors="replace")),
            stderr_bytes=len(stderr.encode("utf-8", errors="replace")),
            duration=max(0.0, time.monotonic() - start),
            error=end.error,
            transcript=transcript.turns,
            outcomes=list(s.outcomes) if s is not None else [],
            model=settings.model,
            tokens=s.tokens if s is not None else 0,
            tokens_in=s.tokens_in if s is not None else 0,
            tokens_out=s.tokens_out if s is not None else 0,
            cost=sum(s.costs) if s is not None and s.costs else None,
            provider_error=end.provider_error,
        )

