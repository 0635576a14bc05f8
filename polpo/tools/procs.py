"""Run one program safely: own process group, bounded output, timeout, whole-group kill.

Every program polpo starts (command agents, ``test``/``script`` checks) goes through :func:`run_process`:

* the program is started with ``start_new_session=True``, so it leads its own process group (pgid == pid) and
  everything it forks can be signalled at once with ``os.killpg``;
* stdout and stderr are read concurrently into tail buffers of at most ``output_limit`` bytes each, so a program
  that prints gigabytes costs a few hundred kilobytes of memory;
* on timeout, or when the calling scope is cancelled, the whole group gets SIGTERM, then SIGKILL after ``grace``
  seconds; after a normal exit, any member of the group still running (a background or daemon-ised grandchild)
  gets SIGKILL, so nothing outlives its task;
* a program that cannot be started (missing, not executable, bad working directory, a NUL byte or a lone
  surrogate in an argument or the environment) is reported in :attr:`ProcResult.error`; it never raises.

The helpers below (:func:`kill_group`, :func:`terminate_group`, :func:`process_start_ticks`,
:func:`find_processes_with_env`) let the daemon find and kill orphans of a previous run after a crash.
Linux only (``/proc``).
"""

from __future__ import annotations

import asyncio
import errno
import math
import os
import signal
import subprocess
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import Protocol, cast

import anyio

from polpo.clock import Clock
from polpo.tools.proctable import kill_group, terminate_group

__all__ = ["MINIMAL_ENV_KEYS", "RUNNING", "WATCH", "GroupWatch", "ProcResult", "kill_running", "minimal_env",
           "run_process", "spawn_error"]

RUNNING: set[int] = set()
"""Pids of the programs run_process started and has not seen reaped (the orphan sweep never touches them)."""


class GroupWatch(Protocol):
    """Told of every process group run_process starts and ends (a cluster node's guard, polpo.tools.guard_link)."""

    def started(self, pgid: int) -> bool:
        """False: the program must not run (the group is killed at once)."""
        ...

    def ended(self, pgid: int) -> None: ...


WATCH: list[GroupWatch] = []


def kill_running() -> int:
    """SIGKILL every program run_process started that is still running, now (a node that lost its lease)."""
    for pid in list(RUNNING):
        kill_group(pid, signal.SIGKILL)
    return len(RUNNING)

#: Variables :func:`minimal_env` copies from the daemon's environment (when present). Nothing else: no API keys.
MINIMAL_ENV_KEYS: tuple[str, ...] = (
    "PATH",
    "HOME",
    "LANG",
    "LC_ALL",
    "LC_CTYPE",
    "TERM",
    "TMPDIR",
    "USER",
    "LOGNAME",
    "SHELL",
    "TZ",
)

_EMPTY: Mapping[str, str] = MappingProxyType({})

# After the program and its group are gone, how long to keep reading what is left in the pipes. Only matters when
# something outside the group (a process that called setsid()) still holds a pipe open.
_DRAIN_SECONDS = 2.0
# Extra time to wait for the leader to be reaped after SIGKILL.
_REAP_SECONDS = 5.0


@dataclass(frozen=True)
class ProcResult:
    """What happened to one program run."""

    exit_code: int | None
    """The program's exit status; None if it could not be started, died from a signal, or timed out."""
    signal: int | None
    """Signal number if the program died from a signal (our SIGTERM/SIGKILL included)."""
    timed_out: bool
    stdout_tail: str
    """The last ``output_limit`` bytes of stdout, decoded as UTF-8 with ``errors="replace"``."""
    stderr_tail: str
    stdout_bytes: int
    """Total bytes the program wrote to stdout (not just the tail)."""
    stderr_bytes: int
    duration: float
    """Seconds, measured with ``clock.monotonic()``."""
    error: str | None
    """Why the program could not be started (e.g. ``command not found: foo``), else None."""
    permanent: bool = False
    """The start failed for a reason running it again cannot change (an argument list too long, a NUL byte)."""

    @property
    def ok(self) -> bool:
        """Started, finished in time, and exited 0."""
        return self.error is None and not self.timed_out and self.exit_code == 0


