"""The guard process (polpo.tools.guard) with real processes: it kills the process groups it holds when the
daemon's beat stops for its deadline, or when the daemon's pipe closes; a group it was told has ended is never
killed; and a program started when the node may no longer act is killed at once by run_process."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

import anyio
import pytest

from polpo.clock import SystemClock
from polpo.tools import procs
from polpo.tools.guard import MARK, Held
from polpo.tools.guard_link import LOSSES, GuardLink
from polpo.tools.marks import ATTEMPT_MARK, attempt_env, daemon_mark
from polpo.tools.proctable import process_start_ticks

pytestmark = pytest.mark.anyio


def sleeper() -> subprocess.Popen[bytes]:
    return subprocess.Popen(["sleep", "60"], start_new_session=True)


def gone_within(p: subprocess.Popen[bytes], seconds: float) -> bool:
    """Bounded wait for a process to end (reaped here: it is our child)."""
    try:
        p.wait(timeout=seconds)
    except subprocess.TimeoutExpired:
        return False
    return True


def test_the_guard_kills_its_groups_when_the_beat_stops_and_spares_ended_ones() -> None:
    link = GuardLink(0.5)
    link.start()
    held, released = sleeper(), sleeper()
    try:
        for p in (held, released):
            assert link.started(p.pid)
        link.ended(released.pid)
        for _ in range(5):  # beating: nothing happens
            link.beat()
            time.sleep(0.1)
        assert held.poll() is None
        assert gone_within(held, 10)  # no beat any more: killed once the deadline passed
        assert held.returncode == -signal.SIGKILL
        assert released.poll() is None  # it was dropped: never killed
        assert len(link.guards) == 2 and all(g.proc.poll() is None for g in link.guards)  # they go on guarding
    finally:
        released.kill()
        released.wait()
        link.close()


def test_the_guard_kills_its_groups_when_the_daemon_is_gone() -> None:
    link = GuardLink(60)
    link.start()
    p = sleeper()
    try:
        link.started(p.pid)
        link.beat()
        guards, link.guards = link.guards, []
        for g in guards:
            assert g.proc.stdin is not None
            g.proc.stdin.close()  # what the daemon's death does to the pipes
        assert gone_within(p, 10)
        assert [g.proc.wait(timeout=10) for g in guards] == [0, 0]
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()


async def test_a_program_started_when_the_node_may_no_longer_act_is_killed_at_once(tmp_path: Path) -> None:
    link = GuardLink(60, may_start=lambda: False)
    procs.WATCH.append(link)  # (not started: the link's own check is what is tested here)
    try:
        result = await procs.run_process(["sleep", "30"], cwd=tmp_path, env=procs.minimal_env(), clock=SystemClock(),
                                         timeout=20)
    finally:
        procs.WATCH.remove(link)
    assert result.signal == signal.SIGKILL and result.exit_code is None


async def test_a_guard_that_dies_is_replaced_holding_the_same_groups_and_its_daemon_death_still_kills() -> None:
    link = GuardLink(60)
    link.start()
    p = sleeper()
    try:
        link.started(p.pid)
        first, other = link.guards
        first.proc.kill()
        with anyio.fail_after(10):  # its pidfd is heard in the event loop: replaced at once
            while first in link.guards or len(link.guards) < 2:
                await anyio.sleep(0.01)
        assert link.losses and link.lost is None
        assert p.poll() is None  # the agent goes on under the new pair
        other.proc.kill()  # the old one too: only the new guard is left…
        with anyio.fail_after(10):
            while other in link.guards or len(link.guards) < 2:
                await anyio.sleep(0.01)
        newest = link.guards[-1]
        link.guards.remove(newest)
        newest.retire()  # …then that one goes, and the daemon dies before it can replace it
        [last] = link.guards
        assert last.proc.stdin is not None and p.poll() is None
        last.proc.stdin.close()  # the daemon's death, as the guard it started in place of the first sees it
        assert gone_within(p, 10)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
        link.close()


async def test_a_node_that_cannot_keep_a_guard_is_told_why() -> None:
    lost: list[str] = []
    link = GuardLink(60, on_lost=lost.append, program=[sys.executable, "-c", "import sys; sys.exit(3)"])
    link.start()
    try:
        with anyio.fail_after(20):
            while not lost:
                await anyio.sleep(0.02)
    finally:
        link.close()
    assert len(lost) == 1 and "cannot keep a guard" in lost[0] and "exited with code 3" in lost[0]
    assert len(link.losses) == LOSSES
    assert not link.started(123456)  # nothing more may start on this node


def logged_guard(log: Path) -> list[str]:
    """The guard's command with its stderr appended to ``log`` (exec: the pid stays the guard's)."""
    return ["bash", "-c", f'exec "{sys.executable}" -m polpo.tools.guard "$@" 2>>"{log}"', "guard"]


def test_a_paused_daemon_whose_guard_is_killed_has_its_agents_killed_by_the_other(tmp_path: Path) -> None:
    """Nemesis seed 6099: the daemon paused (here: it neither beats nor hears of its guard's end), then a guard
    killed. The other guard of the pair keeps the deadline on its own and kills the agents."""
    log = tmp_path / "guards.log"
    link = GuardLink(1.0, program=logged_guard(log))
    link.start()
    p = sleeper()
    try:
        assert link.started(p.pid)
        first, second = link.guards
        first.proc.kill()
        first.proc.wait()
        assert gone_within(p, 15)
        assert p.returncode == -signal.SIGKILL
        said = log.read_text()
        assert "has not beaten" in said and "killed 1 agent process group" in said, said
        assert second.proc.poll() is None  # the other one did it, and goes on guarding
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
        link.close()


def marked_sleeper(state_dir: Path) -> subprocess.Popen[bytes]:
    """An agent of ``state_dir``'s daemon (its attempt marker in its environment), in a group of its own, with a
    child of its own in that group."""
    env = {"PATH": "/usr/bin:/bin", **attempt_env(state_dir, "m:1/1")}
    return subprocess.Popen(["bash", "-c", "sleep 60 & wait"], start_new_session=True, env=env)


def test_an_agent_started_but_not_yet_told_of_dies_with_its_daemon_by_its_marker(tmp_path: Path) -> None:
    """Nemesis seed 8605: the daemon was killed between starting an agent and telling its guards (+PGID); the
    agent ran on until the next start's recovery. The guards also kill what carries the daemon's marker, and
    spare another daemon's (another state folder) agents."""
    ours, theirs = tmp_path / "state", tmp_path / "other-state"
    link = GuardLink(60, marker=daemon_mark(ours))
    link.start()
    unannounced, other = marked_sleeper(ours), marked_sleeper(theirs)
    try:
        time.sleep(0.3)  # (both have exec'd: their environment is readable)
        guards, link.guards = link.guards, []
        for g in guards:
            assert g.proc.stdin is not None
            g.proc.stdin.close()  # the daemon's death, as its guards see it
        assert gone_within(unannounced, 10) and unannounced.returncode == -signal.SIGKILL
        assert [g.proc.wait(timeout=10) for g in guards] == [0, 0]
        assert other.poll() is None  # another daemon's agent: never touched
    finally:
        for p in (unannounced, other):
            if p.poll() is None:
                p.kill()
                p.wait()


def test_the_guards_marker_is_the_attempts() -> None:
    """The guard does not import polpo.tools.marks (it starts in ~30 ms): its copy of the name must agree."""
    assert f"{ATTEMPT_MARK}=".encode() == MARK


def test_the_guard_reads_a_group_leaders_start_time_itself_and_spares_a_reused_pid() -> None:
    """The daemon sends ``+PGID`` alone (no /proc read on its task path); the guard reads the start time, so a pid
    reused by another process by the time it kills (its start time differs) is spared."""
    ours, reused = sleeper(), sleeper()
    try:
        held = Held()
        held.apply(f"+{ours.pid}\n".encode())
        assert held.groups[ours.pid] == process_start_ticks(ours.pid)
        held.apply(f"+{reused.pid} 1\n".encode())  # what the pid was when the daemon told: another process
        assert held.kill_all() == 1
        assert gone_within(ours, 10) and reused.poll() is None
    finally:
        for p in (ours, reused):
            if p.poll() is None:
                p.kill()
                p.wait()


def recorder(folder: Path) -> list[str]:
    """A guard's command that only records every byte the link writes to it, in ``folder``/its pid."""
    return ["sh", "-c", f'exec cat >> "{folder}/$$"', "recorder"]


def recorded(path: Path, want: str) -> str:
    """The recording once it holds ``want`` (bounded wait: the recorder writes as it reads)."""
    for _ in range(250):
        text = path.read_text() if path.exists() else ""
        if want in text:
            return text
        time.sleep(0.02)
    return path.read_text() if path.exists() else ""


def test_an_ended_group_is_told_with_the_next_line_not_on_its_own(tmp_path: Path) -> None:
    """``-PGID`` costs no write (and no wake-up of two guards) of its own: it goes with the next beat or start,
    and a clean stop's ``!`` carries what is still unsaid."""
    link = GuardLink(60, program=recorder(tmp_path))
    link.start()
    files = [tmp_path / str(g.pid) for g in link.guards]
    try:
        assert link.started(4_000_001)
        assert [recorded(f, "+4000001\n") for f in files] == ["+4000001\n"] * 2
        link.ended(4_000_001)
        time.sleep(0.2)
        assert all("-4000001" not in f.read_text() for f in files)  # not written on its own
        assert link.started(4_000_002)
        assert all(recorded(f, "+4000002\n").endswith("-4000001\n+4000002\n") for f in files)
        link.ended(4_000_002)
    finally:
        link.close()
    assert all(recorded(f, "!\n").endswith("+4000002\n-4000002\n!\n") for f in files)


async def test_the_link_tells_an_ended_group_within_its_check_period_when_nothing_else_is_written(
        tmp_path: Path) -> None:
    link = GuardLink(None, program=recorder(tmp_path))
    link.start()
    files = [tmp_path / str(g.pid) for g in link.guards]
    try:
        link.started(4_000_003)
        link.ended(4_000_003)
        async with anyio.create_task_group() as tg:
            tg.start_soon(link.run)
            with anyio.fail_after(10):
                while not all("-4000003" in (f.read_text() if f.exists() else "") for f in files):
                    await anyio.sleep(0.05)
            tg.cancel_scope.cancel()
        assert [f.read_text() for f in files] == ["+4000003\n-4000003\n"] * 2
    finally:
        link.close()


NO_PID = 4_194_305  # above PID_MAX_LIMIT (2**22): never a real process, so never a real group


def voluntary_switches(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("voluntary_ctxt_switches:"):
            return int(line.split()[1])
    raise AssertionError("no voluntary_ctxt_switches in /proc status")


def test_a_guard_gathers_what_comes_while_it_sleeps_instead_of_waking_for_every_line() -> None:
    """100 lines written 2 ms apart: a guard woken by each would switch ~100 times; one that sleeps
    ``GATHER`` after each read wakes a handful of times (an upper bound, not a timing)."""
    link = GuardLink(None)
    link.start()
    try:
        guard = link.guards[0]
        time.sleep(0.3)  # its start-up is over
        before = voluntary_switches(guard.pid)
        for i in range(100):
            link.started(NO_PID + i)  # no process can have it: the clean stop's kill of held groups finds none
            time.sleep(0.002)
        time.sleep(0.2)
        woken = voluntary_switches(guard.pid) - before
        assert woken < 30, woken
        assert guard.proc.poll() is None
    finally:
        link.close()
