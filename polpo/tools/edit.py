"""The ``write_file`` and ``edit_file`` tools: create, overwrite or exactly edit a text file of the workspace.

Both handle at most :data:`MAX_WRITE_BYTES`, write through :func:`~polpo.tools.fileio.open_regular` (no final
symlink followed, regular files only) and re-check after creating parent directories that the real location is
still inside the workspace. ``edit_file`` replaces exactly one occurrence: absent or repeated text is an error that
tells the model how to fix its call.
"""

from __future__ import annotations

import os
from pathlib import Path

from pydantic import Field

from polpo.tools.fileio import PATH_NOTE, SNIFF_BYTES, is_binary, open_regular, reader, require_file
from polpo.tools.output import ToolError, ToolOutput, in_thread
from polpo.tools.registry import Tool, ToolArgs, ToolContext
from polpo.tools.sandbox import Sandbox

__all__ = ["EDIT_FILE", "MAX_WRITE_BYTES", "WRITE_FILE", "EditFileArgs", "WriteFileArgs", "edit_file", "write_file"]

MAX_WRITE_BYTES = 10 * 1024 * 1024


async def write_file(sb: Sandbox, path: str, content: str) -> ToolOutput:
    """Create or overwrite a file with ``content`` (UTF-8), creating parent directories inside the workspace."""
    return await in_thread("write_file", lambda: _write_file_sync(sb, path, content))


def _write_bytes(sb: Sandbox, real: Path, data: bytes) -> None:
    # re-check after any mkdir: the real location must still be inside the workspace
    if not sb.contains(os.path.realpath(real)):
        raise ToolError("refused: the path now leads outside the workspace", "sandbox")
    fd = open_regular(real, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
    with os.fdopen(fd, "wb") as f:
        f.write(data)


def _write_file_sync(sb: Sandbox, path: str, content: str) -> ToolOutput:
    real = sb.resolve(path)
    rel = sb.relative(real)
    if real == sb.root or real.is_dir():
        raise ToolError(f"{rel!r} is a directory; give a file path", "is_a_directory")
    data = content.encode("utf-8")
    if len(data) > MAX_WRITE_BYTES:
        raise ToolError(f"content is {len(data)} bytes; write_file accepts at most {MAX_WRITE_BYTES}", "too_large")
    created = not os.path.lexists(real)
    try:
        real.parent.mkdir(parents=True, exist_ok=True)
    except (FileExistsError, NotADirectoryError) as exc:
        raise ToolError(f"cannot create the parent directory of {rel!r}: a file is in the way", "io") from exc
    _write_bytes(sb, real, data)
    n_lines = content.count("\n") + (1 if content and not content.endswith("\n") else 0)
    note = " (new file)" if created else " (overwritten)"
    return ToolOutput(
        ok=True,
        text=f"wrote {len(data)} bytes ({n_lines} lines) to {rel}{note}",
        data={"path": rel, "bytes": len(data), "lines": n_lines, "created": created},
    )


async def edit_file(sb: Sandbox, path: str, old: str, new: str) -> ToolOutput:
    """Replace the one exact occurrence of ``old`` with ``new``; error when absent or not unique."""
    return await in_thread("edit_file", lambda: _edit_file_sync(sb, path, old, new))


def _count_occurrences(text: str, sub: str, cap: int = 1000) -> int:
    n, i = 0, text.find(sub)
    while i != -1 and n < cap:
        n += 1
        i = text.find(sub, i + 1)
    return n


def _read_text(real: Path, rel: str) -> str:
    with reader(real) as f:
        blob = f.read(MAX_WRITE_BYTES + 1)
    if len(blob) > MAX_WRITE_BYTES:
        raise ToolError(f"{rel!r} is larger than {MAX_WRITE_BYTES} bytes; edit_file refuses it", "too_large")
    if is_binary(blob[:SNIFF_BYTES]):
        raise ToolError(f"{rel!r} looks like a binary file; edit_file edits text files only", "binary")
    try:
        return blob.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ToolError(f"{rel!r} is not valid UTF-8 text", "binary") from exc


def _edit_file_sync(sb: Sandbox, path: str, old: str, new: str) -> ToolOutput:
    if old == "":
        raise ToolError(
            "old is empty; give the exact text to replace (to create a file, use write_file)", "invalid_arguments"
        )
    real, rel = require_file(sb, path)
    text = _read_text(real, rel)
    count = _count_occurrences(text, old)
    if count == 0:
        hint = ""
        if "\r\n" in text and "\r\n" not in old and "\n" in old:
            hint = " (the file uses CRLF line endings)"
        elif old.strip() and old.strip() in text:
            hint = " (it does occur with different leading/trailing whitespace; check the indentation)"
        raise ToolError(
            f"old text not found in {rel!r}{hint}; read the file and copy the exact text to replace", "not_found"
        )
    if count > 1:
        shown = f"{count}" if count < 1000 else "1000+"
        raise ToolError(
            f"old text found {shown} times in {rel!r}; include more context so it matches exactly once", "not_unique"
        )
    at = text.find(old)
    _write_bytes(sb, real, (text[:at] + new + text[at + len(old) :]).encode("utf-8"))
    line = text.count("\n", 0, at) + 1
    return ToolOutput(
        ok=True,
        text=f"edited {rel}: replaced 1 occurrence at line {line}",
        data={"path": rel, "line": line, "replacements": 1},
    )


class WriteFileArgs(ToolArgs):
    path: str = Field(description=f"File path. {PATH_NOTE}")
    content: str = Field(description="The complete new content of the file.")


class EditFileArgs(ToolArgs):
    path: str = Field(description=f"File path. {PATH_NOTE}")
    old: str = Field(description="The exact text to replace; must occur exactly once.")
    new: str = Field(description="The replacement text.")


async def _write(ctx: ToolContext, args: WriteFileArgs) -> ToolOutput:
    return await write_file(ctx.sandbox, args.path, args.content)


async def _edit(ctx: ToolContext, args: EditFileArgs) -> ToolOutput:
    return await edit_file(ctx.sandbox, args.path, args.old, args.new)


WRITE_FILE = Tool(
    name="write_file",
    description="Create or overwrite a file in the workspace with the given content (UTF-8). Parent directories are "
    "created as needed.",
    args=WriteFileArgs,
    handler=_write,
    read_only=False,
)
EDIT_FILE = Tool(
    name="edit_file",
    description="Edit a file by replacing one exact occurrence of `old` with `new`. Fails if `old` is not found or "
    "occurs more than once (then include more surrounding lines in `old`). Whitespace and indentation must "
    "match exactly; read the file first.",
    args=EditFileArgs,
    handler=_edit,
    read_only=False,
)
