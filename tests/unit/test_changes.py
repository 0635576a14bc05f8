"""polpo.changes on real folders and real git repositories: what an attempt changed, and when it is attributed."""

from __future__ import annotations

import contextlib
import errno
import os
import resource
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from polpo.changes.patterns import ignored
from polpo.changes.tracker import SHARED_NOTE, ChangeTracker, ToolLog, files_count

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def _git(repo: Path, *args: str) -> str:
    env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@t"}
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, text=True,
                          env=env).stdout


def _write(path: Path, text: str = "x") -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    r = tmp_path / "repo"
    r.mkdir()
    _git(r, "init", "-q")
    _write(r / ".gitignore", "build/\n*.log\n")
    _write(r / "src" / "keep.py", "keep\n")
    _write(r / "src" / "same.py", "same\n")
    _write(r / "old" / "a.txt", "a\n")
    _write(r / "gone.txt", "bye\n")
    _git(r, "add", "-A")
    _git(r, "commit", "-qm", "init")
    return r


@pytest.fixture(params=[True, False], ids=["watch", "fallback"])
def tracker(request: pytest.FixtureRequest) -> ChangeTracker:
    return ChangeTracker(use_watch=request.param)


async def _attempt(tracker: ChangeTracker, root: Path, act, key: str = "t:1", **kw):  # type: ignore[no-untyped-def]
    with tracker.activity(root, key):
        t = await tracker.open(root, key, **kw)
        act()
        return await tracker.close(t)


async def test_a_repository_attempt_reports_what_git_sees_of_its_changes(repo: Path, tracker: ChangeTracker) -> None:
    def act() -> None:
        _write(repo / "src" / "keep.py", "changed\n")
        (repo / "src" / "same.py").write_text("same\n")  # rewritten, same content: not a change
        _write(repo / "new" / "deep" / "n.py", "n\n")  # a new folder with a file written at once
        (repo / "gone.txt").unlink()
        _write(repo / "build" / "out.bin", "ignored by git\n")
        _write(repo / "debug.log", "ignored too\n")
        _write(repo / "node_modules" / "x" / "i.js", "never looked at\n")
        _write(repo / ".aider.chat.history.md", "aider's own\n")

    files = await _attempt(tracker, repo, act, ignore=[".aider*"])
    assert files["created"] == ["new/deep/n.py"]
    assert files["modified"] == ["src/keep.py"]
    assert files["deleted"] == ["gone.txt"]
    assert files["attributed"] is True
    assert files["tracking"] == ("watch" if tracker.use_watch else "git")


async def test_a_folder_moved_away_in_a_repository_names_its_files(repo: Path, tracker: ChangeTracker) -> None:
    files = await _attempt(tracker, repo, lambda: shutil.move(repo / "old", repo / "renamed"))
    assert files["deleted"] == ["old/a.txt"]
    assert files["created"] == ["renamed/a.txt"]


async def test_a_plain_folder_skips_dependencies_virtualenvs_and_agent_files(tmp_path: Path,
                                                                             tracker: ChangeTracker) -> None:
    ws = tmp_path / "ws"
    _write(ws / "app.js", "1")
    _write(ws / "old.js", "1")
    _write(ws / "node_modules" / "lib" / "index.js", "1")
    _write(ws / "env" / "pyvenv.cfg", "home = /usr\n")

    def act() -> None:
        _write(ws / "app.js", "2")
        _write(ws / "lib" / "new.js", "n")
        (ws / "old.js").unlink()
        _write(ws / "node_modules" / "lib" / "index.js", "2")
        _write(ws / "env" / "lib" / "site.py", "x")
        _write(ws / ".aider.tags.cache.v4" / "cache.db", "x")
        _write(ws / "tmp.txt", "t")
        (ws / "tmp.txt").unlink()  # created and deleted within the attempt: nothing

    files = await _attempt(tracker, ws, act, ignore=[".aider*"])
    assert (files["created"], files["modified"], files["deleted"]) == (["lib/new.js"], ["app.js"], ["old.js"])
    assert files["tracking"] == ("watch" if tracker.use_watch else "scan")


