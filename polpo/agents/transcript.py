"""The record of an LLM agent's session: every turn as a JSON-able dict, safe to store and to show.

An entry is ``{"turn": n, "ts": "…Z", "type": "assistant" | "tool" | "error", …}``:

* ``assistant``: ``text``, ``toolCalls`` (``[{"id", "name", "arguments"}]``, arguments as the model wrote them),
  ``finishReason``, ``model``, ``tokens`` / ``promptTokens`` / ``completionTokens``, ``cost``, ``duration``,
  ``retries``;
* ``tool``: ``callId``, ``name``, ``ok``, ``result`` (the text the model saw, cut to :data:`RESULT_CHARS`),
  ``error`` (the failure kind) and ``data`` (the tool's scalar details, e.g. ``path`` and ``created``);
* ``error``: ``error`` (the message) and ``kind``;
* ``question``: the agent stopped to ask a person (``kind`` question or tool, ``text``, a tool call's ``arguments``);
* ``answer``: the conversation goes on with what came back (``questionId``, ``by``, ``text``).

A tool entry's ``name`` is the tool's name for people: an MCP tool's ``SERVER.TOOL`` (its ``data`` has the
``server`` and the call's ``seconds``), not the name the model was shown.

Every string goes through :func:`polpo.llm.secrets.redact` (plus the session's own secrets, e.g. an API key held in
a variable whose name does not look secret) before it is stored: transcripts land in the database and in front of
reviewers. Long strings are cut with a ``[… N more chars]`` note so one big file write cannot bloat the store.

:func:`files_touched` and :func:`timeline_text` read a transcript back (a live one or one loaded from JSON), so
reviewers can judge an attempt that changed no files from what it did.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from polpo.changes.tracker import ToolLog
from polpo.clock import Clock, iso
from polpo.llm.client import ChatReply, ToolCallOut
from polpo.llm.secrets import _BEARER, redact, secret_values
from polpo.tools.output import ToolOutput

__all__ = [
    "ARGUMENT_CHARS",
    "RESULT_CHARS",
    "TEXT_CHARS",
    "Redactor",
    "Transcript",
    "clip",
    "files_touched",
    "timeline_text",
    "tool_log",
]

RESULT_CHARS = 2_000
"""Tool results kept per entry (the model saw all of it; the record needs the gist)."""
ARGUMENT_CHARS = 4_000
TEXT_CHARS = 20_000
"""Assistant text kept per entry: the final summary is the agent's answer, keep most of it."""
DATA_CHARS = 500


def clip(text: str, limit: int) -> str:
    """The first ``limit`` characters of ``text``, with a note saying how many more there were."""
    if len(text) <= limit:
        return text
    return text[:limit] + f"[… {len(text) - limit} more chars]"


class Redactor:
    """:func:`~polpo.llm.secrets.redact` for one session, with the secret values read once.

    ``redact`` scans the whole environment on every call (~50 µs); a session redacts several strings per turn.
    This checks the values read at session start (plus ``extra``) and the bearer/api-key pattern first, and calls
    ``redact`` only when there is something to mask. A secret variable set *during* a session is missed until the
    next one: the daemon sets its keys at start-up.
    """

    __slots__ = ("extra", "values")

    def __init__(self, extra: Iterable[str] = ()) -> None:
        self.extra: tuple[str, ...] = tuple(e for e in extra if e)
        self.values: tuple[str, ...] = (*secret_values(), *self.extra)

    def __call__(self, text: str) -> str:
        if any(v in text for v in self.values) or _BEARER.search(text):
            return redact(text, self.extra)
        return text


