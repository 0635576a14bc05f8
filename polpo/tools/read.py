"""The ``read_file`` tool: numbered lines of a text file, bounded in lines, bytes, line width and scan depth.

It returns at most :data:`MAX_READ_BYTES` of text and ``limit`` (≤ :data:`MAX_READ_LINES`) lines, each cut at
:data:`MAX_LINE_CHARS`; it scans at most :data:`MAX_SCAN_BYTES` to reach ``offset``; binary files (a NUL byte in
the first 8 KiB) are refused. A truncated reply says which ``offset`` continues it.
"""

from __future__ import annotations

from typing import Any

from pydantic import Field

from polpo.tools.fileio import PATH_NOTE, SNIFF_BYTES, is_binary, reader, require_file
from polpo.tools.output import ToolOutput, fail, in_thread
from polpo.tools.registry import Integer, Tool, ToolArgs, ToolContext
from polpo.tools.sandbox import Sandbox

__all__ = [
    "DEFAULT_READ_LIMIT",
    "MAX_LINE_CHARS",
    "MAX_READ_BYTES",
    "MAX_READ_LINES",
    "MAX_SCAN_BYTES",
    "READ_FILE",
    "ReadFileArgs",
    "read_file",
]

MAX_READ_BYTES = 200_000
MAX_READ_LINES = 2_000
DEFAULT_READ_LIMIT = 500
MAX_LINE_CHARS = 2_000
MAX_SCAN_BYTES = 64 * 1024 * 1024


async def read_file(sb: Sandbox, path: str, offset: int = 1, limit: int = DEFAULT_READ_LIMIT) -> ToolOutput:
    """Lines ``offset`` … ``offset+limit-1`` (1-based) of a text file, numbered ``"  12| text"``."""
    if offset < 1:
        return fail(f"offset must be 1 or more (a 1-based line number), got {offset}", "invalid_arguments")
    if limit < 1:
        return fail(f"limit must be 1 or more, got {limit}", "invalid_arguments")
    return await in_thread("read_file", lambda: _read_file_sync(sb, path, offset, min(limit, MAX_READ_LINES)))


def _read_file_sync(sb: Sandbox, path: str, offset: int, limit: int) -> ToolOutput:
    real, rel = require_file(sb, path)
    shown: list[tuple[int, str]] = []
    used = 0
    lineno = 0
    scanned = 0
    eof = False
    stopped_by: str | None = None  # "lines" | "bytes" | "scan"
    with reader(real) as f:
        if is_binary(f.read(SNIFF_BYTES)):
            return fail(f"{rel!r} looks like a binary file; read_file shows text files only", "binary", path=rel)
        f.seek(0)
        while True:
            raw = f.readline(MAX_LINE_CHARS + 1)
            if not raw:
                eof = True
                break
            scanned += len(raw)
            cut = False
            if not raw.endswith(b"\n") and len(raw) > MAX_LINE_CHARS:
                cut = True
                raw = raw[:MAX_LINE_CHARS]
                while scanned <= MAX_SCAN_BYTES:  # consume the rest of the long line
                    rest = f.readline(65536)
                    scanned += len(rest)
                    if not rest or rest.endswith(b"\n"):
                        break
            lineno += 1
            if lineno < offset:
                if scanned > MAX_SCAN_BYTES:
                    stopped_by = "scan"
                    break
                continue
            if len(shown) >= limit:
                stopped_by = "lines"
                lineno -= 1
                break
            text = raw.decode("utf-8", errors="replace").rstrip("\r\n")
            if cut:
                text += f" … [line cut at {MAX_LINE_CHARS} characters]"
            if shown and used + len(text) > MAX_READ_BYTES:
                stopped_by = "bytes"
                lineno -= 1
                break
            shown.append((lineno, text))
            used += len(text) + 1
            if scanned > MAX_SCAN_BYTES:
                stopped_by = "scan"
                break
    if not shown:
        if eof and lineno == 0:
            return ToolOutput(ok=True, text=f"({rel} is empty)", data=_read_data(rel, offset, 0, None, False, 0))
        if stopped_by == "scan":
            return fail(
                f"offset {offset} is too far into {rel!r}: read_file scans at most {MAX_SCAN_BYTES} bytes; "
                "use grep to find the lines you need",
                "too_large",
                path=rel,
            )
        return fail(f"offset {offset} is past the end of {rel!r} ({lineno} lines)", "invalid_arguments", path=rel)
    first, last = shown[0][0], shown[-1][0]
    width = max(4, len(str(last)))
    lines = [f"{n:>{width}}| {t}" for n, t in shown]
    truncated = stopped_by is not None
    next_offset = last + 1 if truncated else None
    if stopped_by == "lines":
        lines.append(
            f"[truncated: showing lines {first}-{last}; the file continues — call read_file with offset={last + 1}]"
        )
    elif stopped_by == "bytes":
        lines.append(
            f"[truncated: output limit of {MAX_READ_BYTES} bytes reached at line {last}; "
            f"call read_file with offset={last + 1} to continue]"
        )
    elif stopped_by == "scan":
        lines.append(f"[truncated: read_file scans at most {MAX_SCAN_BYTES} bytes of a file; use grep]")
    total = lineno if eof else None
    return ToolOutput(
        ok=True, text="\n".join(lines), data=_read_data(rel, first, len(shown), next_offset, truncated, total)
    )


def _read_data(
    rel: str, offset: int, count: int, next_offset: int | None, truncated: bool, total: int | None
) -> dict[str, Any]:
    return {
        "path": rel,
        "offset": offset,
        "lines": count,
        "next_offset": next_offset,
        "truncated": truncated,
        "total_lines": total,
    }


class ReadFileArgs(ToolArgs):
    path: str = Field(description=f"File path. {PATH_NOTE}")
    offset: Integer = Field(1, ge=1, description="1-based line number to start at (default 1).")
    limit: Integer = Field(
        DEFAULT_READ_LIMIT,
        ge=1,
        description=f"Maximum number of lines to return (default {DEFAULT_READ_LIMIT}, at most {MAX_READ_LINES}).",
    )


async def _run(ctx: ToolContext, args: ReadFileArgs) -> ToolOutput:
    return await read_file(ctx.sandbox, args.path, args.offset, args.limit)


READ_FILE = Tool(
    name="read_file",
    description="Read a text file of the workspace. Returns numbered lines ('  12| text'), at most `limit` lines and "
    f"{MAX_READ_BYTES // 1000} KB per call; when the reply says it was truncated, call again with the given "
    "offset. Binary files are refused.",
    args=ReadFileArgs,
    handler=_run,
    read_only=True,
)