async def test_an_excluded_folder_is_never_reported(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    state = ws / "state"
    state.mkdir(parents=True)
    for use_watch in (True, False):
        tracker = ChangeTracker(exclude=(state,), use_watch=use_watch)
        files = await _attempt(tracker, ws, lambda: (_write(state / "polpo.db", "x"), _write(ws / "a.txt")))
        assert files["created"] == ["a.txt"], use_watch
        (ws / "a.txt").unlink()


async def test_changes_between_attempts_belong_to_neither(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    tracker = ChangeTracker()
    first = await _attempt(tracker, ws, lambda: _write(ws / "one.txt"))
    _write(ws / "by-hand" / "between.txt")  # a user (or a check) writes between two attempts
    second = await _attempt(tracker, ws, lambda: _write(ws / "by-hand" / "two.txt"), key="t:2")
    assert first["created"] == ["one.txt"]
    assert second["created"] == ["by-hand/two.txt"]
    assert list(tracker.watches) == [os.fspath(ws)]  # one watch, reused


async def test_overlapping_tasks_in_one_workspace_are_not_attributed(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    tracker = ChangeTracker()
    with tracker.activity(ws, "m:1"):
        a = await tracker.open(ws, "m:1")
        _write(ws / "a.txt")
        with tracker.activity(ws, "m:2"):  # task 2 starts while task 1's agent runs
            b = await tracker.open(ws, "m:2")
            _write(ws / "b.txt")
            fb = await tracker.close(b)
        fa = await tracker.close(a, tool_log=None)
    for files, other in ((fa, "m:2"), (fb, "m:1")):
        assert (files["created"], files["attributed"]) == ([], False)
        assert files["note"] == f"{SHARED_NOTE} (task {other} ran in it meanwhile)"
        assert files_count(files) == 0


async def test_a_check_of_another_task_also_makes_the_window_uncertain(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    tracker = ChangeTracker()
    with tracker.activity(ws, "m:1"):
        a = await tracker.open(ws, "m:1")
        with tracker.activity(ws / "sub", "m:2"):  # a nested workspace counts too
            pass
        fa = await tracker.close(a)
    assert fa["attributed"] is False


async def test_an_llm_agents_tool_log_is_certain_in_a_shared_workspace(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    tracker = ChangeTracker()
    with tracker.activity(ws, "m:2"), tracker.activity(ws, "m:1"):
        a = await tracker.open(ws, "m:1")
        _write(ws / "mine.py")
        _write(ws / "theirs.py")
        complete = await tracker.close(a, tool_log=ToolLog(("mine.py",), (), complete=True))
        b = await tracker.open(ws, "m:1")
        partial = await tracker.close(b, tool_log=ToolLog((), ("mine.py",), complete=False))
    assert complete == {"created": ["mine.py"], "modified": [], "deleted": [], "attributed": True,
                        "tracking": "tool-log"}
    assert (partial["modified"], partial["attributed"]) == (["mine.py"], False)
    assert partial["note"].endswith("only the agent's own file-tool writes are attributed")


async def test_a_deleted_workspace_loses_the_window(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    tracker = ChangeTracker()
    files = await _attempt(tracker, ws, lambda: shutil.rmtree(ws))
    assert files["attributed"] is False and "deleted or moved" in files["note"]


async def test_an_unattended_window_is_dropped_when_the_activity_ends(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    tracker = ChangeTracker()
    with tracker.activity(ws, "m:1"):
        await tracker.open(ws, "m:1")  # the attempt was cancelled before closing it
    assert not tracker.open_trackings and not tracker.watches[os.fspath(ws)].windows


def test_ignore_patterns() -> None:
    assert ignored(".aider.chat.history.md", [".aider*"])
    assert ignored("sub/.aider.tags.cache.v4/cache.db", [".aider*"])
    assert not ignored("src/aider.py", [".aider*"])
    assert ignored("out/report.tmp", ["out/*.tmp"]) and not ignored("src/out/report.tmp", ["out/*.tmp"])
    assert ignored("gen/a/b.py", ["gen/a"])
    assert not ignored("x.py", [])


async def test_a_workspace_that_does_not_exist_yet_is_scanned_instead(tmp_path: Path) -> None:
    ws = tmp_path / "later"
    tracker = ChangeTracker()
    files = await _attempt(tracker, ws, lambda: _write(ws / "made.txt"))
    assert (files["created"], files["tracking"]) == (["made.txt"], "scan")
    assert not tracker.unwatchable  # watched from the next attempt on
    files = await _attempt(tracker, ws, lambda: _write(ws / "next.txt"))
    assert (files["created"], files["tracking"]) == (["next.txt"], "watch")


def test_an_idle_watch_opens_and_closes_windows_without_a_thread_and_a_busy_one_refuses(tmp_path: Path) -> None:
    from polpo.changes.watch import TreeWatch

    watch = TreeWatch(os.fspath(tmp_path), lambda rel, path: False)
    try:
        watch.start()
        w = watch.open_at_once()
        assert w is not None and w in watch.windows  # nothing queued: opened on the spot
        _write(tmp_path / "made.txt")
        assert watch.close_at_once(w) is None  # events queued: draining them is a worker thread's job
        assert watch.ino.pending() > 0
        assert watch.close_window(w) is w and w.paths == {"made.txt": False}
        assert watch.open_at_once() is not None  # drained: quick again
        with watch.lock:  # another thread in the watch
            assert watch.open_at_once() is None
    finally:
        watch.close()


async def test_watches_stay_few_when_every_run_has_a_workspace_of_its_own(tmp_path: Path) -> None:
    """A schedule firing every second makes a workspace a second: each watch is an inotify instance (128 per user
    by default), so a finished mission's goes and no more than IDLE_WATCHES unused ones are kept (issue 31)."""
    from polpo.changes.tracker import IDLE_WATCHES

    tracker = ChangeTracker()
    roots = [tmp_path / f"run-{i}" for i in range(IDLE_WATCHES + 5)]
    for i, root in enumerate(roots):
        root.mkdir()
        await _attempt(tracker, root, lambda r=root: _write(r / "out.txt"), key=f"r{i}:1")
    assert len(tracker.watches) == IDLE_WATCHES + 1  # (the newest one in use, when it was opened)
    assert os.fspath(roots[0]) not in tracker.watches and len(tracker._locks) <= IDLE_WATCHES + 1
    tracker.release(roots[-1])  # its mission finished
    assert os.fspath(roots[-1]) not in tracker.watches
    busy = tmp_path / "shared"
    busy.mkdir()
    with tracker.activity(busy, "s:1"):
        t = await tracker.open(busy, "s:1")
        tracker.release(busy)  # another mission in the same folder finished: its window stays open
        assert os.fspath(busy) in tracker.watches
        await tracker.close(t)


@contextlib.contextmanager
def _no_new_descriptors() -> Iterator[None]:
    """This process may open no more file descriptors (RLIMIT_NOFILE at the lowest free one): a new inotify
    instance fails with EMFILE, as it does when the per-user limit of instances is reached."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    lowest = os.dup(0)
    os.close(lowest)
    resource.setrlimit(resource.RLIMIT_NOFILE, (lowest, hard))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


async def test_a_finished_missions_folder_leaves_nothing_in_the_tracker(tmp_path: Path) -> None:
    """Issue 31: nothing per workspace outlives its mission — no lock for a folder that did not exist yet, and
    a folder that could not be watched is forgotten when its mission finishes, or a minute later at most."""
    from polpo.changes.tracker import RETRY_WATCH

    now = [1000.0]
    tracker = ChangeTracker(monotonic=lambda: now[0])
    later = tmp_path / "later"  # made by the task itself: scanned, not watched
    files = await _attempt(tracker, later, lambda: _write(later / "made.txt"))
    assert files["tracking"] == "scan" and not tracker._locks and not tracker.watches
    roots = [tmp_path / f"run-{i}" for i in range(3)]
    for i, root in enumerate(roots):
        root.mkdir()
        with tracker.activity(root, f"r{i}:1"):
            with _no_new_descriptors():
                t = await tracker.open(root, f"r{i}:1")
            _write(root / "out.txt")
            files = await tracker.close(t)
        assert (files["created"], files["tracking"]) == (["out.txt"], "scan")
    assert list(tracker.unwatchable) == [os.fspath(r) for r in roots] and not tracker._locks
    assert os.strerror(errno.EMFILE) in tracker.unwatchable[os.fspath(roots[0])][0]  # no instance left
    tracker.release(roots[0])  # its mission finished
    assert os.fspath(roots[0]) not in tracker.unwatchable
    now[0] += RETRY_WATCH + 1  # the others' missions never finish here: a minute on, the next failure drops them
    fresh = tmp_path / "fresh"
    fresh.mkdir()
    with tracker.activity(fresh, "f:1"):
        with _no_new_descriptors():
            t = await tracker.open(fresh, "f:1")
        await tracker.close(t)
    assert list(tracker.unwatchable) == [os.fspath(fresh)]
    files = await _attempt(tracker, roots[1], lambda: _write(roots[1] / "again.txt"), key="r1:2")
    assert (files["created"], files["tracking"]) == (["again.txt"], "watch")  # watched again once inotify is back
    tracker.release(roots[1])
    assert not tracker.watches and not tracker._locks


def test_an_inotify_instance_is_closed_by_the_closer_thread_not_the_caller(tmp_path: Path) -> None:
    """Closing an instance that held a watch waits for the kernel's grace period (8 ms median here): a finished
    mission's watch closed on the event loop stalled the daemon that long. The closer thread does it instead."""
    import threading
    import time

    from polpo.changes.inotify import CLOSER_THREAD, Inotify

    ino = Inotify()
    assert ino.add(os.fspath(tmp_path)) is not None
    link = Path(f"/proc/self/fd/{ino.fd}")
    assert "inotify" in os.readlink(link)
    ino.close()
    assert ino.fd == -1
    assert any(t.name == CLOSER_THREAD and t.daemon for t in threading.enumerate())
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:  # closed soon (the number may already name another file)
        try:
            if "inotify" not in os.readlink(link):
                break
        except FileNotFoundError:
            break
        time.sleep(0.01)
    else:
        pytest.fail("the inotify descriptor was never closed")
    ino.close()  # a second close does nothing
