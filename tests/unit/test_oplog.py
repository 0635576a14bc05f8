"""The operational log: JSON lines off a terminal, readable on one, with a task's ids bound to its records."""

from __future__ import annotations

import io
import json
import logging
from collections.abc import Iterator

import anyio
import pytest

from polpo.oplog import bind_task, configure_oplog


@pytest.fixture(autouse=True)
def _restore_logging() -> Iterator[None]:
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    yield
    root.handlers[:] = handlers
    root.setLevel(level)


def test_off_a_terminal_each_record_is_one_json_object_with_the_task_it_is_about(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("POLPO_LOG_FORMAT", raising=False)
    out = io.StringIO()
    configure_oplog(out)
    log = logging.getLogger("polpo.test")

    async def run() -> None:
        async def one_task() -> None:
            bind_task("calc", "calc:2")
            log.warning("agent %s is slow", "shell")

        async with anyio.create_task_group() as tg:
            tg.start_soon(one_task)
        log.warning("outside any task")  # the binding stayed in the task's own context
        try:
            raise ValueError("boom")
        except ValueError:
            log.exception("it failed")

    anyio.run(run)
    lines = [json.loads(x) for x in out.getvalue().splitlines()]
    assert lines[0] == {**lines[0], "event": "agent shell is slow", "level": "warning", "logger": "polpo.test",
                        "mission": "calc", "task": "calc:2"}
    assert "task" not in lines[1] and lines[1]["event"] == "outside any task"
    assert lines[2]["level"] == "error" and "ValueError: boom" in lines[2]["exception"]
    assert len(lines) == 3  # the traceback is inside its record, not lines of its own


def test_on_request_the_lines_are_readable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("POLPO_LOG_FORMAT", "console")
    out = io.StringIO()
    configure_oplog(out)
    logging.getLogger("polpo.test").warning("reopened %s", "events.jsonl")
    text = out.getvalue()
    assert "reopened events.jsonl" in text and "warning" in text and not text.startswith("{")
