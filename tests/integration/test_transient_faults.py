"""Faults of the environment that pass by themselves are waited out on every path, never made permanent.

Real daemon processes, real faults: a read-only bind mount of the state folder or of the worktrees folder, a
tiny tmpfs filled up under the workspaces folder or under ``events.jsonl``, and a daemon whose file-descriptor
limit is lowered under it (``prlimit``). Each test checks, from evidence the daemon does not write (the agent's
own ``O_APPEND`` marker file, the store read directly), that the mission ran exactly once after the fault
cleared, that nothing was rejected or failed for it, and that the pause and its end are events.
"""

from __future__ import annotations

import errno
import os
import resource
import signal
import sqlite3
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest

from polpo.agents.command import outcomes_dir
from polpo.config import Config
from polpo.engine.workspace_faults import WorkspaceFaults
from tests.support.daemon import (
    daemon_process,
    load,
    mission_json,
    read_events,
    shell_task,
    submit,
    wait_events,
    write_config,
)
from tests.support.mounts import Mounts, mounts


@pytest.fixture
def mnt(tmp_path: Path) -> Iterator[Mounts]:
    with mounts(tmp_path) as m:
        yield m


def _config(cfg: Config) -> Path:
    assert cfg.source is not None
    return cfg.source


def _named(evs: list[dict[str, Any]], name: str, **data: Any) -> list[dict[str, Any]]:
    return [e for e in evs if e["event"] == name and all(e["data"].get(k) == v for k, v in data.items())]


FAULT_HELD = 4.0
"""Seconds a fault is held after it was seen: longer than the first two tries' backoff (at most 1 s, then 2 s)."""


def _has(name: str, **data: Any) -> Any:
    return lambda evs: bool(_named(evs, name, **data))


def _started(proc: subprocess.Popen[str], state: Path) -> None:
    try:
        wait_events(state, _has("orchestrator:started"))
    except AssertionError:
        proc.terminate()
        raise AssertionError(f"the daemon did not start: {proc.communicate(timeout=15)[1][-3000:]}") from None


def _ready(proc: subprocess.Popen[str], state: Path) -> None:
    """Started, and every part of it running: a fault of the whole process (no file descriptor left) must not
    meet its start-up, which may end on it (and its service manager starts it again)."""
    _started(proc, state)
    _stderr_until(proc, "polpo: watching")


def _marker_task(marker: Path, title: str = "mark") -> dict[str, Any]:
    """A task whose only effect is one line appended (O_APPEND, by the shell's >>) to a file outside polpo's."""
    return shell_task(title, f'echo "$POLPO_TASK_ID" >> "{marker}"')


def _runs(marker: Path) -> list[str]:
    return marker.read_text().splitlines() if marker.exists() else []


def _sources(db: Path) -> list[tuple[str, str]]:
    con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        return [(str(p), str(o)) for p, o in con.execute("SELECT path, outcome FROM sources")]
    finally:
        con.close()


def _stored_events(db: Path) -> list[tuple[int, str]]:
    con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        return [(int(s), str(e)) for s, e in con.execute("SELECT seq, event FROM events ORDER BY seq")]
    finally:
        con.close()


def _ran_once_after_the_fault(state: Path, db: Path, marker: Path, mission: str) -> list[dict[str, Any]]:
    evs = wait_events(state, lambda evs: any(e["event"] == "mission:completed" and e.get("missionId") == mission
                                             for e in evs))
    done = [e for e in evs if e["event"] == "mission:completed" and e.get("missionId") == mission]
    assert done[0]["data"]["outcome"] == "completed", done
    assert _runs(marker) == [f"{mission}:1"]  # the task ran, once
    assert not _named(evs, "mission:rejected")
    assert not [e for e in evs if e["event"] == "task:transition" and e["data"].get("to") == "failed"]
    assert {p: o for p, o in _sources(db)}[str(state.parent / "missions" / f"{mission}.json")] == "accepted"  # not rejected
    return evs


