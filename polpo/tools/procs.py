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

import contextlib
import math
import os
import signal
import subprocess
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType

import anyio
import anyio.abc

from polpo.clock import Clock

__all__ = [
    "MINIMAL_ENV_KEYS",
    "ProcResult",
    "find_processes_with_env",
    "kill_group",
    "minimal_env",
    "process_start_ticks",
    "run_process",
    "terminate_group",
]

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
_POLL_START = 0.02
_POLL_MAX = 0.2


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


# --------------------------------------------------------------------------------------------------- /proc helpers


def _read_stat_fields(pid: int) -> list[str] | None:
    """Fields of /proc/<pid>/stat from field 3 (state) on, or None if unreadable/vanished."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            raw = fh.read()
    except OSError:
        return None
    # Field 2 (comm) is in parentheses and may itself contain spaces and parentheses: split after the last ')'.
    close = raw.rfind(b")")
    if close < 0:
        return None
    return raw[close + 1 :].decode("ascii", errors="replace").split()


def process_start_ticks(pid: int) -> int | None:
    """Start time of ``pid`` in clock ticks since boot (field 22 of /proc/<pid>/stat), or None if it is gone.

    Store it next to a pid: if the value differs later, the pid was reused by another process.
    """
    fields = _read_stat_fields(pid)
    if fields is None or len(fields) < 20:
        return None
    try:
        return int(fields[19])  # field 22; fields[] starts at field 3
    except ValueError:
        return None


def _pids() -> list[int]:
    try:
        names = os.listdir("/proc")
    except OSError:
        return []
    return [int(name) for name in names if name.isdigit()]


def _group_has_live_members(pgid: int) -> bool:
    """True if some process of group ``pgid`` exists and is not a zombie."""
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # Something answers, but zombies answer too (and nobody may reap them): look at the members' states.
    for pid in _pids():
        fields = _read_stat_fields(pid)
        if fields is None or len(fields) < 3:
            continue
        state, pgrp = fields[0], fields[2]
        if pgrp == str(pgid) and state not in ("Z", "X", "x"):
            return True
    return False


def find_processes_with_env(key: str, value: str) -> list[int]:
    """Pids (sorted) whose initial environment contains ``key=value`` exactly.

    Scans ``/proc/*/environ``, skipping processes that vanished or cannot be read (other users', zombies). The
    calling process itself is never listed. Used after a crash to find the orphans of the previous daemon, whose
    children carry a per-attempt marker variable.
    """
    needle = f"{key}={value}".encode()
    me = os.getpid()
    found: list[int] = []
    for pid in _pids():
        if pid == me:
            continue
        try:
            with open(f"/proc/{pid}/environ", "rb") as fh:
                data = fh.read()
        except OSError:
            continue
        if needle in data.split(b"\0"):
            found.append(pid)
    return sorted(found)


# ------------------------------------------------------------------------------------------------- group signals


def kill_group(pgid: int, sig: int = signal.SIGKILL) -> bool:
    """Send ``sig`` to process group ``pgid``; True if something was signalled.

    Refuses (returns False) for pgid ≤ 1 and for the caller's own group, so a bad stored value can never take the
    daemon down. A vanished group or one we may not signal also gives False.
    """
    if pgid <= 1 or pgid == os.getpgrp():
        return False
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        return False
    return True


async def terminate_group(pgid: int, grace: float) -> None:
    """SIGTERM the group, wait up to ``grace`` seconds for its members to exit, then SIGKILL whatever is left.

    Not shielded by itself: callers that run it during cancellation wrap it in ``CancelScope(shield=True)``.
    """
    if not kill_group(pgid, signal.SIGTERM):
        return
    with anyio.move_on_after(max(0.0, grace)):
        delay = _POLL_START
        while _group_has_live_members(pgid):
            await anyio.sleep(delay)
            delay = min(delay * 2, _POLL_MAX)
    kill_group(pgid, signal.SIGKILL)


# ------------------------------------------------------------------------------------------------------- runner


def minimal_env(extra: Mapping[str, str] = _EMPTY) -> dict[str, str]:
    """A small, secret-free environment: :data:`MINIMAL_ENV_KEYS` from ``os.environ`` (when set), plus ``extra``."""
    env = {key: os.environ[key] for key in MINIMAL_ENV_KEYS if key in os.environ}
    env.update(extra)
    return env


def _printable(text: str) -> str:
    """``text`` with NUL and lone surrogates escaped, so an error about them can itself be stored."""
    return text.replace("\x00", "\\x00").encode("utf-8", "backslashreplace").decode("utf-8")


def _spawn_error(argv: Sequence[str], cwd: Path, exc: OSError) -> str:
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
    return f"cannot start {program}: {exc.strerror or exc}"


async def _pump(stream: anyio.abc.ByteReceiveStream | None, tail: _Tail, done: anyio.Event) -> None:
    try:
        if stream is None:
            return
        while True:
            try:
                chunk = await stream.receive()
            except (anyio.EndOfStream, anyio.ClosedResourceError, anyio.BrokenResourceError):
                return
            tail.add(chunk)
    finally:
        done.set()


async def _feed(stream: anyio.abc.ByteSendStream, data: bytes) -> None:
    try:
        if data:
            await stream.send(data)
    except (anyio.BrokenResourceError, anyio.ClosedResourceError, BrokenPipeError, ConnectionResetError):
        pass  # the program exited or closed its stdin without reading everything: not our problem
    finally:
        with anyio.CancelScope(shield=True):
            with contextlib.suppress(OSError, anyio.BrokenResourceError, anyio.ClosedResourceError):
                await stream.aclose()


async def _reap(process: anyio.abc.Process, seconds: float) -> None:
    with anyio.move_on_after(seconds):
        await process.wait()


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
    """
    args = [os.fspath(a) for a in argv]
    start = clock.monotonic()
    if not args or not args[0]:
        return _not_started("empty command", clock.monotonic() - start)
    try:
        process = await anyio.open_process(
            args,
            cwd=cwd,
            env=dict(env),
            start_new_session=True,
            stdin=subprocess.PIPE if stdin is not None else subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
    except OSError as exc:
        return _not_started(_spawn_error(args, cwd, exc), clock.monotonic() - start)
    except ValueError as exc:  # a NUL byte or a lone surrogate in argv, env or cwd: nothing can be started
        return _not_started(f"cannot start {_printable(args[0])}: {_printable(str(exc))}", clock.monotonic() - start)

    pid = process.pid
    out, err = _Tail(output_limit), _Tail(output_limit)
    timed_out = False
    try:
        try:
            if on_start is not None:
                on_start(pid)
            async with anyio.create_task_group() as tg:
                out_done, err_done = anyio.Event(), anyio.Event()
                tg.start_soon(_pump, process.stdout, out, out_done)
                tg.start_soon(_pump, process.stderr, err, err_done)
                if stdin is not None and process.stdin is not None:
                    tg.start_soon(_feed, process.stdin, stdin)

                with anyio.move_on_after(math.inf if timeout is None else max(0.0, timeout)):
                    await process.wait()
                if process.returncode is None:
                    timed_out = True
                    with anyio.CancelScope(shield=True):
                        await terminate_group(pid, grace)
                        await _reap(process, _REAP_SECONDS)
                else:
                    # The leader is gone; nothing it started may outlive it.
                    kill_group(pid, signal.SIGKILL)

                # Everything that held the pipes is dead: read what is left, then stop the readers.
                with anyio.move_on_after(_DRAIN_SECONDS):
                    await out_done.wait()
                    await err_done.wait()
                tg.cancel_scope.cancel()
        except BaseException:
            with anyio.CancelScope(shield=True):
                await terminate_group(pid, grace)
                await _reap(process, _REAP_SECONDS)
            raise
    finally:
        with anyio.CancelScope(shield=True):
            if process.returncode is None:
                kill_group(pid, signal.SIGKILL)
                await _reap(process, _REAP_SECONDS)
            if process.returncode is not None:
                await process.aclose()

    rc = process.returncode
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


def _not_started(error: str, duration: float) -> ProcResult:
    return ProcResult(
        exit_code=None,
        signal=None,
        timed_out=False,
        stdout_tail="",
        stderr_tail="",
        stdout_bytes=0,
        stderr_bytes=0,
        duration=max(0.0, duration),
        error=error,
    )
