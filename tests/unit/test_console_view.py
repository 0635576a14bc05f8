"""What the daemon's terminal shows: attempt starts, a heartbeat for long runs, failed checks on fix/retry lines,
scores on done lines, colour only for a terminal."""

from __future__ import annotations

import io
from typing import Any

import pytest

from polpo.console import ConsoleView, use_color
from polpo.events.render import render, tone

TS = "2026-11-23T10:00:00.000Z"


def ev(name: str, task: str | None = "m:1", **data: Any) -> dict[str, Any]:
    out: dict[str, Any] = {"seq": 1, "ts": TS, "event": name, "missionId": "m", "data": data}
    if task:
        out["taskId"] = task
    return out


def test_an_attempt_start_is_a_line_and_a_long_one_gets_a_heartbeat_until_it_ends() -> None:
    view = ConsoleView(heartbeat=60)
    [start] = view.lines(ev("agent:spawned", agentName="coder", attempt=2, pid=42, kind="fix", model=None), now=0)
    assert "agent:spawned" in start and "m:1" in start and "attempt 2, fix" in start
    assert view.heartbeat(now=59) == []
    [beat] = view.heartbeat(now=270)
    assert "task:running" in beat and "attempt 2 (fix) by coder still running after 4m 30s" in beat
    assert view.heartbeat(now=300) == []  # one line per interval, not per tick
    assert len(view.heartbeat(now=331)) == 1
    assert view.lines(ev("agent:finished", agentName="coder", attempt=2, exitCode=0, duration=331.0,
                         timedOut=False, error=None, filesChanged=1), now=331) == []
    assert view.heartbeat(now=1000) == []


def test_done_lines_carry_the_score_and_fix_retry_lines_name_the_failed_check() -> None:
    view = ConsoleView()
    assert view.lines(ev("assessment:complete", attempt=1, trigger="initial", passed=True, checksPassed=True,
                         message="2/2 checks passed", globalScore=4.25, scores=[]), now=0) == []
    [done] = view.lines(ev("task:transition", **{"from": "review", "to": "done", "trigger": "pass"}), now=0)
    assert done.endswith("review → done; score 4.25")
    [fix] = view.lines(ev("task:fix", task="m:2", attempt=1, maxFix=2, check="test python3 -m pytest"), now=0)
    assert "fix attempt 1/2 after test python3 -m pytest failed" in fix
    [retry] = view.lines(ev("task:retry", task="m:2", attempt=1, maxRetries=3, check="llm_review tone"), now=0)
    assert "retry 1/3 after llm_review tone failed" in retry
    [failed] = view.lines(ev("task:transition", task="m:2", **{"from": "review", "to": "failed", "trigger": "x"}),
                          now=0)
    assert "score" not in failed
    assert view.lines(ev("task:transition", **{"from": "pending", "to": "assigned", "trigger": "dispatch"}), now=0) == []


def test_colour_marks_failures_red_and_successes_green_and_keeps_the_text() -> None:
    failed = ev("mission:completed", task=None, outcome="failed", allPassed=False,
                report={"summary": "1/2 tasks done", "durationSeconds": 3})
    completed = ev("mission:completed", task=None, outcome="completed", allPassed=True,
                   report={"summary": "2/2 tasks done", "durationSeconds": 3})
    assert (tone(failed), tone(completed)) == ("bad", "ok")
    red, green = render(failed, color=True), render(completed, color=True)
    assert "\x1b[31mmission:completed" in red and "\x1b[32mmission:completed" in green
    assert "\x1b" not in render(failed)
    plain = render(failed)
    assert red.replace("\x1b[0m", "").replace("\x1b[31m", "").replace("\x1b[2m", "").replace("\x1b[1m", "") == plain
    assert tone(ev("task:retry", attempt=1, maxRetries=2)) == "warn"
    assert tone(ev("agent:spawned", agentName="a", attempt=1, kind="initial")) == "info"


class _Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_colour_only_on_a_terminal_and_never_with_no_color(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("NO_COLOR", raising=False)
    monkeypatch.setenv("TERM", "xterm-256color")
    assert use_color(_Tty()) is True
    assert use_color(io.StringIO()) is False  # piped
    assert use_color(None) is False
    monkeypatch.setenv("NO_COLOR", "1")
    assert use_color(_Tty()) is False
    monkeypatch.delenv("NO_COLOR")
    monkeypatch.setenv("TERM", "dumb")
    assert use_color(_Tty()) is False
