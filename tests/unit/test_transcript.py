"""polpo.agents.transcript: bounded, redacted turns; files_touched and timeline_text read them back."""

from __future__ import annotations

import json
from typing import Any

import pytest

from polpo.agents.transcript import (
    RESULT_CHARS,
    Redactor,
    Transcript,
    clip,
    files_touched,
    timeline_text,
)
from polpo.clock import FakeClock
from polpo.llm.client import ChatReply, ToolCallOut
from polpo.tools.output import ToolOutput

SECRET = "sk-unit-secret-0123456789"


def reply(content: str | None = None, *calls: ToolCallOut, **kw: Any) -> ChatReply:
    return ChatReply(content=content, tool_calls=list(calls), finish_reason="tool_calls" if calls else "stop",
                     model="openai/m", prompt_tokens=10, completion_tokens=5, **kw)


def call(name: str, args: dict[str, Any] | str, id: str = "c1") -> ToolCallOut:
    return ToolCallOut(id=id, name=name, arguments=args if isinstance(args, str) else json.dumps(args))


def written(t: Transcript, turn: int, path: str, *, created: bool, id: str) -> None:
    c = call("write_file", {"path": path, "content": "x"}, id)
    t.assistant(turn, reply(None, c))
    t.tool(turn, c, ToolOutput(True, f"wrote 1 bytes to {path}", {"path": path, "bytes": 1, "created": created}))


def test_clip_keeps_short_text_and_says_how_much_was_cut() -> None:
    assert clip("abc", 3) == "abc"
    assert clip("abcdef", 2) == "ab[… 4 more chars]"


def test_entries_are_json_able_with_clock_timestamps_and_costs() -> None:
    clock = FakeClock()
    t = Transcript(clock)
    c = call("read_file", {"path": "a.py"})
    t.assistant(1, reply("looking", c, cost=0.002, retries=1, retry_errors=["RateLimitError: slow down"]))
    clock.advance(1.5)
    t.tool(1, c, ToolOutput(True, "   1| x = 1", {"path": "a.py", "lines": 1, "entries": ["not", "scalar"]}))
    t.error(2, "model call failed (auth): nope", kind="auth")
    a, tool, err = t.turns
    assert a == {"turn": 1, "ts": "2026-01-01T00:00:00.000Z", "type": "assistant", "text": "looking",
                 "toolCalls": [{"id": "c1", "name": "read_file", "arguments": '{"path": "a.py"}'}],
                 "finishReason": "tool_calls", "model": "openai/m", "tokens": 15, "promptTokens": 10,
                 "completionTokens": 5, "cost": 0.002, "duration": 0.0, "retries": 1,
                 "retryErrors": ["RateLimitError: slow down"]}
    assert tool == {"turn": 1, "ts": "2026-01-01T00:00:01.500Z", "type": "tool", "callId": "c1",
                    "name": "read_file", "ok": True, "result": "   1| x = 1", "data": {"path": "a.py", "lines": 1}}
    assert err["type"] == "error" and err["kind"] == "auth" and err["turn"] == 2
    json.dumps(t.turns)


def test_failed_tool_results_carry_their_error_kind() -> None:
    t = Transcript(FakeClock())
    c = call("read_file", "{bad")
    t.tool(1, c, ToolOutput(False, "Error: arguments are not valid JSON", {"error": "invalid_json", "tool": "x"}))
    assert t.turns[0]["ok"] is False and t.turns[0]["error"] == "invalid_json"
    assert t.turns[0]["data"] == {"tool": "x"}


def test_long_results_and_arguments_are_truncated() -> None:
    t = Transcript(FakeClock())
    big = "y" * 100_000
    c = call("write_file", {"path": "big.txt", "content": big})
    t.assistant(1, reply(None, c))
    t.tool(1, c, ToolOutput(True, "z" * (RESULT_CHARS + 500)))
    args = t.turns[0]["toolCalls"][0]["arguments"]
    assert len(args) < 5_000 and args.endswith("more chars]")
    assert t.turns[1]["result"] == "z" * RESULT_CHARS + "[… 500 more chars]"