def test_a_mission_dropped_while_the_state_folder_is_read_only_runs_once_it_is_writable(
        tmp_path: Path, mnt: Mounts) -> None:
    cfg = load(write_config(tmp_path))
    marker = tmp_path / "ran.log"
    with daemon_process(_config(cfg)) as proc:
        _started(proc, cfg.state_dir)
        mnt.read_only(cfg.state_dir)
        submit(cfg, "job.json", mission_json(_marker_task(marker)))
        evs = wait_events(cfg.state_dir, _has("fault:paused", work="intake"))
        paused = _named(evs, "fault:paused", work="intake")[0]
        assert "EROFS" in paused["data"]["error"] and paused["data"]["path"].endswith("job.json")
        assert not _named(evs, "mission:rejected") and not _named(evs, "mission:accepted")
        assert _runs(marker) == []
        mnt.writable(cfg.state_dir)
        evs = _ran_once_after_the_fault(cfg.state_dir, cfg.db_path, marker, "job")
        # the pause ends when the watch is live again (the file may be read before, by a scan of the folder)
        wait_events(cfg.state_dir, _has("fault:resumed", work="intake"))
        assert proc.poll() is None
        assert len(_named(evs, "fault:paused")) == 1  # one pause, said once however many tries it took


def test_a_full_workspaces_disk_holds_the_mission_until_space_is_freed(tmp_path: Path, mnt: Mounts) -> None:
    cfg = load(write_config(tmp_path))
    marker = tmp_path / "ran.log"
    workspaces = cfg.state_dir / "workspaces"
    mnt.tmpfs(workspaces, size_kb=64, inodes=16)
    with daemon_process(_config(cfg)) as proc:
        _started(proc, cfg.state_dir)
        filler = mnt.fill(workspaces)
        submit(cfg, "job.json", mission_json(_marker_task(marker)))
        evs = wait_events(cfg.state_dir, _has("fault:paused", work="intake"))
        assert "ENOSPC" in _named(evs, "fault:paused")[0]["data"]["error"]
        assert _runs(marker) == [] and not _named(evs, "mission:rejected")
        mnt.free(filler)
        evs = _ran_once_after_the_fault(cfg.state_dir, cfg.db_path, marker, "job")
        # the pause ends when the watch is live again (the file may be read before, by a scan of the folder)
        wait_events(cfg.state_dir, _has("fault:resumed", work="intake"))
        assert proc.poll() is None


def test_an_agent_failed_by_its_full_workspace_waits_for_space_and_runs_again_without_a_retry(
        tmp_path: Path, mnt: Mounts) -> None:
    """The agent's own write fails with ENOSPC (its output says so, as any program's could); the workspace's file
    system, asked right after, refuses a new file too: the attempt is interrupted, not failed, and the task runs
    again once space is freed — no retry or fix used, the task done."""
    cfg = load(write_config(tmp_path))
    marker, go = tmp_path / "ran.log", tmp_path / "go"
    workspaces = cfg.state_dir / "workspaces"
    mnt.tmpfs(workspaces, size_kb=64, inodes=16)
    script = f'echo "$POLPO_TASK_ID" >> "{marker}"; while [ ! -f "{go}" ]; do sleep 0.05; done; echo data > out.txt'
    with daemon_process(_config(cfg)) as proc:
        _started(proc, cfg.state_dir)
        submit(cfg, "job.json", mission_json(shell_task("write", script, expectations=[
            {"type": "file_exists", "path": "out.txt"}])))
        wait_events(cfg.state_dir, _has("agent:spawned"))
        filler = mnt.fill(workspaces)
        go.touch()
        evs = wait_events(cfg.state_dir, _has("fault:paused", work="task agent"))
        assert "ENOSPC" in _named(evs, "fault:paused", work="task agent")[0]["data"]["error"]
        interrupted = _named(evs, "task:transition", to="pending", trigger="interrupted")
        assert interrupted and "refused writes" in interrupted[0]["data"]["reason"]
        mnt.free(filler)
        evs = wait_events(cfg.state_dir, _has("mission:completed"))
    assert _named(evs, "mission:completed")[0]["data"]["outcome"] == "completed"
    assert _named(evs, "fault:resumed", work="task agent")
    assert _runs(marker) == ["job:1", "job:1"]  # it ran again after the space came back
    assert not [e for e in evs if e["event"] in ("task:retry", "task:fix", "task:max-retries")]


def test_the_workspace_probe_blames_a_full_or_read_only_file_system_and_never_one_with_room(
        tmp_path: Path, mnt: Mounts) -> None:
    """What tells a full disk from an agent's own bug: the file system's answer after the failure, not the agent's
    output. With room the failure is the agent's (it spends a retry as before), full it is ENOSPC, read-only
    EROFS, freed it is the agent's again; the probe leaves nothing in the workspace."""
    ws = tmp_path / "ws"
    mnt.tmpfs(ws, size_kb=256, inodes=64)
    blamed = WorkspaceFaults.blamed
    assert anyio.run(blamed, ws) is None
    filler = mnt.fill(ws)
    assert anyio.run(blamed, ws) == errno.ENOSPC
    mnt.free(filler)
    assert anyio.run(blamed, ws) is None
    mnt.read_only(ws)
    assert anyio.run(blamed, ws) == errno.EROFS
    mnt.writable(ws)
    assert anyio.run(blamed, ws) is None
    assert anyio.run(blamed, ws / "gone") is None  # a workspace that is not there: not the disk's fault
    assert list(ws.iterdir()) == []


