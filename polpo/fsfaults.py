"""Faults of the environment that pass by themselves, and the one backoff every path waits them out with.

A read-only remount, a full disk or quota, a process or a system out of file descriptors, permissions being
fixed: none of these says anything about a mission or a task, so none may become a stored rejection, a failed
task or a lost event. The work that met one waits (:class:`Pause`: doubling, jittered, capped) and tries again;
the store's writer (:mod:`polpo.store.core`), the intake, admission, task workspaces and worktrees and the event
log all classify with :func:`passing` and wait with :class:`Pause`, so they agree on what passes and how long
they wait. Pure: no I/O here, time is read from the clock the caller injects.
"""

from __future__ import annotations

import errno
import os
import random
from collections.abc import Callable

__all__ = ["INPUT_PASSING", "PASSING", "WORKSPACE_FULL", "Pause", "StoreAway", "errno_in", "errno_name", "passing"]

PASSING: frozenset[int] = frozenset({errno.EROFS, errno.ENOSPC, errno.EDQUOT, errno.EMFILE, errno.ENFILE,
                                     errno.EACCES})
"""On polpo's own folders (the state folder, workspaces, worktrees, the event log): they pass when the disk is
remounted writable, space is freed, descriptors are closed or permissions are fixed."""

WORKSPACE_FULL: frozenset[int] = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EROFS})
"""An agent's workspace refusing writes: an agent that failed while its file system says so waits, as polpo's own
writes do, instead of spending a retry (:mod:`polpo.engine.workspace_faults`)."""

INPUT_PASSING: frozenset[int] = frozenset({errno.EMFILE, errno.ENFILE})
"""Reading a mission file: only a lack of file descriptors passes. A file polpo may not read is the user's to
fix, and is rejected with why."""

_TEXTS = sorted(((os.strerror(c), c) for c in PASSING), key=lambda tc: -len(tc[0]))  # longest first: ENFILE's
# "Too many open files in system" contains EMFILE's "Too many open files"


def errno_in(text: str, kinds: frozenset[int] = PASSING) -> int | None:
    """The error of ``kinds`` whose C message a program printed (git under ``LC_ALL=C``), or None."""
    for message, code in _TEXTS:
        if code in kinds and message in text:
            return code
    return None


class StoreAway(OSError):
    """A read the state store could not answer (its database away for now): a passing fault, as a full disk is,
    so the work that needed it waits and tries again. Its errno is the cause's (ECONNREFUSED…), else ECONNABORTED."""

    def __init__(self, cause: BaseException) -> None:
        code = getattr(cause, "errno", None)
        super().__init__(code if isinstance(code, int) and code else errno.ECONNABORTED,
                         f"the state store did not answer: {type(cause).__name__}: {cause}")


def passing(exc: BaseException, kinds: frozenset[int] = PASSING) -> int | None:
    """The errno of a passing fault that ``exc`` (or an exception it was raised from) is, else None.

    Any exception with an ``errno`` attribute counts (``OSError``; :class:`polpo.vcs.git.GitError` reads it from
    git's message); only explicit causes (``raise … from``) are followed, never the context of a handled error.
    """
    e: BaseException | None = exc
    for _ in range(8):
        if e is None:
            return None
        code = getattr(e, "errno", None)
        if isinstance(code, int) and (code in kinds or isinstance(e, StoreAway)):
            return code
        e = e.__cause__
    return None


def errno_name(code: int) -> str:
    """``EROFS: Read-only file system``."""
    return f"{errno.errorcode.get(code, str(code))}: {os.strerror(code)}"


class Pause:
    """One piece of work waiting for a passing fault: how long to wait before each new try, and for how long
    it has waited. Delays double from ``first`` up to ``cap`` seconds and are shortened by up to ``jitter``
    (a fraction) at random, so paths that met the same fault do not all try again at the same instant; the
    default is full jitter (a draw in (0, nominal], :mod:`polpo.jitter`), which spreads them best."""

    def __init__(self, monotonic: Callable[[], float], first: float = 1.0, cap: float = 30.0, jitter: float = 1.0,
                 rng: Callable[[], float] = random.random) -> None:
        self.monotonic = monotonic
        self.first = first
        self.cap = cap
        self.jitter = jitter
        self.rng = rng
        self.tries = 0  # failed tries since the fault began; 0: not paused
        self.since = 0.0
        self._reminded = 0.0

    @property
    def paused(self) -> bool:
        return self.tries > 0

    def failed(self) -> float:
        """Record a failed try; the seconds to wait before the next one."""
        now = self.monotonic()
        if self.tries == 0:
            self.since = self._reminded = now
        self.tries += 1
        nominal = min(self.first * 2.0 ** min(self.tries - 1, 32), self.cap)
        return nominal * (1.0 - self.jitter * self.rng())

    def waited(self) -> float:
        """Seconds since the fault began (0 when not paused)."""
        return self.monotonic() - self.since if self.tries else 0.0

    def remind(self, every: float = 300.0) -> bool:
        """Whether a "still waiting" line is due (at most one per ``every`` seconds)."""
        now = self.monotonic()
        if self.tries and now - self._reminded >= every:
            self._reminded = now
            return True
        return False

    def done(self) -> float | None:
        """The work went through: the seconds it waited if it was paused (else None); the pause is over."""
        if not self.tries:
            return None
        waited = self.waited()
        self.tries = 0
        return waited
