"""The stdio transport of polpo's MCP client: the server is a program polpo starts as it starts every program.

The SDK's ``stdio_client`` starts the server in a session of its own whose process polpo never sees, so the node's
guard could not hold it and a kill could not reach it before it had run. polpo must hold every process it starts
(:mod:`polpo.tools.procs`): its process group known to the guard and to the orphan sweeps (``RUNNING``,
``WATCH``), the attempt's marker in its environment (a restarted daemon finds it), killed whole when done. So this
module starts the program and hands the SDK's ``Client`` the two streams of messages (an ``mcp.client.Transport``);
the protocol — framing, handshake, requests — is the SDK's: one JSON-RPC message per line of UTF-8.

A line on stdout that is not a JSON-RPC message breaks the protocol (stdout carries only messages; logs belong on
stderr): the connection ends there, so a pending call fails at once with that line as its reason rather than
waiting for its timeout. stderr is kept as a bounded tail for the reason a failing server gives.

When the transport closes: stdin is closed (the spec's way to ask a server to exit), then after ``grace`` seconds
the whole group gets SIGTERM, then SIGKILL; whatever is left of the group is killed in any case.
"""

from __future__ import annotations

import signal
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path

import anyio
import mcp_types
from anyio.abc import Process
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream
from mcp.shared.message import SessionMessage

from polpo.tools.procs import RUNNING, WATCH, spawn_error
from polpo.tools.proctable import kill_group, terminate_group

__all__ = ["MAX_LINE", "ServerStartError", "Spawned", "stdio_transport"]

MAX_LINE = 32 * 1024 * 1024
"""Bytes of one message; a longer line is a protocol failure (a server that never ends its line)."""
STDERR_TAIL = 8 * 1024
_REAP_SECONDS = 5.0
_POLL = 0.01

Streams = tuple[MemoryObjectReceiveStream[SessionMessage | Exception], MemoryObjectSendStream[SessionMessage]]


class ServerStartError(Exception):
    """The server's program could not be started (the message says why)."""


@dataclass
class Spawned:
    """What is known of a stdio server's process: what a failed start or call is explained with."""

    argv: list[str]
    pid: int | None = None
    process: Process | None = None
    returncode: int | None = None
    garbage: str | None = None  # the first line on stdout that was not a JSON-RPC message
    stderr: bytearray = field(default_factory=bytearray)

    def add_stderr(self, chunk: bytes) -> None:
        self.stderr += chunk
        if len(self.stderr) > STDERR_TAIL:
            del self.stderr[:len(self.stderr) - STDERR_TAIL]

    @property
    def running(self) -> bool:
        return self.process is not None and self.process.returncode is None

    async def settle(self, seconds: float = 1.0) -> None:
        """Wait a little for the exit of a server whose stdout ended (it is reaped just after)."""
        if self.process is not None and self.garbage is None:
            await _exited(self.process, seconds)

    def exit_text(self) -> str | None:
        """``"exited with code 3"``, ``"was killed by signal 9 (SIGKILL)"``, or None while it runs."""
        rc = self.returncode if self.returncode is not None or self.process is None else self.process.returncode
        if rc is None:
            return None
        if rc < 0:
            try:
                name = signal.Signals(-rc).name
            except ValueError:
                name = "?"
            return f"was killed by signal {-rc} ({name})"
        return f"exited with code {rc}"

    def stderr_text(self, limit: int = 600) -> str:
        """The end of what it wrote on stderr, on one line (empty when it wrote nothing)."""
        text = " | ".join(line.strip() for line in self.stderr.decode("utf-8", "replace").splitlines()
                          if line.strip())
        return text[-limit:]


