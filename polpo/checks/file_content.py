"""``file_content``: a workspace file holds what it should (agent-judge's ``file-content``).

``{"type": "file_content", "path": "hello.txt", "expected": "Hello World!", "match": "exact"}`` with ``match``:

(``EXACT`` / ``CONTAINS`` as agent-judge writes them are accepted too.)

* ``exact`` (default) — the whole file equals ``expected``, except that **one** trailing line break is ignored on
  each side (``\\n`` or ``\\r\\n``: ``echo`` and editors add one; ``"Hello\\n"`` matches ``"Hello"``, ``"Hello\\n\\n"``
  does not). Everything else counts, whitespace included.
* ``contains`` — ``expected`` occurs somewhere in the file.
* ``regex`` — Python's ``re.search(expected, text, re.MULTILINE)`` finds a match (the pattern is checked when the
  mission is validated).

The file is read as UTF-8 (undecodable bytes shown as �), at most :data:`MAX_BYTES`, confined to the workspace
like every path. A failure says why: the first differing line and column with a short unified diff for
``exact``, the start of the file for ``contains`` and ``regex``. Ranked with the cheap checks.

Only a regular file is read, and it is opened without blocking: a FIFO under the expected name (an agent's, or a
process it left behind) fails the check at once instead of holding it forever. A file of at most
:data:`INLINE_BYTES` is read and compared on the event loop (tens of microseconds), a larger one in a worker
thread: a thread's round trip costs about half a millisecond on a busy machine (see :mod:`polpo.checks.file_exists`).
"""

from __future__ import annotations

import difflib
import os
import re
from collections.abc import Collection, Mapping
from pathlib import Path
from typing import Any

import anyio

from polpo.checks.base import CheckContext, CheckOutcome, CheckType, Correction
from polpo.checks.expectations import FileContentExpectation, relative_path_problem
from polpo.checks.labels import truncate
from polpo.tools.fileio import open_regular
from polpo.tools.output import ToolError
from polpo.tools.sandbox import Sandbox, SandboxError

__all__ = ["INLINE_BYTES", "MAX_BYTES", "FileContent", "FileContentExpectation", "compare", "first_mismatch"]

MAX_BYTES = 1_000_000
INLINE_BYTES = 64 * 1024  # a file up to this size is read on the loop; a larger one in a worker thread
DIFF_LINES = 20
HEAD_CHARS = 400


def _strip_one_newline(text: str) -> str:
    if text.endswith("\r\n"):
        return text[:-2]
    return text[:-1] if text.endswith("\n") else text


def first_mismatch(actual: str, expected: str) -> str:
    """Where two texts first differ: ``line L, column C: expected 'x', found 'y'`` (or which one is longer)."""
    a_lines, e_lines = actual.split("\n"), expected.split("\n")
    for n, (a, e) in enumerate(zip(a_lines, e_lines, strict=False), 1):
        if a != e:
            col = next((i for i, (x, y) in enumerate(zip(a, e, strict=False)) if x != y), min(len(a), len(e)))
            return (f"line {n}, column {col + 1}: expected {e[col:col + 30]!r}, found {a[col:col + 30]!r}")
    if len(a_lines) > len(e_lines):
        return f"line {len(e_lines) + 1}: the file goes on where the expected text ends: {a_lines[len(e_lines)][:30]!r}"
    return f"line {len(a_lines) + 1}: the file ends where the expected text goes on: {e_lines[len(a_lines)][:30]!r}"


