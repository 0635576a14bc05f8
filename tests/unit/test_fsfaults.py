"""Which errors pass by themselves, and the backoff every path waits them out with (polpo/fsfaults.py)."""

from __future__ import annotations

import errno

import pytest

from polpo.clock import FakeClock
from polpo.fsfaults import INPUT_PASSING, PASSING, Pause, errno_in, errno_name, passing
from polpo.store.errors import StoreError
from polpo.vcs.git import GitError, GitResult


@pytest.mark.parametrize("code", [errno.EROFS, errno.ENOSPC, errno.EDQUOT, errno.EMFILE, errno.ENFILE, errno.EACCES])
def test_the_faults_of_the_environment_pass(code: int) -> None:
    assert passing(OSError(code, "x")) == code


@pytest.mark.parametrize("code", [errno.ENOENT, errno.EIO, errno.EINVAL, errno.ENOTDIR, errno.ELOOP])
def test_other_errors_do_not(code: int) -> None:
    assert passing(OSError(code, "x")) is None


def test_reading_a_mission_file_passes_only_a_lack_of_descriptors() -> None:
    assert passing(OSError(errno.EMFILE, "x"), INPUT_PASSING) == errno.EMFILE
    assert passing(OSError(errno.EACCES, "x"), INPUT_PASSING) is None  # the user's file: rejected with why
    assert INPUT_PASSING < PASSING


def test_an_explicit_cause_counts_a_handled_context_does_not() -> None:
    try:
        raise StoreError("wrapped") from OSError(errno.ENOSPC, "full")
    except StoreError as e:
        assert passing(e) == errno.ENOSPC
    try:
        try:
            raise OSError(errno.ENOSPC, "full")
        except OSError:
            raise ValueError("a bug while handling it") from None
    except ValueError as e:
        assert passing(e) is None
    assert passing(ValueError("no errno")) is None


def test_git_messages_name_the_error() -> None:
    assert errno_in("fatal: could not create leading directories of 'x': Read-only file system") == errno.EROFS
    assert errno_in("error: Too many open files in system") == errno.ENFILE  # not taken for EMFILE
    assert errno_in("fatal: Too many open files") == errno.EMFILE
    assert errno_in("fatal: not a git repository") is None
    err = GitError(("worktree", "add"), GitResult(128, "", "fatal: cannot mkdir x: No space left on device\n"),
                   "git worktree add failed (exit 128): fatal: …")
    assert passing(err) == errno.ENOSPC
    assert passing(GitError(("merge",), None, "conflict")) is None


def test_errno_name() -> None:
    assert errno_name(errno.EROFS) == "EROFS: Read-only file system"


def test_the_backoff_doubles_to_its_cap_with_jitter_below_the_nominal_delay() -> None:
    clock = FakeClock()
    p = Pause(clock.monotonic, first=1.0, cap=30.0, jitter=0.2, rng=lambda: 0.0)
    assert not p.paused and p.done() is None
    assert [p.failed() for _ in range(7)] == [1, 2, 4, 8, 16, 30, 30]
    low = Pause(clock.monotonic, first=1.0, cap=30.0, jitter=0.2, rng=lambda: 1.0)
    assert [round(low.failed(), 6) for _ in range(3)] == [0.8, 1.6, 3.2]
    many = Pause(clock.monotonic, rng=lambda: 0.5)
    for _ in range(2000):  # no overflow however long the fault lasts
        delay = many.failed()
    assert 14.0 <= delay <= 16.0  # full jitter by default: half the cap for a draw of 0.5
    full = Pause(clock.monotonic, rng=lambda: 0.999)
    assert 0 < full.failed() < 0.01  # never 0 (no busy loop), but down to almost nothing


def test_the_pause_measures_with_the_injected_clock_and_ends() -> None:
    clock = FakeClock()
    p = Pause(clock.monotonic, rng=lambda: 0.0)
    p.failed()
    clock.advance(5)
    p.failed()
    assert p.paused and p.tries == 2 and p.waited() == 5
    assert not p.remind(every=300)
    clock.advance(300)
    assert p.remind(every=300) and not p.remind(every=300)
    assert p.done() == 305
    assert p.tries == 0 and p.done() is None
    assert p.failed() == 1.0  # a new fault starts from the first delay again
