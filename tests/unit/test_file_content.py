"""file_content in each mode, on real files: exact (one trailing newline ignored), contains, regex; the messages
say where and why; the schema refuses bad paths and patterns; the registry and the engine pick it up."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import anyio
import pytest
from pydantic import TypeAdapter, ValidationError

from polpo.checks.base import CheckContext, CheckOutcome
from polpo.checks.file_content import INLINE_BYTES, FileContentExpectation, first_mismatch
from polpo.checks.registry import CHECKS, EXPECTATION_TYPES, Expectation, check_for
from polpo.clock import FakeClock
from tests.support.engine import ScriptAgent, config, engine_on_memory
from tests.support.threads import every_worker_thread_taken, waits_for_a_thread

pytestmark = pytest.mark.anyio
EXP: TypeAdapter[Any] = TypeAdapter(Expectation)


async def check(ws: Path, **fields: Any) -> CheckOutcome:
    exp = EXP.validate_python({"type": "file_content", **fields})
    ctx = CheckContext(workspace=ws, clock=FakeClock(), check_timeout=5)
    return await check_for("file_content").run(exp, ctx)


@pytest.mark.parametrize(("content", "expected", "passed"), [
    ("Hello World!", "Hello World!", True),
    ("Hello World!\n", "Hello World!", True),      # echo's newline is ignored
    ("Hello World!\r\n", "Hello World!", True),
    ("Hello World!", "Hello World!\n", True),      # on either side
    ("Hello World!\n\n", "Hello World!", False),   # only one
    ("Hello World! ", "Hello World!", False),      # other whitespace counts
    ("hello world!", "Hello World!", False),
    ("Hello\nWorld", "Hello\nWorld\n", True),
])
async def test_exact(tmp_path: Path, content: str, expected: str, passed: bool) -> None:
    (tmp_path / "hello.txt").write_bytes(content.encode())
    res = await check(tmp_path, path="hello.txt", expected=expected)
    assert res.passed is passed, res.message


async def test_exact_failure_names_the_first_mismatch_and_shows_a_diff(tmp_path: Path) -> None:
    (tmp_path / "poem.txt").write_text("roses are red\nviolets are green\nsugar is sweet\n")
    res = await check(tmp_path, path="poem.txt", expected="roses are red\nviolets are blue\nsugar is sweet")
    assert not res.passed
    assert res.message == ("poem.txt differs from the expected content at line 2, column 13: "
                           "expected 'blue', found 'green'")
    assert res.details is not None
    assert "-violets are blue" in res.details and "+violets are green" in res.details


def test_first_mismatch_when_one_text_is_longer() -> None:
    assert first_mismatch("a\nb", "a") == "line 2: the file goes on where the expected text ends: 'b'"
    assert first_mismatch("a", "a\nb") == "line 2: the file ends where the expected text goes on: 'b'"


async def test_contains(tmp_path: Path) -> None:
    (tmp_path / "log.txt").write_text("start\nall 12 tests passed\nend\n")
    assert (await check(tmp_path, path="log.txt", expected="12 tests passed", match="contains")).passed
    res = await check(tmp_path, path="log.txt", expected="13 tests passed", match="contains")
    assert not res.passed and res.message == "log.txt does not contain '13 tests passed'"
    assert res.details is not None and res.details.startswith("start of the file:\nstart\nall 12")


async def test_regex(tmp_path: Path) -> None:
    (tmp_path / "version.txt").write_text("name: polpo\nversion: 1.4.2\n")
    assert (await check(tmp_path, path="version.txt", expected=r"^version: \d+\.\d+\.\d+$", match="regex")).passed
    res = await check(tmp_path, path="version.txt", expected=r"^version: 2\.", match="regex")
    assert not res.passed and res.message == r"version.txt has no match for /^version: 2\./"


async def test_a_missing_file_or_one_outside_the_workspace_fails_with_the_reason(tmp_path: Path) -> None:
    res = await check(tmp_path, path="nope.txt", expected="x")
    assert not res.passed and res.message == "nope.txt does not exist"
    outside = tmp_path.parent / "secret.txt"
    outside.write_text("x")
    (tmp_path / "link.txt").symlink_to(outside)
    res = await check(tmp_path, path="link.txt", expected="x")
    assert not res.passed and "outside" in res.message


def test_the_schema_refuses_bad_paths_and_patterns() -> None:
    for bad in ({"path": "/etc/passwd", "expected": "x"}, {"path": "../x", "expected": "x"},
                {"path": "a", "expected": "(", "match": "regex"}, {"path": "a", "expected": "", "match": "contains"},
                {"path": "a", "expected": "x", "match": "fuzzy"}):
        with pytest.raises(ValidationError):
            EXP.validate_python({"type": "file_content", **bad})
    exp = EXP.validate_python({"type": "file_content", "path": "a.txt", "expected": "x"})
    assert isinstance(exp, FileContentExpectation) and exp.match == "exact"
    assert EXP.validate_python({"type": "file_content", "path": "a", "expected": "x", "match": "CONTAINS"}).match \
        == "contains"  # agent-judge's spelling


def test_the_registry_discovers_it_ranked_with_the_cheap_checks() -> None:
    assert "file_content" in EXPECTATION_TYPES
    assert CHECKS["file_content"].rank == 0 and not CHECKS["file_content"].needs_agent_success


async def test_a_task_with_file_content_gets_a_fix_that_names_the_mismatch(tmp_path: Path) -> None:
    def act(r: Any) -> int:
        (r.workspace / "hello.txt").write_text("Hello World!\n" if r.kind == "fix" else "hello world\n")
        return 0
    agent = ScriptAgent(act)
    async with engine_on_memory(config(tmp_path), agents={"fake": agent}) as run:
        m = await run.accept({"tasks": [{"title": "t", "description": "greet", "assignTo": "fake", "expectations": [
            {"type": "file_content", "path": "hello.txt", "expected": "Hello World!"}]}]})
        done = await run.wait_event("mission:completed", mission_id=m.id)
    assert done.data["outcome"] == "completed"
    assert [r.kind for r in agent.requests] == ["initial", "fix"]
    assert agent.requests[1].feedback is not None and "line 1, column 1" in agent.requests[1].feedback
    assert "file_content: hello.txt is exactly 'Hello World!'" in agent.requests[0].prompt


async def test_a_fifo_under_the_expected_name_fails_the_check_at_once(tmp_path: Path) -> None:
    """Opening a FIFO for reading waits for a writer: the check would have held its task in review forever."""
    os.mkfifo(tmp_path / "hello.txt")
    with anyio.fail_after(10):
        res = await check(tmp_path, path="hello.txt", expected="Hello")
    assert not res.passed and res.message == "hello.txt cannot be read: not a regular file"
    (tmp_path / "folder").mkdir()
    res = await check(tmp_path, path="folder", expected="x")
    assert not res.passed and res.message == "folder cannot be read: not a regular file"


async def test_a_task_whose_agent_leaves_a_fifo_gets_a_fix_instead_of_waiting_forever(tmp_path: Path) -> None:
    def act(r: Any) -> int:
        target = r.workspace / "hello.txt"
        if r.kind == "fix":
            target.unlink()
            target.write_text("Hello\n")
        else:
            os.mkfifo(target)
        return 0
    agent = ScriptAgent(act)
    async with engine_on_memory(config(tmp_path), agents={"fake": agent}) as run:
        m = await run.accept({"tasks": [{"title": "t", "description": "greet", "assignTo": "fake", "expectations": [
            {"type": "file_content", "path": "hello.txt", "expected": "Hello"}]}]})
        with anyio.fail_after(30):
            done = await run.wait_event("mission:completed", mission_id=m.id)
    assert done.data["outcome"] == "completed"
    assert [r.kind for r in agent.requests] == ["initial", "fix"]
    assert agent.requests[1].feedback is not None and "not a regular file" in agent.requests[1].feedback


async def test_a_small_file_is_read_without_a_worker_thread_and_a_large_one_in_one(tmp_path: Path) -> None:
    """A thread's round trip is about half a millisecond on a busy machine: a small file is read on the loop, so the
    check ends while every worker thread is taken; a large one waits for a thread (it would hold the loop)."""
    (tmp_path / "small.txt").write_text("x" * INLINE_BYTES)
    (tmp_path / "large.txt").write_text("y" * (INLINE_BYTES + 1))
    async with every_worker_thread_taken() as free:
        with anyio.fail_after(10):
            assert (await check(tmp_path, path="small.txt", expected="x" * INLINE_BYTES)).passed
        res = await waits_for_a_thread(lambda: check(tmp_path, path="large.txt", expected="y", match="contains"), free)
    assert res.passed