class Transcript:
    """Appends redacted, bounded turns; ``turns`` is the JSON-able list handed to :class:`AgentResult`."""

    def __init__(self, clock: Clock, *, secrets: Iterable[str] = ()) -> None:
        self.clock = clock
        self.redact = Redactor(secrets)
        self.turns: list[dict[str, Any]] = []

    def safe(self, text: str, limit: int) -> str:
        """``text`` redacted, then clipped (redacting first: a cut must not leave half a key behind)."""
        return clip(self.redact(text), limit)

    def _add(self, turn: int, entry_type: str, **fields: Any) -> dict[str, Any]:
        entry: dict[str, Any] = {"turn": turn, "ts": iso(self.clock.now()), "type": entry_type, **fields}
        self.turns.append(entry)
        return entry

    def assistant(self, turn: int, reply: ChatReply) -> None:
        """One model answer: its text, the tool calls it asked for, and what it cost."""
        entry = self._add(
            turn,
            "assistant",
            text=self.safe(reply.content, TEXT_CHARS) if reply.content is not None else None,
            toolCalls=[self._call(c) for c in reply.tool_calls],
            finishReason=reply.finish_reason,
            model=reply.model,
            tokens=reply.prompt_tokens + reply.completion_tokens,
            promptTokens=reply.prompt_tokens,
            completionTokens=reply.completion_tokens,
            cost=reply.cost,
            duration=round(reply.duration, 4),
            retries=reply.retries,
        )
        if reply.retry_errors:
            entry["retryErrors"] = [self.safe(e, DATA_CHARS) for e in reply.retry_errors]

    def _call(self, call: ToolCallOut) -> dict[str, Any]:
        return {"id": call.id, "name": self.safe(call.name, 200), "arguments": self.safe(call.arguments, ARGUMENT_CHARS)}

    def tool(self, turn: int, call: ToolCallOut, output: ToolOutput, name: str | None = None) -> None:
        """One tool result, as the model received it (cut) plus the tool's scalar details; ``name``: the tool's
        name for people when it differs from the one the model called."""
        fields: dict[str, Any] = {
            "callId": call.id,
            "name": self.safe(name or call.name, 200),
            "ok": output.ok,
            "result": self.safe(output.text, RESULT_CHARS),
        }
        if not output.ok:
            fields["error"] = str(output.data.get("error") or "error")
        data = self._scalars(output.data)
        if data:
            fields["data"] = data
        self._add(turn, "tool", **fields)

    def _scalars(self, data: Mapping[str, Any]) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for key, value in data.items():
            if key == "error":
                continue
            if isinstance(value, str):
                out[key] = self.safe(value, DATA_CHARS)
            elif value is None or isinstance(value, bool | int | float):
                out[key] = value
        return out

    def error(self, turn: int, message: str, *, kind: str | None = None) -> None:
        """Why the session stopped early (model error, time limit, turn limit)."""
        self._add(turn, "error", error=self.safe(message, TEXT_CHARS), kind=kind)

    def asked(self, turn: int, kind: str, text: str, arguments: Mapping[str, Any] | None = None) -> None:
        """The agent stopped to ask a person (a question, or a tool call to approve)."""
        entry = self._add(turn, "question", kind=kind, text=self.safe(text, TEXT_CHARS))
        if arguments is not None:
            entry["arguments"] = self.safe(json.dumps(arguments, ensure_ascii=False, default=str), ARGUMENT_CHARS)

    def answered(self, turn: int, question_id: str, by: str | None, text: str) -> None:
        """The conversation goes on with what came back for the question."""
        self._add(turn, "answer", questionId=question_id, by=self.safe(by or "", 200), text=self.safe(text, TEXT_CHARS))


# ------------------------------------------------------------------------------------------------- reading back


def files_touched(transcript: Sequence[Mapping[str, Any]]) -> dict[str, list[str]]:
    """Files the session created or edited through successful ``write_file`` / ``edit_file`` calls.

    A file created and later edited counts as created; ``write_file`` over an existing file counts as edited.
    Order is first touch. (Changes made by ``run_command`` are not visible here; the engine diffs the workspace.)
    """
    created: list[str] = []
    edited: list[str] = []
    for entry in transcript:
        if entry.get("type") != "tool" or not entry.get("ok"):
            continue
        name = entry.get("name")
        if name not in ("write_file", "edit_file"):
            continue
        data = entry.get("data") or {}
        path = data.get("path")
        if not isinstance(path, str) or path in created:
            continue
        if name == "write_file" and data.get("created"):
            if path in edited:
                edited.remove(path)  # deleted (by a command) and written anew: it is new now
            created.append(path)
        elif path not in edited:
            edited.append(path)
    return {"created": created, "edited": edited}


def tool_log(transcript: Sequence[Mapping[str, Any]] | None) -> ToolLog | None:
    """An LLM agent's file-tool writes, for change attribution; complete when it ran no shell command."""
    if transcript is None:
        return None
    touched = files_touched(transcript)
    ran = any(e.get("type") == "tool" and e.get("name") == "run_command" for e in transcript)
    return ToolLog(tuple(touched["created"]), tuple(touched["edited"]), complete=not ran)