def test_an_event_log_on_a_full_disk_catches_up_with_the_store_without_a_lost_or_doubled_line(
        tmp_path: Path, mnt: Mounts) -> None:
    cfg = load(write_config(tmp_path))
    marker = tmp_path / "ran.log"
    logfs = tmp_path / "logfs"
    mnt.tmpfs(logfs, size_kb=64, inodes=16)
    cfg.state_dir.mkdir(parents=True)
    (cfg.state_dir / "events.jsonl").symlink_to(logfs / "events.jsonl")  # the log alone on the small disk
    with daemon_process(_config(cfg)) as proc:
        _started(proc, cfg.state_dir)
        filler = mnt.fill(logfs)
        tasks = [_marker_task(marker, f"t{i}") for i in range(8)]
        submit(cfg, "job.json", mission_json(*tasks))
        for _ in range(600):  # the store goes on (a bounded wait: 30 s)
            if "mission:completed" in [e for _, e in _stored_events(cfg.db_path)]:
                break
            time.sleep(0.05)
        else:
            raise AssertionError("the mission did not complete in the store")
        logged = read_events(cfg.state_dir)
        assert not _named(logged, "mission:completed")  # the disk was full: the log could not have it yet
        assert len(_runs(marker)) == 8
        mnt.free(filler)
        evs = wait_events(cfg.state_dir, _has("fault:resumed", work="event log"))
    stored = _stored_events(cfg.db_path)
    logged_pairs = [(e["seq"], e["event"]) for e in read_events(cfg.state_dir)]
    assert len((cfg.state_dir / "events.jsonl").read_text().splitlines()) == len(logged_pairs)  # no torn line
    assert logged_pairs == stored  # every stored event, once each, in order
    assert [s for s, _ in stored] == list(range(1, len(stored) + 1))  # seq gapless
    assert _named(evs, "fault:paused", work="event log")
    assert "ENOSPC" in _named(evs, "fault:paused", work="event log")[0]["data"]["error"]
    assert sorted(_runs(marker)) == sorted(f"job:{i}" for i in range(1, 9))


def _git(repo: Path, *args: str) -> str:
    env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@t"}
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, text=True,
                          env=env).stdout


def test_a_worktree_that_cannot_be_made_yet_keeps_its_task_waiting_then_it_runs(
        tmp_path: Path, mnt: Mounts) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    _git(repo, "init", "-q", "-b", "main")
    (repo / "README.md").write_text("a repository\n")
    _git(repo, "add", "-A")
    _git(repo, "commit", "-qm", "init")
    cfg = load(write_config(tmp_path, extra=f'[security]\nworkspace_roots = ["{repo}"]\n'))
    marker = tmp_path / "ran.log"
    worktrees = cfg.state_dir / "worktrees"
    worktrees.mkdir(parents=True)
    with daemon_process(_config(cfg)) as proc:
        _started(proc, cfg.state_dir)
        mnt.read_only(worktrees)
        submit(cfg, "job.json", mission_json(_marker_task(marker), workspace=str(repo),
                                             settings={"isolation": "worktree"}))
        evs = wait_events(cfg.state_dir, _has("fault:paused", work="task workspace"))
        paused = _named(evs, "fault:paused", work="task workspace")[0]
        assert paused["taskId"] == "job:1" and "EROFS" in paused["data"]["error"]
        assert _named(evs, "mission:accepted")  # admitted: only the task waits
        assert not [e for e in evs if e["event"] == "task:transition" and e.get("taskId") == "job:1"]  # pending
        assert _runs(marker) == []
        mnt.writable(worktrees)
        evs = _ran_once_after_the_fault(cfg.state_dir, cfg.db_path, marker, "job")
        assert _named(evs, "fault:resumed", work="task workspace")
        assert _named(evs, "task:worktree")  # it did run in its own worktree
        assert _named(evs, "task:merged")