def test_every_string_is_redacted(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SOME_SERVICE_TOKEN", SECRET)
    extra = "plain-looking-value-42"
    t = Transcript(FakeClock(), secrets=[extra, ""])
    c = call("run_command", {"command": f"echo {SECRET} {extra}"})
    t.assistant(1, reply(f"using {SECRET}", c))
    t.tool(1, c, ToolOutput(True, f"out {SECRET} {extra}", {"note": f"{extra}"}))
    t.error(1, f"failed with {SECRET}")
    dumped = json.dumps(t.turns)
    assert SECRET not in dumped and extra not in dumped
    assert dumped.count("***") >= 6


def test_redaction_happens_before_the_cut() -> None:
    t = Transcript(FakeClock(), secrets=["SECRETVALUE"])
    text = "a" * (RESULT_CHARS - 5) + "SECRETVALUE"
    t.tool(1, call("read_file", {}), ToolOutput(True, text))
    assert "SECRE" not in t.turns[0]["result"]


def test_files_touched_from_successful_writes_and_edits() -> None:
    t = Transcript(FakeClock())
    written(t, 1, "new.py", created=True, id="a")
    written(t, 2, "old.py", created=False, id="b")
    c = call("edit_file", {"path": "new.py", "old": "x", "new": "y"}, "c")
    t.tool(3, c, ToolOutput(True, "edited new.py", {"path": "new.py", "line": 1, "replacements": 1}))
    c = call("edit_file", {"path": "other.py", "old": "x", "new": "y"}, "d")
    t.tool(3, c, ToolOutput(True, "edited other.py", {"path": "other.py", "line": 1, "replacements": 1}))
    t.tool(3, call("edit_file", {}, "e"), ToolOutput(False, "Error: not found", {"error": "not_found"}))
    c = call("write_file", {}, "f")
    t.tool(3, c, ToolOutput(False, "Error: refused", {"error": "sandbox", "path": "evil.py"}))
    t.tool(3, call("read_file", {}, "g"), ToolOutput(True, "   1| x", {"path": "seen.py"}))
    written(t, 4, "old.py", created=False, id="h")
    assert files_touched(t.turns) == {"created": ["new.py"], "edited": ["old.py", "other.py"]}
    assert files_touched([]) == {"created": [], "edited": []}
    assert files_touched([{"type": "tool", "ok": True, "name": "write_file"}]) == {"created": [], "edited": []}


def test_timeline_text_is_compact_and_readable() -> None:
    t = Transcript(FakeClock())
    c1 = call("read_file", {"path": "a.py"}, "1")
    c2 = call("write_file", {"path": "b.py", "content": "line\n" * 100}, "2")
    t.assistant(1, reply("First I read a.py", c1, c2))
    t.tool(1, c1, ToolOutput(True, "   1| import os\n   2| print(1)", {"path": "a.py"}))
    t.tool(1, c2, ToolOutput(True, "wrote 500 bytes", {"path": "b.py", "created": True}))
    c3 = call("read_file", {"path": "../x"}, "3")
    t.assistant(2, reply(None, c3))
    t.tool(2, c3, ToolOutput(False, "Error: path '../x' refused", {"error": "sandbox"}))
    t.assistant(3, reply("All done: wrote b.py."))
    out = timeline_text(t.turns, 10_000)
    lines = out.splitlines()
    assert lines[0].startswith("Execution timeline: 3 model turns, 3 tool calls (1 failed)")
    assert "files created: b.py" in lines[0]
    assert lines[1] == "turn 1 · assistant: First I read a.py"
    assert lines[2] == 'turn 1 · ✓ read_file(path="a.py") → 1| import os 2| print(1)'
    assert lines[3] == 'turn 1 · ✓ write_file(path="b.py", content=<500 chars>) → wrote 500 bytes'
    assert lines[4] == "turn 2 · ✗ read_file(path=\"../x\") → Error: path '../x' refused"
    assert lines[5] == "turn 3 · final answer: All done: wrote b.py."


def test_timeline_text_keeps_start_and_end_within_the_limit() -> None:
    t = Transcript(FakeClock())
    for i in range(1, 200):
        c = call("list_dir", {"path": f"dir{i}"}, str(i))
        t.assistant(i, reply(None, c))
        t.tool(i, c, ToolOutput(True, f"entries of dir{i}"))
    t.assistant(200, reply("the end"))
    t.error(200, "something broke")
    out = timeline_text(t.turns, 2_000)
    assert len(out) <= 2_000
    assert "dir1)" in out or 'dir1"' in out
    assert "steps omitted" in out
    assert out.rstrip().endswith("ERROR: something broke")
    assert "final answer: the end" in out


def test_timeline_text_tolerates_stored_json_and_odd_entries() -> None:
    stored: list[dict[str, Any]] = [
        {"type": "assistant", "turn": 1, "toolCalls": [{"id": "x", "name": "grep", "arguments": "{oops"}]},
        {"type": "tool", "turn": 1, "callId": "x", "name": "grep", "ok": False, "result": "Error: bad"},
        {"type": "mystery"},
        {"type": "assistant"},
    ]
    out = timeline_text(stored, 1_000)
    assert "✗ grep({oops) → Error: bad" in out
    assert "turn ? · final answer: (empty)" in out
    assert timeline_text([], 100).startswith("Execution timeline: 0 model turns")


def test_redactor_reads_secrets_once_and_masks_like_redact(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SOME_SERVICE_TOKEN", SECRET)
    mask = Redactor(["extra-value-99"])
    assert mask(f"a {SECRET} b extra-value-99") == "a *** b ***"
    assert mask("Authorization: Bearer abcdefghijklmnop") == "Authorization: Bearer ***"
    assert mask("nothing to hide") == "nothing to hide"
    monkeypatch.setenv("LATER_TOKEN", "set-after-the-session-began")
    assert mask("set-after-the-session-began") == "set-after-the-session-began"  # the documented limit
