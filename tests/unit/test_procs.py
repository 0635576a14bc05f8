"""polpo.tools.procs with real subprocesses: process groups, timeouts, cancellation, bounded output."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import anyio
import pytest

from polpo.clock import FakeClock, SystemClock
from polpo.tools.procs import MINIMAL_ENV_KEYS, minimal_env, run_process
from polpo.tools.proctable import find_processes_with_env, kill_group, process_start_ticks, terminate_group
from tests.support.procs import wait_dead

PY = sys.executable


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def _env(**extra: str) -> dict[str, str]:
    return minimal_env(extra)


async def _wait_for_file(path: Path, seconds: float = 20.0) -> str:
    with anyio.fail_after(seconds):
        while True:
            apath = anyio.Path(path)
            if await apath.exists():
                text = (await apath.read_text()).strip()
                if text:
                    return text
            await anyio.sleep(0.02)


@pytest.mark.anyio
async def test_captures_exit_code_stdout_stderr(tmp_path: Path) -> None:
    script = "import sys; print('out line'); print('err line', file=sys.stderr); sys.exit(3)"
    res = await run_process([PY, "-c", script], cwd=tmp_path, env=_env(), clock=SystemClock())
    assert res.exit_code == 3
    assert res.signal is None
    assert not res.timed_out
    assert res.error is None
    assert res.stdout_tail == "out line\n"
    assert res.stderr_tail == "err line\n"
    assert res.stdout_bytes == len("out line\n")
    assert res.stderr_bytes == len("err line\n")
    assert not res.ok


@pytest.mark.anyio
async def test_runs_in_cwd_with_exactly_the_given_env(tmp_path: Path) -> None:
    script = "import os, json; print(json.dumps({'cwd': os.getcwd(), 'env': dict(os.environ)}))"
    res = await run_process(
        [PY, "-c", script],
        cwd=tmp_path,
        env={"ONLY_THIS": "yes", "PATH": "/usr/bin:/bin"},
        clock=SystemClock(),
    )
    import json

    data = json.loads(res.stdout_tail)
    assert await anyio.Path(data["cwd"]).resolve() == await anyio.Path(tmp_path).resolve()
    assert data["env"]["ONLY_THIS"] == "yes"
    assert "HOME" not in data["env"]
    assert res.ok


@pytest.mark.anyio
async def test_duration_comes_from_the_injected_clock(tmp_path: Path) -> None:
    res = await run_process(["true"], cwd=tmp_path, env=_env(), clock=FakeClock())
    assert res.exit_code == 0
    assert res.duration == 0.0  # the fake clock never moved


@pytest.mark.anyio
async def test_stdin_is_delivered_and_closed(tmp_path: Path) -> None:
    payload = b"hello\nworld \xc3\xa9\n" * 1000
    res = await run_process(["cat"], cwd=tmp_path, env=_env(), clock=SystemClock(), stdin=payload)
    assert res.exit_code == 0
    assert res.stdout_bytes == len(payload)
    assert res.stdout_tail == payload.decode()


@pytest.mark.anyio
async def test_without_stdin_the_program_reads_eof(tmp_path: Path) -> None:
    res = await run_process(["cat"], cwd=tmp_path, env=_env(), clock=SystemClock(), timeout=60)
    assert res.exit_code == 0
    assert res.stdout_tail == ""
    assert not res.timed_out


@pytest.mark.anyio
async def test_stdin_not_read_by_the_program_is_ignored(tmp_path: Path) -> None:
    # 4 MB that nobody reads: the write hits a broken pipe, which must not raise.
    res = await run_process(
        ["true"], cwd=tmp_path, env=_env(), clock=SystemClock(), stdin=b"x" * (4 * 1024 * 1024), timeout=60
    )
    assert res.exit_code == 0
    assert res.error is None


@pytest.mark.anyio
async def test_missing_program_gives_error_not_exception(tmp_path: Path) -> None:
    started: list[int] = []
    res = await run_process(
        ["polpo-no-such-program-xyz", "arg"],
        cwd=tmp_path,
        env=_env(),
        clock=SystemClock(),
        on_start=started.append,
    )
    assert res.error == "command not found: polpo-no-such-program-xyz"
    assert res.exit_code is None
    assert res.signal is None
    assert not res.timed_out
    assert started == []


@pytest.mark.anyio
async def test_non_executable_program_gives_permission_error(tmp_path: Path) -> None:
    script = tmp_path / "script.sh"
    script.write_text("#!/bin/sh\necho hi\n")
    script.chmod(0o644)
    res = await run_process([str(script)], cwd=tmp_path, env=_env(), clock=SystemClock())
    assert res.error is not None
    assert res.error.startswith("permission denied")
    assert res.exit_code is None


@pytest.mark.anyio
async def test_missing_working_directory_gives_error(tmp_path: Path) -> None:
    res = await run_process(["true"], cwd=tmp_path / "nope", env=_env(), clock=SystemClock())
    assert res.error is not None
    assert "working directory" in res.error
    assert res.exit_code is None


@pytest.mark.anyio
@pytest.mark.parametrize(("argv", "env"), [
    (["echo", "a\x00b"], {}),  # NUL in an argument
    (["ech\x00o"], {}),  # NUL in the program
    (["echo", "\ud800"], {}),  # a lone surrogate that the file system encoding cannot carry
    (["echo", "ok"], {"X": "a\x00b"}),  # NUL in the environment
])
async def test_unspawnable_text_gives_error_not_exception(tmp_path: Path, argv: list[str], env: dict[str, str]) -> None:
    res = await run_process(argv, cwd=tmp_path, env=_env(**env), clock=SystemClock())
    assert res.error is not None and res.error.startswith("cannot start ")
    assert res.exit_code is None
    res.error.encode("utf-8")  # the error itself can be stored
    assert "\x00" not in res.error


@pytest.mark.anyio
async def test_empty_argv_gives_error(tmp_path: Path) -> None:
    res = await run_process([], cwd=tmp_path, env=_env(), clock=SystemClock())
    assert res.error == "empty command"


@pytest.mark.anyio
async def test_on_start_gets_the_pid_which_leads_its_own_group(tmp_path: Path) -> None:
    seen: list[tuple[int, int]] = []

    def on_start(pid: int) -> None:
        seen.append((pid, os.getpgid(pid)))

    res = await run_process(
        ["sleep", "0.2"], cwd=tmp_path, env=_env(), clock=SystemClock(), on_start=on_start
    )
    assert res.exit_code == 0
    assert len(seen) == 1
    pid, pgid = seen[0]
    assert pid == pgid
    assert pgid != os.getpgrp()


@pytest.mark.anyio
async def test_timeout_kills_the_whole_group_including_grandchildren(tmp_path: Path) -> None:
    pidfile = tmp_path / "grandchild.pid"
    script = f"sleep 60 & echo $! > {pidfile}; echo started; wait"
    leader: list[int] = []
    res = await run_process(
        ["bash", "-c", script],
        cwd=tmp_path,
        env=_env(),
        clock=SystemClock(),
        timeout=2.0,
        grace=2.0,
        on_start=leader.append,
    )
    assert res.timed_out
    assert res.exit_code is None
    assert res.signal == signal.SIGTERM
    assert res.error is None
    assert "started" in res.stdout_tail  # output collected before the timeout is kept
    grandchild = int(pidfile.read_text())
    assert wait_dead(grandchild)
    assert wait_dead(leader[0])


@pytest.mark.anyio
async def test_timeout_escalates_to_sigkill_when_term_is_ignored(tmp_path: Path) -> None:
    pidfile = tmp_path / "grandchild.pid"
    # The trap makes bash and the sleep it starts ignore SIGTERM.
    script = f"trap '' TERM; sleep 60 & echo $! > {pidfile}; wait; wait"
    res = await run_process(
        ["bash", "-c", script], cwd=tmp_path, env=_env(), clock=SystemClock(), timeout=1.5, grace=0.5
    )
    assert res.timed_out
    assert res.signal == signal.SIGKILL
    assert wait_dead(int(pidfile.read_text()))


@pytest.mark.anyio
async def test_cancellation_kills_the_group_and_reraises(tmp_path: Path) -> None:
    pidfile = tmp_path / "grandchild.pid"
    script = f"sleep 60 & echo $! > {pidfile}; wait"
    leader: list[int] = []
    outcome: list[str] = []

    async def runner(scope: anyio.CancelScope) -> None:
        with scope:
            try:
                await run_process(
                    ["bash", "-c", script],
                    cwd=tmp_path,
                    env=_env(),
                    clock=SystemClock(),
                    grace=2.0,
                    on_start=leader.append,
                )
            except anyio.get_cancelled_exc_class():
                outcome.append("cancelled")
                raise
            outcome.append("returned")

    scope = anyio.CancelScope()
    async with anyio.create_task_group() as tg:
        tg.start_soon(runner, scope)
        grandchild = int(await _wait_for_file(pidfile))
        scope.cancel()

    assert outcome == ["cancelled"]
    assert wait_dead(grandchild)
    assert wait_dead(leader[0])


@pytest.mark.anyio
async def test_leftover_group_members_are_killed_after_a_normal_exit(tmp_path: Path) -> None:
    pidfile = tmp_path / "grandchild.pid"
    script = f"sleep 60 >/dev/null 2>&1 & echo $! > {pidfile}; exit 0"
    res = await run_process(["bash", "-c", script], cwd=tmp_path, env=_env(), clock=SystemClock(), timeout=60)
    assert res.exit_code == 0
    assert not res.timed_out
    assert wait_dead(int(pidfile.read_text()))


@pytest.mark.anyio
async def test_background_child_holding_the_pipes_does_not_hang_the_run(tmp_path: Path) -> None:
    pidfile = tmp_path / "grandchild.pid"
    # The sleep inherits stdout/stderr: without the group kill, reading would wait 60 s for EOF.
    script = f"sleep 60 & echo $! > {pidfile}; echo bye; exit 4"
    res = await run_process(["bash", "-c", script], cwd=tmp_path, env=_env(), clock=SystemClock())
    assert res.exit_code == 4
    assert res.stdout_tail == "bye\n"
    assert wait_dead(int(pidfile.read_text()))


@pytest.mark.anyio
async def test_ten_megabytes_of_output_keep_only_a_bounded_tail(tmp_path: Path) -> None:
    lines = 1_200_000  # 9 bytes each: ~10.3 MB on stdout
    script = (
        "import sys\n"
        f"w = sys.stdout.buffer.write\n"
        f"for start in range(0, {lines}, 10000):\n"
        f"    w(b''.join(b'%08d\\n' % i for i in range(start, min(start + 10000, {lines}))))\n"
        "sys.stderr.buffer.write(b'e' * 3_000_000 + b'ERR-END')\n"
    )
    limit = 4096
    res = await run_process(
        [PY, "-c", script], cwd=tmp_path, env=_env(), clock=SystemClock(), output_limit=limit, timeout=120
    )
    assert res.exit_code == 0
    expected = b"".join(b"%08d\n" % i for i in range(lines))
    assert res.stdout_bytes == len(expected) == 9 * lines
    assert res.stdout_tail == expected[-limit:].decode()
    assert res.stderr_bytes == 3_000_000 + len("ERR-END")
    assert len(res.stderr_tail) == limit
    assert res.stderr_tail.endswith("eeeERR-END")


@pytest.mark.anyio
async def test_tail_cut_inside_a_utf8_character_is_not_mangled(tmp_path: Path) -> None:
    # "é" is 2 bytes; a 51-byte tail would start in the middle of one.
    res = await run_process(
        [PY, "-c", "import sys; sys.stdout.buffer.write('é'.encode() * 100)"],
        cwd=tmp_path,
        env=_env(),
        clock=SystemClock(),
        output_limit=51,
    )
    assert res.stdout_bytes == 200
    assert res.stdout_tail == "é" * 25


@pytest.mark.anyio
async def test_env_marker_finds_the_running_child(tmp_path: Path) -> None:
    marker = ("POLPO_TEST_MARKER", f"attempt-{os.getpid()}-{time.time_ns()}")
    pids: list[int] = []
    scope = anyio.CancelScope()

    async def runner() -> None:
        with scope:
            await run_process(
                ["sleep", "60"],
                cwd=tmp_path,
                env=_env(**{marker[0]: marker[1]}),
                clock=SystemClock(),
                grace=1,
            )

    async with anyio.create_task_group() as tg:
        tg.start_soon(runner)
        with anyio.fail_after(20):
            while not pids:
                pids = find_processes_with_env(*marker)
                await anyio.sleep(0.02)
        ticks = process_start_ticks(pids[0])
        assert ticks is not None
        assert process_start_ticks(pids[0]) == ticks
        assert find_processes_with_env(marker[0], marker[1] + "-other") == []
        scope.cancel()

    assert len(pids) == 1
    assert wait_dead(pids[0])
    assert find_processes_with_env(*marker) == []


def test_process_start_ticks_of_self_and_of_a_missing_pid() -> None:
    assert isinstance(process_start_ticks(os.getpid()), int)
    p = subprocess.Popen(["true"])
    p.wait()
    assert process_start_ticks(p.pid) is None


def test_kill_group_refuses_dangerous_targets_and_missing_groups() -> None:
    assert kill_group(0, signal.SIGTERM) is False
    assert kill_group(1, signal.SIGTERM) is False
    assert kill_group(os.getpgrp(), 0) is False
    p = subprocess.Popen(["true"], start_new_session=True)
    p.wait()
    assert kill_group(p.pid) is False


@pytest.mark.anyio
async def test_terminate_group_terms_then_kills(tmp_path: Path) -> None:
    ready = tmp_path / "ready"
    polite = await anyio.open_process(["sleep", "60"], start_new_session=True)
    stubborn = await anyio.open_process(
        ["bash", "-c", f"trap '' TERM; sleep 60 & echo $! > {ready}; wait; wait"], start_new_session=True
    )
    try:
        await _wait_for_file(ready)  # the trap is in place
        await terminate_group(polite.pid, grace=5)
        await terminate_group(stubborn.pid, grace=0.3)
        with anyio.fail_after(20):
            assert await polite.wait() == -signal.SIGTERM
            assert await stubborn.wait() == -signal.SIGKILL
        assert wait_dead(int(await _wait_for_file(ready)))
    finally:
        for p in (polite, stubborn):
            if p.returncode is None:
                p.kill()
            await p.aclose()


def test_minimal_env_has_no_secrets(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-secret")
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-secret")
    monkeypatch.setenv("PATH", "/usr/bin:/bin")
    env = minimal_env({"EXTRA": "1"})
    assert "OPENAI_API_KEY" not in env
    assert "ANTHROPIC_API_KEY" not in env
    assert env["PATH"] == "/usr/bin:/bin"
    assert env["EXTRA"] == "1"
    assert set(env) <= {*MINIMAL_ENV_KEYS, "EXTRA"}
    assert "EXTRA" not in minimal_env()