def test_a_daemon_out_of_file_descriptors_reads_the_mission_once_it_has_some_again(tmp_path: Path) -> None:
    cfg = load(write_config(tmp_path))
    marker = tmp_path / "ran.log"
    with daemon_process(_config(cfg)) as proc:
        _ready(proc, cfg.state_dir)
        submit(cfg, "warm.json", mission_json(shell_task("w", "true")))  # the watch is live, its scan done
        wait_events(cfg.state_dir, lambda evs: any(e["event"] == "mission:completed" for e in evs))
        used = {int(n) for n in os.listdir(f"/proc/{proc.pid}/fd")}
        lowest_free = next(n for n in range(len(used) + 1) if n not in used)
        before = resource.prlimit(proc.pid, resource.RLIMIT_NOFILE)
        resource.prlimit(proc.pid, resource.RLIMIT_NOFILE, (lowest_free, before[1]))  # no new descriptor at all
        try:
            submit(cfg, "job.json", mission_json(_marker_task(marker)))
            evs = wait_events(cfg.state_dir, _has("fault:paused", work="intake"))
            paused = _named(evs, "fault:paused", work="intake")[0]
            # the file's read, or the folder's scan when the watcher needed a descriptor first (it races the read)
            assert "EMFILE" in paused["data"]["error"]
            assert paused["data"]["path"] in (str(cfg.missions_dir / "job.json"), str(cfg.missions_dir))
            assert not _named(evs, "mission:rejected") and _runs(marker) == []
            time.sleep(FAULT_HELD)  # past the first tries: a read of the folder at a try fails too, and is retried
            assert proc.poll() is None and _runs(marker) == []
        finally:
            resource.prlimit(proc.pid, resource.RLIMIT_NOFILE, before)
        evs = _ran_once_after_the_fault(cfg.state_dir, cfg.db_path, marker, "job")
        # the pause ends when the watch is live again (the file may be read before, by a scan of the folder)
        wait_events(cfg.state_dir, _has("fault:resumed", work="intake"))
        assert proc.poll() is None


def _stderr_until(proc: subprocess.Popen[str], text: str, timeout: float = 20) -> str:
    """The daemon's stderr read (without blocking) until ``text`` appears (a bounded harness wait)."""
    assert proc.stderr is not None
    fd = proc.stderr.fileno()
    os.set_blocking(fd, False)
    seen = b""
    deadline = time.monotonic() + timeout
    while text.encode() not in seen:
        if time.monotonic() > deadline or proc.poll() is not None:
            raise AssertionError(f"{text!r} not in the daemon's stderr: {seen.decode(errors='replace')[-2000:]}")
        try:
            seen += os.read(fd, 65536)
        except BlockingIOError:
            time.sleep(0.05)
    return seen.decode(errors="replace")


def test_a_log_reopen_that_fails_for_lack_of_descriptors_does_not_end_the_daemon(tmp_path: Path) -> None:
    cfg = load(write_config(tmp_path))
    marker = tmp_path / "ran.log"
    with daemon_process(_config(cfg)) as proc:
        _ready(proc, cfg.state_dir)
        before = resource.prlimit(proc.pid, resource.RLIMIT_NOFILE)
        resource.prlimit(proc.pid, resource.RLIMIT_NOFILE, (3, before[1]))  # fds 0-2 are open: no new one
        try:
            proc.send_signal(signal.SIGHUP)  # logrotate's "reopen events.jsonl"
            _stderr_until(proc, "could not reopen")
        finally:
            resource.prlimit(proc.pid, resource.RLIMIT_NOFILE, before)
        submit(cfg, "job.json", mission_json(_marker_task(marker)))
        _ran_once_after_the_fault(cfg.state_dir, cfg.db_path, marker, "job")
        assert proc.poll() is None


@pytest.mark.parametrize("made", [False, True], ids=["not-made-yet", "made"])
def test_a_read_only_state_folder_gives_an_agent_a_temporary_outcomes_folder(tmp_path: Path, mnt: Mounts,
                                                                             made: bool) -> None:
    """A command agent's ``$POLPO_OUTCOMES`` folder lives in the state folder; read-only (a passing fault), the agent
    gets one of the process's own in the temp folder instead of failing its task (a nemesis seed found the folder
    not made yet failing the task: its making raised inside the handler of the missing folder)."""
    state = tmp_path / "state"
    state.mkdir()
    if made:
        (state / "outcomes").mkdir()
    mnt.read_only(state)
    got = outcomes_dir(str(state / "outcomes"))
    assert Path(got).is_dir() and not Path(got).is_relative_to(state)
    assert (state / "outcomes").exists() == made
