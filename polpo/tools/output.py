"""What every tool returns, and the one way a tool call fails.

A tool never raises for a bad request (a refused path, a missing file, an invalid regex, bad arguments…): the
problem comes back as ``ToolOutput(ok=False, text="Error: …", data={"error": kind, …})`` so the caller can hand it
to the model as the tool result and the model can correct itself. :func:`fail` builds that shape; a handler deep in
a worker thread may instead raise :class:`ToolError`, and :func:`error_output` turns it (or a
:class:`~polpo.tools.sandbox.SandboxError`, an ``OSError``, or a bug) into the same shape.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import anyio.to_thread

from polpo.tools.sandbox import SandboxError

__all__ = ["ToolError", "ToolOutput", "error_output", "fail", "in_thread", "json_type"]


@dataclass(frozen=True, slots=True)
class ToolOutput:
    """A tool's result. ``text`` is what the model sees; ``data`` is structured detail for transcripts and callers.

    On failure ``text`` starts with ``"Error: "``, ``data["error"]`` names the kind (``"sandbox"``,
    ``"not_found"``, ``"invalid_arguments"``, ``"unknown_tool"``, ``"io"``, ``"timeout"``, ``"internal"``, …)
    and, once it went through the dispatcher, ``data["tool"]`` names the tool.
    """

    ok: bool
    text: str
    data: dict[str, Any] = field(default_factory=dict)


class ToolError(Exception):
    """A refused request, raised where returning is awkward (worker threads, binders); ``kind`` is the error kind."""

    def __init__(self, message: str, kind: str = "invalid_request") -> None:
        super().__init__(message)
        self.kind = kind


def fail(message: str, kind: str, **data: Any) -> ToolOutput:
    """The failed result: ``"Error: " + message``, ``data["error"] = kind`` plus any detail given."""
    return ToolOutput(ok=False, text=f"Error: {message}", data={"error": kind, **data})


def error_output(tool: str, exc: Exception) -> ToolOutput:
    """An exception from a tool as its failed result: anticipated kinds keep their meaning, anything else is a bug."""
    if isinstance(exc, SandboxError):
        return fail(str(exc), "not_found" if "does not exist" in str(exc) else "sandbox")
    if isinstance(exc, ToolError):
        return fail(str(exc), exc.kind)
    if isinstance(exc, OSError):
        return fail(f"{tool} failed: {exc.strerror or type(exc).__name__}", "io")
    return fail(f"{tool} failed unexpectedly: {type(exc).__name__}: {exc}", "internal")


async def in_thread(tool: str, fn: Callable[[], ToolOutput]) -> ToolOutput:
    """Run blocking ``fn`` in a worker thread; every exception becomes an ``ok=False`` output."""
    try:
        return await anyio.to_thread.run_sync(fn)
    except Exception as exc:
        return error_output(tool, exc)


def json_type(value: Any) -> str:
    """How a JSON value is named in an error message (``"a string"``, ``"the number 3"``…)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return f"the number {value!r}"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "an array"
    if isinstance(value, dict):
        return "an object"
    return type(value).__name__
