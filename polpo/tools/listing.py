"""The ``list_dir`` tool: a directory's entries, sorted, directories with a ``/`` suffix, at most
:data:`MAX_LIST_ENTRIES`. A symlink leading out of the workspace is named as such and never followed."""

from __future__ import annotations

import os

from pydantic import Field

from polpo.tools.fileio import PATH_NOTE
from polpo.tools.output import ToolError, ToolOutput, in_thread
from polpo.tools.registry import Tool, ToolArgs, ToolContext
from polpo.tools.sandbox import Sandbox

__all__ = ["LIST_DIR", "MAX_LIST_ENTRIES", "ListDirArgs", "list_dir"]

MAX_LIST_ENTRIES = 1_000


async def list_dir(sb: Sandbox, path: str = ".") -> ToolOutput:
    """The entries of a directory, sorted by name, directories with a ``/`` suffix."""
    return await in_thread("list_dir", lambda: _list_dir_sync(sb, path))


def _list_dir_sync(sb: Sandbox, path: str) -> ToolOutput:
    real = sb.resolve(path, must_exist=True)
    rel = sb.relative(real)
    if not real.is_dir():
        raise ToolError(f"{rel!r} is not a directory; use read_file to read a file", "not_a_directory")
    with os.scandir(real) as it:
        entries = sorted(it, key=lambda e: e.name)
    total = len(entries)
    shown = [_describe_entry(sb, entry) for entry in entries[:MAX_LIST_ENTRIES]]
    lines = list(shown) if shown else [f"({rel} is empty)"]
    truncated = total > MAX_LIST_ENTRIES
    if truncated:
        lines.append(f"[truncated: {MAX_LIST_ENTRIES} of {total} entries shown; use glob to narrow down]")
    return ToolOutput(
        ok=True,
        text="\n".join(lines),
        data={"path": rel, "entries": shown, "total": total, "truncated": truncated},
    )


def _describe_entry(sb: Sandbox, entry: os.DirEntry[str]) -> str:
    try:
        if entry.is_symlink():
            target = os.path.realpath(entry.path)
            if not sb.contains(target):
                return f"{entry.name} (symbolic link leading outside the workspace; not accessible)"
            return entry.name + ("/" if os.path.isdir(target) else "")
        return entry.name + ("/" if entry.is_dir(follow_symlinks=False) else "")
    except OSError:
        return entry.name


class ListDirArgs(ToolArgs):
    path: str = Field(".", description=f"Directory path (default '.', the root). {PATH_NOTE}")


async def _run(ctx: ToolContext, args: ListDirArgs) -> ToolOutput:
    return await list_dir(ctx.sandbox, args.path)


LIST_DIR = Tool(
    name="list_dir",
    description="List a directory of the workspace: entry names sorted, directories ending in '/' "
    f"(at most {MAX_LIST_ENTRIES}).",
    args=ListDirArgs,
    handler=_run,
    read_only=True,
)