def _one_line(text: str, limit: int) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def _compact_args(arguments: Any, limit: int = 240) -> str:
    """Arguments as ``key=value`` pairs, long values shortened (a written file shows as its size)."""
    parsed: Any = arguments
    if isinstance(arguments, str):
        try:
            parsed = json.loads(arguments)
        except ValueError:
            return _one_line(arguments, limit)
    if not isinstance(parsed, Mapping):
        return _one_line(json.dumps(parsed, default=str), limit)
    parts = []
    for key, value in parsed.items():
        if isinstance(value, str) and len(value) > 80:
            shown = f"<{len(value)} chars>" if "\n" in value else repr(_one_line(value, 80))
        else:
            shown = json.dumps(value, default=str, ensure_ascii=False)
        parts.append(f"{key}={shown}")
    return _one_line(", ".join(parts), limit)


def _timeline_lines(transcript: Sequence[Mapping[str, Any]]) -> list[str]:
    args_by_id: dict[str, Any] = {}
    lines: list[str] = []
    for entry in transcript:
        kind = entry.get("type")
        turn = entry.get("turn", "?")
        if kind == "assistant":
            calls = entry.get("toolCalls") or []
            for call in calls:
                args_by_id[str(call.get("id"))] = call.get("arguments")
            text = entry.get("text") or ""
            if not calls:
                lines.append(f"turn {turn} · final answer: {_one_line(text, 1200) or '(empty)'}")
            elif text.strip():
                lines.append(f"turn {turn} · assistant: {_one_line(text, 400)}")
        elif kind == "tool":
            mark = "✓" if entry.get("ok") else "✗"
            args = _compact_args(args_by_id.get(str(entry.get("callId")), ""))
            result = _one_line(str(entry.get("result") or ""), 300)
            lines.append(f"turn {turn} · {mark} {entry.get('name')}({args}) → {result}")
        elif kind == "error":
            lines.append(f"turn {turn} · ERROR: {_one_line(str(entry.get('error') or ''), 600)}")
        elif kind == "question":
            what = "asked a person" if entry.get("kind") == "question" else "waits for approval of"
            args = f"({_compact_args(entry['arguments'])})" if entry.get("arguments") else ""
            lines.append(f"turn {turn} · {what}: {_one_line(str(entry.get('text') or ''), 600)}{args}")
        elif kind == "answer":
            lines.append(f"turn {turn} · answer: {_one_line(str(entry.get('text') or ''), 600)}")
    return lines


def _summary(transcript: Sequence[Mapping[str, Any]]) -> str:
    turns = sum(1 for e in transcript if e.get("type") == "assistant")
    tools = [e for e in transcript if e.get("type") == "tool"]
    failed = sum(1 for e in tools if not e.get("ok"))
    touched = files_touched(transcript)
    line = f"Execution timeline: {turns} model turns, {len(tools)} tool calls ({failed} failed)"
    if touched["created"] or touched["edited"]:
        line += (f"; files created: {', '.join(touched['created']) or 'none'}"
                 f"; edited: {', '.join(touched['edited']) or 'none'}")
    return line


def timeline_text(transcript: Sequence[Mapping[str, Any]], limit_chars: int) -> str:
    """A compact, human-readable account of the session, at most ``limit_chars`` long.

    One line per tool call (✓/✗, arguments, start of the result), per assistant remark and per error. When it is
    too long the middle goes: the start shows how the agent approached the task, the end what it finally did.
    """
    head = _summary(transcript)
    lines = _timeline_lines(transcript)
    text = "\n".join([head, *lines])
    if len(text) <= limit_chars:
        return text
    budget = max(0, limit_chars - len(head) - 60)
    first, last = _split_budget(lines, budget)
    omitted = len(lines) - len(first) - len(last)
    if omitted > 0:
        text = "\n".join([head, *first, f"[… {omitted} steps omitted …]", *last])
    return text[:limit_chars]


def _split_budget(lines: list[str], budget: int) -> tuple[list[str], list[str]]:
    """The lines that fit in a third of ``budget`` from the start and two thirds from the end."""
    first: list[str] = []
    used = 0
    for line in lines:
        if used + len(line) + 1 > budget // 3:
            break
        first.append(line)
        used += len(line) + 1
    last: list[str] = []
    used_end = 0
    for line in reversed(lines[len(first):]):
        if used + used_end + len(line) + 1 > budget:
            break
        last.append(line)
        used_end += len(line) + 1
    last.reverse()
    return first, last