class _Tail:
    """Keeps the last ``limit`` bytes of a stream and counts all of them."""

    __slots__ = ("buf", "limit", "total", "truncated")

    def __init__(self, limit: int) -> None:
        self.limit = max(0, limit)
        self.buf = bytearray()
        self.total = 0
        self.truncated = False

    def add(self, chunk: bytes) -> None:
        self.total += len(chunk)
        if self.limit == 0:
            self.truncated = self.truncated or bool(chunk)
            return
        if len(chunk) >= self.limit:
            self.truncated = self.truncated or len(chunk) > self.limit or bool(self.buf)
            self.buf = bytearray(chunk[-self.limit :])
            return
        self.buf += chunk
        excess = len(self.buf) - self.limit
        if excess > 0:
            del self.buf[:excess]
            self.truncated = True

    def text(self) -> str:
        data = bytes(self.buf)
        if self.truncated:
            # The cut may have split a UTF-8 sequence: drop its orphaned continuation bytes (at most 3).
            skip = 0
            while skip < min(3, len(data)) and (data[skip] & 0xC0) == 0x80:
                skip += 1
            data = data[skip:]
        return data.decode("utf-8", errors="replace")


# ------------------------------------------------------------------------------------------------------- runner


def minimal_env(extra: Mapping[str, str] = _EMPTY) -> dict[str, str]:
    """A small, secret-free environment: :data:`MINIMAL_ENV_KEYS` from ``os.environ`` (when set), plus ``extra``."""
    env = {key: os.environ[key] for key in MINIMAL_ENV_KEYS if key in os.environ}
    env.update(extra)
    return env


def _printable(text: str) -> str:
    """``text`` with NUL and lone surrogates escaped, so an error about them can itself be stored."""
    return text.replace("\x00", "\\x00").encode("utf-8", "backslashreplace").decode("utf-8")


def spawn_error(argv: Sequence[str], cwd: Path, exc: OSError) -> str:
    """Why ``argv`` could not be started in ``cwd``, as a person reads it (the program, or the folder)."""
    program = argv[0]
    filename = exc.filename
    cwd_failed = filename is not None and os.fsdecode(filename) == os.fspath(cwd)
    if not cwd_failed and not os.path.isdir(cwd):
        cwd_failed = True
    if cwd_failed:
        if isinstance(exc, FileNotFoundError):
            return f"working directory not found: {cwd}"
        return f"cannot enter working directory {cwd}: {exc.strerror or exc}"
    if isinstance(exc, FileNotFoundError):
        return f"command not found: {program}"
    if isinstance(exc, PermissionError):
        return f"permission denied: {program}"
    if exc.errno == errno.E2BIG:
        size = sum(len(a) for a in argv)
        return (f"cannot start {program}: the command line and environment are too long for the system "
                f"(arguments {size} bytes); pass large text on stdin or in a file instead of the argv")
    return f"cannot start {program}: {exc.strerror or exc}"


class _Collector(asyncio.SubprocessProtocol):
    """Receives a child's output straight from the event loop into bounded tails (no reader tasks)."""

    def __init__(self, out: _Tail, err: _Tail) -> None:
        loop = asyncio.get_running_loop()
        self.tails = {1: out, 2: err}
        self.exited: asyncio.Future[None] = loop.create_future()
        self.pipes_closed = {1: loop.create_future(), 2: loop.create_future()}

    def pipe_data_received(self, fd: int, data: bytes | str) -> None:
        tail = self.tails.get(fd)
        if tail is not None:
            tail.add(data if isinstance(data, bytes) else data.encode())

    def pipe_connection_lost(self, fd: int, exc: Exception | None) -> None:
        done = self.pipes_closed.get(fd)
        if done is not None and not done.done():
            done.set_result(None)

    def process_exited(self) -> None:
        if not self.exited.done():
            self.exited.set_result(None)


async def _wait(fut: asyncio.Future[None], seconds: float) -> bool:
    """Whether ``fut`` completes within ``seconds`` (it is not cancelled when the time is up)."""
    if fut.done():
        return True
    with anyio.move_on_after(seconds):
        await asyncio.shield(fut)
        return True
    return fut.done()


