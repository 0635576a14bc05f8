"""Deterministic checks with real files and real shells: file_exists, test, script."""

from __future__ import annotations

import os
from pathlib import Path

import anyio
import pytest

from polpo.checks.command import run_command_check
from polpo.checks.file_exists import INLINE_PATHS, run_file_exists
from polpo.checks.labels import command_label, truncate
from polpo.clock import FakeClock, SystemClock
from tests.support.procs import wait_dead
from tests.support.threads import every_worker_thread_taken, waits_for_a_thread


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


# ---------------------------------------------------------------------------------------------------- file_exists


@pytest.mark.anyio
async def test_file_exists_single_path(tmp_path: Path) -> None:
    (tmp_path / "hello.txt").write_text("hi")
    res = await run_file_exists(["hello.txt"], workspace=tmp_path, clock=SystemClock())
    assert res.passed
    assert res.type == "file_exists"
    assert res.label == "hello.txt"
    assert res.message == "All 1 file(s) exist"
    assert res.details is None


@pytest.mark.anyio
async def test_file_exists_several_paths_and_nested_dirs(tmp_path: Path) -> None:
    (tmp_path / "src" / "pkg").mkdir(parents=True)
    (tmp_path / "src" / "pkg" / "mod.py").write_text("")
    res = await run_file_exists(["src/pkg/mod.py", "src"], workspace=tmp_path, clock=SystemClock())
    assert res.passed
    assert res.message == "All 2 file(s) exist"