def compare(text: str, exp: FileContentExpectation) -> tuple[bool, str, str | None]:
    """(passed, message, details) of a file's text against the expectation. Pure."""
    if exp.match == "exact":
        actual, expected = _strip_one_newline(text), _strip_one_newline(exp.expected)
        if actual == expected:
            return True, f"{exp.path} has the expected content", None
        diff = list(difflib.unified_diff(expected.split("\n"), actual.split("\n"), "expected", exp.path,
                                         lineterm="", n=1))
        shown = "\n".join(diff[:DIFF_LINES]) + ("\n…" if len(diff) > DIFF_LINES else "")
        return False, f"{exp.path} differs from the expected content at {first_mismatch(actual, expected)}", shown
    head = text[:HEAD_CHARS] + ("…" if len(text) > HEAD_CHARS else "")
    if exp.match == "contains":
        if exp.expected in text:
            return True, f"{exp.path} contains {truncate(exp.expected, 60)!r}", None
        return False, f"{exp.path} does not contain {truncate(exp.expected, 60)!r}", f"start of the file:\n{head}"
    if re.search(exp.expected, text, re.MULTILINE):
        return True, f"{exp.path} matches /{truncate(exp.expected, 60)}/", None
    return False, f"{exp.path} has no match for /{truncate(exp.expected, 60)}/", f"start of the file:\n{head}"


def _open(workspace: Path, path: str) -> tuple[int, int]:
    """The open descriptor and size of the regular file ``path`` in ``workspace`` (never blocks on a FIFO)."""
    fd = open_regular(Sandbox(workspace).resolve(path, must_exist=True), os.O_RDONLY)
    return fd, os.fstat(fd).st_size


def _read(fd: int) -> str:
    with open(fd, "rb", closefd=True) as f:
        return f.read(MAX_BYTES).decode("utf-8", errors="replace")


async def _compared(fd: int, size: int, exp: FileContentExpectation) -> tuple[bool, str, str | None]:
    """The file read and compared: here when small, else both in a worker thread (a diff or a regex over a
    megabyte would hold the loop); ``fd`` is closed either way."""
    if size <= INLINE_BYTES:
        return compare(_read(fd), exp)
    began = False

    def read_and_compare() -> tuple[bool, str, str | None]:
        nonlocal began
        began = True
        return compare(_read(fd), exp)

    try:
        return await anyio.to_thread.run_sync(read_and_compare)
    finally:
        if not began:  # cancelled while waiting for a thread
            os.close(fd)


class FileContent(CheckType):
    type = "file_content"
    rank = 0
    model = FileContentExpectation
    correctable = ("path",)

    def label(self, exp: FileContentExpectation) -> str:
        return truncate(f"{exp.path} ({exp.match})")

    def describe(self, exp: Mapping[str, Any]) -> str:
        how = {"exact": "is exactly", "contains": "contains", "regex": "matches the pattern"}
        return f"file_content: {exp.get('path')} {how.get(str(exp.get('match') or 'exact'), 'is')} " \
               f"{truncate(str(exp.get('expected')), 120)!r}"

    async def run(self, exp: FileContentExpectation, ctx: CheckContext) -> CheckOutcome:
        start = ctx.clock.monotonic()
        try:
            passed, message, details = await _compared(*_open(ctx.workspace, exp.path), exp)
        except SandboxError as e:
            why = "does not exist" if "does not exist" in str(e) else str(e)
            return CheckOutcome(self.type, self.label(exp), False, f"{exp.path} {why}")
        except ToolError as e:  # a FIFO, a device, a folder; a symbolic link swapped in after the sandbox's check
            return CheckOutcome(self.type, self.label(exp), False, f"{exp.path} cannot be read: {e}")
        except OSError as e:
            return CheckOutcome(self.type, self.label(exp), False, f"{exp.path} cannot be read: {e.strerror or e}")
        return CheckOutcome(self.type, self.label(exp), passed, message, details,
                            round(max(0.0, ctx.clock.monotonic() - start), 4))

    def correct(self, exp: Mapping[str, Any], field_name: str, value: Any, *, floor: float,
                known_files: Collection[str] | None) -> Correction | str:
        """Only the path, to a file the attempt created or changed."""
        if not isinstance(value, str) or not value.strip() or relative_path_problem(value) is not None:
            return "path must be relative to the workspace, without '..'"
        if known_files is not None and value.strip() not in set(known_files):
            return f"{value} is not among the files the attempt created or changed"
        if value.strip() == exp.get("path"):
            return "the new path is the same as the old one"
        return Correction({**exp, "path": value.strip()}, exp.get("path"), value.strip())