@asynccontextmanager
async def stdio_transport(spawned: Spawned, *, cwd: Path, env: Mapping[str, str],
                          grace: float = 1.0) -> AsyncIterator[Streams]:
    """Start ``spawned.argv`` in ``cwd`` with exactly ``env``; yield the SDK's (read, write) message streams."""
    argv = spawned.argv
    try:
        process = await anyio.open_process(argv, cwd=cwd, env=dict(env), start_new_session=True)
    except OSError as exc:
        raise ServerStartError(spawn_error(argv, cwd, exc)) from None
    except ValueError as exc:  # a NUL byte in argv or env
        raise ServerStartError(f"cannot start {argv[0]!r}: {exc}") from None
    pid = spawned.pid = process.pid
    spawned.process = process
    RUNNING.add(pid)
    try:
        if not all([w.started(pid) for w in WATCH]):  # every watcher hears of it
            raise ServerStartError("this node may not start programs now: its lease is ending")
        read_in, read_out = anyio.create_memory_object_stream[SessionMessage | Exception](0)
        write_in, write_out = anyio.create_memory_object_stream[SessionMessage](0)
        async with anyio.create_task_group() as tg:
            tg.start_soon(_read_stdout, process, read_in, spawned)
            tg.start_soon(_write_stdin, process, write_out)
            tg.start_soon(_read_stderr, process, spawned)
            try:
                yield read_out, write_in
            finally:
                with anyio.CancelScope(shield=True):
                    await write_in.aclose()  # the writer closes stdin: the server is asked to exit
                    await read_out.aclose()
                    if not await _exited(process, grace):
                        await terminate_group(pid, grace)
                tg.cancel_scope.cancel()
    finally:
        with anyio.CancelScope(shield=True):
            kill_group(pid, signal.SIGKILL)  # nothing of its group outlives the connection
            await _exited(process, _REAP_SECONDS)
            spawned.returncode = process.returncode
            if process.returncode is not None:
                RUNNING.discard(pid)  # reaped; until then the orphan sweep must leave it alone
            for w in WATCH:
                w.ended(pid)


async def _exited(process: Process, seconds: float) -> bool:
    """Whether the process is gone within ``seconds`` (its return code polled: ``wait()`` would also wait for
    pipes a grandchild may hold)."""
    with anyio.move_on_after(seconds):
        while process.returncode is None:  # noqa: ASYNC110 - polled: wait() also waits for pipes a grandchild holds
            await anyio.sleep(_POLL)
    return process.returncode is not None


def parse_line(line: bytes) -> SessionMessage | None:
    """One stdout line as a message; None when it is not one."""
    try:
        return SessionMessage(mcp_types.jsonrpc_message_adapter.validate_json(line, by_name=False))
    except ValueError:
        return None


async def _read_stdout(process: Process, out: MemoryObjectSendStream[SessionMessage | Exception],
                       spawned: Spawned) -> None:
    assert process.stdout is not None
    pending = bytearray()
    async with out:
        try:
            async for chunk in process.stdout:
                pending += chunk
                if b"\n" not in chunk:  # (what was pending had no end of line: only the new chunk can end one)
                    if len(pending) > MAX_LINE:
                        spawned.garbage = f"a line longer than {MAX_LINE // (1024 * 1024)} MiB"
                        return
                    continue
                *lines, rest = bytes(pending).split(b"\n")
                pending = bytearray(rest)
                for line in lines:
                    if not line.strip():
                        continue
                    message = parse_line(line)
                    if message is None:
                        spawned.garbage = line[:300].decode("utf-8", "replace")
                        return  # the connection ends: pending calls fail now, with this line as the reason
                    await out.send(message)
        except (anyio.BrokenResourceError, anyio.ClosedResourceError, OSError):
            return


async def _write_stdin(process: Process, messages: MemoryObjectReceiveStream[SessionMessage]) -> None:
    assert process.stdin is not None
    broken = False
    async with messages:
        async for m in messages:
            if broken:
                continue  # the server is gone: its reader's end of stream fails the calls
            data = m.message.model_dump_json(by_alias=True, exclude_unset=True).encode() + b"\n"
            try:
                await process.stdin.send(data)
            except (anyio.BrokenResourceError, anyio.ClosedResourceError, OSError):
                broken = True
    with suppress(anyio.BrokenResourceError, OSError):
        await process.stdin.aclose()


async def _read_stderr(process: Process, spawned: Spawned) -> None:
    assert process.stderr is not None
    try:
        async for chunk in process.stderr:
            spawned.add_stderr(chunk)
    except (anyio.BrokenResourceError, anyio.ClosedResourceError, OSError):
        return