@pytest.mark.anyio
async def test_file_exists_never_looks_outside_the_workspace(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    outside = tmp_path / "outside.txt"
    outside.write_text("x")
    (ws / "link").symlink_to(outside)
    res = await run_file_exists([str(outside), "../outside.txt", "link"], workspace=ws, clock=SystemClock())
    assert not res.passed
    assert res.message.startswith("Missing 3/3 file(s)")
    assert res.details is not None and "absolute" in res.details and "outside" in res.details


@pytest.mark.anyio
async def test_file_exists_reports_missing_files(tmp_path: Path) -> None:
    (tmp_path / "a.txt").write_text("a")
    res = await run_file_exists(["a.txt", "b.txt", "dir/c.txt"], workspace=tmp_path, clock=SystemClock())
    assert not res.passed
    assert res.message == "Missing 2/3 file(s): b.txt, dir/c.txt"
    assert res.details == "b.txt\ndir/c.txt"
    assert res.label == "a.txt, b.txt, dir/c.txt"


@pytest.mark.anyio
async def test_file_exists_resolves_against_the_workspace_not_the_cwd(tmp_path: Path) -> None:
    (tmp_path / "only-here.txt").write_text("")
    other = tmp_path / "other"
    other.mkdir()
    res = await run_file_exists(["only-here.txt"], workspace=other, clock=SystemClock())
    assert not res.passed


@pytest.mark.anyio
async def test_file_exists_with_no_paths_fails(tmp_path: Path) -> None:
    res = await run_file_exists([], workspace=tmp_path, clock=SystemClock())
    assert not res.passed


@pytest.mark.anyio
async def test_file_exists_looks_up_a_few_paths_without_a_worker_thread_and_many_in_one(tmp_path: Path) -> None:
    """A thread's round trip cost a chained task a fifth of its step: a few paths are looked up on the loop, so the
    check finishes while every worker thread is taken; a long list waits for one (it would hold the loop)."""
    for i in range(INLINE_PATHS + 1):
        (tmp_path / f"f{i}.txt").write_text("")
    few = [f"f{i}.txt" for i in range(INLINE_PATHS)]
    many = [*few, f"f{INLINE_PATHS}.txt"]
    async with every_worker_thread_taken() as free:
        with anyio.fail_after(10):
            res = await run_file_exists(few, workspace=tmp_path, clock=SystemClock())
        assert res.passed and res.message == f"All {INLINE_PATHS} file(s) exist"
        res = await waits_for_a_thread(lambda: run_file_exists(many, workspace=tmp_path, clock=SystemClock()), free)
    assert res.passed and res.message == f"All {INLINE_PATHS + 1} file(s) exist"


# ------------------------------------------------------------------------------------------------------------ test


@pytest.mark.anyio
async def test_test_check_exit_0_passes(tmp_path: Path) -> None:
    res = await run_command_check("test", "true", workspace=tmp_path, clock=SystemClock())
    assert res.passed
    assert res.type == "test"
    assert res.message == "Test passed: true"
    assert res.details is None


@pytest.mark.anyio
async def test_test_check_exit_3_fails_unlike_polpo_bug_g1(tmp_path: Path) -> None:
    """Polpo §14 G1: a `test` expectation with `exit 3` passes there. Here it fails, judged by exit code."""
    res = await run_command_check("test", "exit 3", workspace=tmp_path, clock=SystemClock())
    assert not res.passed
    assert res.message == "Test failed: exit 3 (exit 3)"


@pytest.mark.anyio
async def test_test_check_always_expects_exit_0(tmp_path: Path) -> None:
    res = await run_command_check(
        "test", "exit 2", workspace=tmp_path, clock=SystemClock(), expect_exit_code=2
    )
    assert not res.passed


@pytest.mark.anyio
async def test_test_check_runs_in_the_workspace(tmp_path: Path) -> None:
    (tmp_path / "marker.txt").write_text("")
    res = await run_command_check("test", "test -f marker.txt", workspace=tmp_path, clock=SystemClock())
    assert res.passed


@pytest.mark.anyio
async def test_failure_details_are_stderr_else_stdout(tmp_path: Path) -> None:
    res = await run_command_check(
        "test", "echo to-stdout; echo 'assert 1 == 2' >&2; exit 1", workspace=tmp_path, clock=SystemClock()
    )
    assert not res.passed
    assert res.details == "assert 1 == 2"
    res = await run_command_check("test", "echo only-stdout; exit 1", workspace=tmp_path, clock=SystemClock())
    assert res.details == "only-stdout"


@pytest.mark.anyio
async def test_failure_details_are_bounded(tmp_path: Path) -> None:
    res = await run_command_check(
        "test",
        "head -c 100000 /dev/zero | tr '\\0' x >&2; echo LAST >&2; exit 1",
        workspace=tmp_path,
        clock=SystemClock(),
    )
    assert not res.passed
    assert res.details is not None
    assert len(res.details) <= 2001
    assert res.details.endswith("xLAST")


@pytest.mark.anyio
async def test_duration_is_measured_with_the_clock(tmp_path: Path) -> None:
    res = await run_command_check("test", "true", workspace=tmp_path, clock=FakeClock())
    assert res.duration == 0.0


# ---------------------------------------------------------------------------------------------------------- script


@pytest.mark.anyio
async def test_script_expect_exit_code_2_passes_on_exit_2(tmp_path: Path) -> None:
    res = await run_command_check(
        "script", "exit 2", workspace=tmp_path, clock=SystemClock(), expect_exit_code=2
    )
    assert res.passed
    assert res.message == "Script passed: exit 2"


@pytest.mark.anyio
async def test_script_wrong_exit_code_fails(tmp_path: Path) -> None:
    res = await run_command_check("script", "exit 1", workspace=tmp_path, clock=SystemClock())
    assert not res.passed
    assert res.message == "Script failed: exit 1 (exit 1, expected 0)"
    res = await run_command_check(
        "script", "exit 0", workspace=tmp_path, clock=SystemClock(), expect_exit_code=2
    )
    assert not res.passed
    assert res.message == "Script failed: exit 0 (exit 0, expected 2)"


@pytest.mark.anyio
async def test_multi_line_script_stops_at_the_first_failing_line(tmp_path: Path) -> None:
    script = "echo one > one.txt\nfalse\necho three > three.txt\n"
    res = await run_command_check("script", script, workspace=tmp_path, clock=SystemClock())
    assert not res.passed
    assert res.label == "echo one > one.txt (3 lines)"
    assert res.message == "Script failed: echo one > one.txt (3 lines) (exit 1, expected 0)"
    assert (tmp_path / "one.txt").exists()
    assert not (tmp_path / "three.txt").exists()


@pytest.mark.anyio
async def test_multi_line_script_uses_pipefail_and_nounset(tmp_path: Path) -> None:
    res = await run_command_check(
        "script", "false | true\ntouch after", workspace=tmp_path, clock=SystemClock()
    )
    assert not res.passed
    assert not (tmp_path / "after").exists()
    res = await run_command_check(
        "script", "echo $POLPO_UNSET_VARIABLE_XYZ\ntouch after", workspace=tmp_path, clock=SystemClock()
    )
    assert not res.passed
    assert not (tmp_path / "after").exists()


@pytest.mark.anyio
async def test_multi_line_script_that_succeeds_passes(tmp_path: Path) -> None:
    script = "mkdir -p out\necho ok > out/result.txt\ngrep -q ok out/result.txt"
    res = await run_command_check("script", script, workspace=tmp_path, clock=SystemClock())
    assert res.passed, res.details


@pytest.mark.anyio
async def test_single_line_command_keeps_plain_shell_semantics(tmp_path: Path) -> None:
    res = await run_command_check("script", "false; true", workspace=tmp_path, clock=SystemClock())
    assert res.passed


# ------------------------------------------------------------------------------------------------ timeouts and env


@pytest.mark.anyio
async def test_check_timeout_fails_and_kills_the_group(tmp_path: Path) -> None:
    script = "sleep 60 & echo $! > grandchild.pid\nwait"
    res = await run_command_check(
        "script", script, workspace=tmp_path, clock=SystemClock(), timeout=2.0, grace=1.0
    )
    assert not res.passed
    assert "timed out after 2s" in res.message
    assert wait_dead(int((tmp_path / "grandchild.pid").read_text()))


@pytest.mark.anyio
async def test_test_check_timeout_message(tmp_path: Path) -> None:
    res = await run_command_check(
        "test", "sleep 60", workspace=tmp_path, clock=SystemClock(), timeout=0.5, grace=1
    )
    assert not res.passed
    assert res.message == "Test failed: sleep 60 (timed out after 0.5s)"


@pytest.mark.anyio
async def test_check_env_has_no_secrets(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-should-not-leak")
    monkeypatch.setenv("SOME_TOKEN", "also-secret")
    res = await run_command_check("script", "env > env.txt", workspace=tmp_path, clock=SystemClock())
    assert res.passed
    lines = (tmp_path / "env.txt").read_text().splitlines()
    names = {line.split("=", 1)[0] for line in lines if "=" in line}
    assert "OPENAI_API_KEY" not in names
    assert "SOME_TOKEN" not in names
    assert "sk-should-not-leak" not in "\n".join(lines)
    assert f"POLPO_WORKSPACE={tmp_path}" in lines
    assert "PATH" in names


@pytest.mark.anyio
async def test_explicit_env_replaces_the_minimal_one(tmp_path: Path) -> None:
    res = await run_command_check(
        "test",
        'test "$CUSTOM" = yes && test -z "${HOME:-}"',
        workspace=tmp_path,
        clock=SystemClock(),
        env={"CUSTOM": "yes", "PATH": os.environ.get("PATH", "/usr/bin:/bin")},
    )
    assert res.passed, res.details


@pytest.mark.anyio
async def test_empty_command_fails(tmp_path: Path) -> None:
    res = await run_command_check("script", "  \n ", workspace=tmp_path, clock=SystemClock())
    assert not res.passed
    assert res.message == "No script command"


@pytest.mark.anyio
async def test_missing_workspace_fails_with_details(tmp_path: Path) -> None:
    res = await run_command_check("test", "true", workspace=tmp_path / "missing", clock=SystemClock())
    assert not res.passed
    assert res.details is not None
    assert "working directory" in res.details


# ----------------------------------------------------------------------------------------------------------- labels


def test_labels() -> None:
    assert command_label("test", "pytest -q") == "pytest -q"
    assert command_label("script", "a\nb\nc") == "a (3 lines)"
    long = "x" * 200
    assert len(command_label("test", long)) == 80
    assert command_label("test", long).endswith("…")
    multi = command_label("script", long + "\necho done")
    assert len(multi) == 80
    assert multi.endswith("… (2 lines)")
    assert truncate(", ".join(["a", "b"])) == "a, b"
    assert len(truncate(", ".join(["p" * 50, "q" * 50]))) == 80