async def run_process(
    argv: Sequence[str],
    *,
    cwd: Path,
    env: Mapping[str, str],
    clock: Clock,
    stdin: bytes | None = None,
    timeout: float | None = None,  # noqa: ASYNC109 - expiry kills the group and returns a result
    grace: float = 5.0,
    output_limit: int = 64 * 1024,
    on_start: Callable[[int], None] | None = None,
) -> ProcResult:
    """Run ``argv`` (no shell) in ``cwd`` with exactly ``env``; see the module docstring.

    ``timeout`` None means no timeout. ``on_start(pid)`` is called right after the program starts (pid == pgid).
    Cancelling the caller kills the group (shielded cleanup) and re-raises the cancellation. Spawn failures are
    returned in ``error``; exceptions from ``on_start`` propagate after the group is killed.

    Built on asyncio's subprocess protocol rather than anyio's process streams: output arrives in the loop's
    read callbacks, so a run costs no reader tasks and no task group (the daemon runs anyio on asyncio only).
    """
    args = [os.fspath(a) for a in argv]
    start = clock.monotonic()
    if not args or not args[0]:
        return _not_started("empty command", clock.monotonic() - start)
    out, err = _Tail(output_limit), _Tail(output_limit)
    loop = asyncio.get_running_loop()
    try:
        transport, proto = await loop.subprocess_exec(
            lambda: _Collector(out, err), *args, cwd=cwd, env=dict(env), start_new_session=True,
            stdin=subprocess.PIPE if stdin is not None else subprocess.DEVNULL,
            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    except OSError as exc:
        return _not_started(spawn_error(args, cwd, exc), clock.monotonic() - start,
                            permanent=exc.errno == errno.E2BIG)
    except ValueError as exc:  # a NUL byte or a lone surrogate in argv, env or cwd: nothing can be started
        return _not_started(f"cannot start {_printable(args[0])}: {_printable(str(exc))}", clock.monotonic() - start,
                            permanent=True)

    pid = transport.get_pid()
    RUNNING.add(pid)
    timed_out = False
    try:
        try:
            if not all([w.started(pid) for w in WATCH]):  # (every watcher hears of it)
                kill_group(pid, signal.SIGKILL)
            if on_start is not None:
                on_start(pid)
            if stdin is not None:
                pipe = cast("asyncio.WriteTransport | None", transport.get_pipe_transport(0))
                if pipe is not None:
                    if stdin:
                        pipe.write(stdin)  # buffered by the loop; a child that never reads just leaves it
                    pipe.close()
            if not await _wait(proto.exited, math.inf if timeout is None else max(0.0, timeout)):
                timed_out = True
                with anyio.CancelScope(shield=True):
                    await terminate_group(pid, grace)
                    await _wait(proto.exited, _REAP_SECONDS)
            else:
                kill_group(pid, signal.SIGKILL)  # the leader is gone; nothing it started may outlive it
            # Everything that held the pipes is dead: read what is left (a setsid() escapee may keep them open).
            if not all(done.done() for done in proto.pipes_closed.values()):
                with anyio.move_on_after(_DRAIN_SECONDS):
                    for done in proto.pipes_closed.values():
                        await asyncio.shield(done)
        except BaseException:
            with anyio.CancelScope(shield=True):
                await terminate_group(pid, grace)
                await _wait(proto.exited, _REAP_SECONDS)
            raise
    finally:
        if transport.get_returncode() is None:
            kill_group(pid, signal.SIGKILL)
        else:
            RUNNING.discard(pid)  # reaped by asyncio; until then the orphan sweep must leave it alone
        transport.close()
        for w in WATCH:
            w.ended(pid)

    rc = transport.get_returncode()
    sig = -rc if rc is not None and rc < 0 else None
    exit_code = rc if rc is not None and rc >= 0 and not timed_out else None
    return ProcResult(
        exit_code=exit_code,
        signal=sig,
        timed_out=timed_out,
        stdout_tail=out.text(),
        stderr_tail=err.text(),
        stdout_bytes=out.total,
        stderr_bytes=err.total,
        duration=max(0.0, clock.monotonic() - start),
        error=None,
    )


def _not_started(error: str, duration: float, *, permanent: bool = False) -> ProcResult:
    return ProcResult(exit_code=None, signal=None, timed_out=False, stdout_tail="", stderr_tail="", stdout_bytes=0,
                      stderr_bytes=0, duration=max(0.0, duration), error=error, permanent=permanent)
