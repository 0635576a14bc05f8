"""Workspace file tools shared by LLM agents and LLM reviewers: plain async functions plus their JSON schemas.

Every tool takes a :class:`~polpo.tools.sandbox.Sandbox` and returns a :class:`ToolOutput`; none of them raises
for a bad request (a refused path, a missing file, an invalid regex, a non-unique edit…): the error comes back as
``ToolOutput(ok=False, text="Error: …")`` so the caller can hand it to the model as the tool result. Only
cancellation propagates.

Bounds (module constants, so callers and docs can quote them):

* ``read_file`` returns at most :data:`MAX_READ_BYTES` of text and ``limit`` (≤ :data:`MAX_READ_LINES`) lines,
  each cut at :data:`MAX_LINE_CHARS`; it scans at most :data:`MAX_SCAN_BYTES` to reach ``offset``; binary files
  (a NUL byte in the first 8 KiB) are refused.
* ``list_dir`` shows at most :data:`MAX_LIST_ENTRIES` entries.
* ``glob`` and ``grep`` walk the tree in Python (``os.scandir``; no shell, no external program), skip
  :data:`~polpo.workspace.SKIP_DIRS` (``.git``, ``node_modules``…) unless the pattern names them, never follow a
  symlink out of the workspace nor descend into a symlinked directory, and stop after :data:`MAX_GLOB_RESULTS` /
  :data:`MAX_GREP_MATCHES` results or :data:`SEARCH_TIME_BUDGET` seconds (the reply then says it is partial).
  A worker still busy :data:`HARD_STOP_GRACE` seconds after the budget (a stalled file system) is abandoned and
  the tool answers with an error.
* ``grep`` skips files larger than :data:`MAX_GREP_FILE_BYTES` and binary files, searches each line in its first
  :data:`MAX_GREP_SEARCH_CHARS` characters, and refuses regexes with nested repeats (``(a+)+``): Python's ``re``
  holds the GIL while it matches, so a catastrophically backtracking pattern would stall the whole daemon, and no
  time budget could interrupt it. (Other pathological shapes, such as overlapping alternatives under a repeat,
  ``(a|a)*``, are not detected.)
* ``write_file`` / ``edit_file`` handle at most :data:`MAX_WRITE_BYTES`.

Files are opened with ``O_NOFOLLOW | O_NONBLOCK`` on the sandbox-resolved real path and must be regular files, so
a symlink swapped in after the check, a FIFO or a device is refused rather than followed or blocked on. Blocking
I/O runs in worker threads (``anyio.to_thread.run_sync``).
"""

from __future__ import annotations

import errno
import fnmatch
import importlib
import json
import os
import re
import stat
import threading
import time
from collections.abc import Callable, Collection, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

import anyio
import anyio.to_thread

from polpo.tools.sandbox import Sandbox, SandboxError
from polpo.workspace import SKIP_DIRS

__all__ = [
    "ALL_TOOLS",
    "HARD_STOP_GRACE",
    "MAX_GLOB_RESULTS",
    "MAX_GREP_FILE_BYTES",
    "MAX_GREP_MATCHES",
    "MAX_GREP_SEARCH_CHARS",
    "MAX_LINE_CHARS",
    "MAX_LIST_ENTRIES",
    "MAX_READ_BYTES",
    "MAX_READ_LINES",
    "MAX_SCAN_BYTES",
    "MAX_WRITE_BYTES",
    "READ_ONLY_TOOLS",
    "SEARCH_TIME_BUDGET",
    "TOOL_SCHEMAS",
    "WRITE_TOOLS",
    "ToolOutput",
    "dispatch",
    "edit_file",
    "glob",
    "grep",
    "list_dir",
    "read_file",
    "tool_schemas",
    "write_file",
]

MAX_READ_BYTES = 200_000
MAX_READ_LINES = 2_000
DEFAULT_READ_LIMIT = 500
MAX_LINE_CHARS = 2_000
MAX_SCAN_BYTES = 64 * 1024 * 1024
MAX_LIST_ENTRIES = 1_000
MAX_GLOB_RESULTS = 200
MAX_GREP_MATCHES = 100
MAX_GREP_FILE_BYTES = 2 * 1024 * 1024
MAX_GREP_LINE_CHARS = 400
MAX_GREP_SEARCH_CHARS = 10_000
SEARCH_TIME_BUDGET = 5.0
HARD_STOP_GRACE = 2.0
MAX_WRITE_BYTES = 10 * 1024 * 1024
_SNIFF_BYTES = 8192

READ_ONLY_TOOLS: tuple[str, ...] = ("read_file", "glob", "grep", "list_dir")
WRITE_TOOLS: tuple[str, ...] = ("write_file", "edit_file")
ALL_TOOLS: tuple[str, ...] = READ_ONLY_TOOLS + WRITE_TOOLS


@dataclass(frozen=True, slots=True)
class ToolOutput:
    """A tool's result. ``text`` is what the model sees; ``data`` is structured detail for transcripts and callers.

    On failure ``text`` starts with ``"Error: "`` and ``data["error"]`` names the kind (``"sandbox"``,
    ``"not_found"``, ``"invalid_arguments"``, ``"unknown_tool"``, ``"io"``, ``"timeout"``, …).
    """

    ok: bool
    text: str
    data: dict[str, Any] = field(default_factory=dict)


class _ToolError(Exception):
    def __init__(self, message: str, kind: str = "invalid_request") -> None:
        super().__init__(message)
        self.kind = kind


def _fail(message: str, kind: str, **data: Any) -> ToolOutput:
    return ToolOutput(ok=False, text=f"Error: {message}", data={"error": kind, **data})


def _sandbox_kind(err: SandboxError) -> str:
    return "not_found" if "does not exist" in str(err) else "sandbox"


async def _in_thread(tool: str, fn: Callable[[], ToolOutput]) -> ToolOutput:
    """Run ``fn`` in a worker thread; turn every anticipated failure into an ``ok=False`` output."""
    try:
        return await anyio.to_thread.run_sync(fn)
    except Exception as exc:
        return _convert_error(tool, exc)


def _convert_error(tool: str, exc: Exception) -> ToolOutput:
    if isinstance(exc, SandboxError):
        return _fail(str(exc), _sandbox_kind(exc))
    if isinstance(exc, _ToolError):
        return _fail(str(exc), exc.kind)
    if isinstance(exc, OSError):
        return _fail(f"{tool} failed: {exc.strerror or type(exc).__name__}", "io")
    return _fail(f"{tool} failed unexpectedly: {type(exc).__name__}: {exc}", "internal")


async def _bounded_search(
    tool: str, fn: Callable[[threading.Event], ToolOutput], budget: float
) -> ToolOutput:
    """Run a search worker with a hard stop: if it outlives ``budget + HARD_STOP_GRACE`` it is abandoned."""
    stop = threading.Event()
    result: ToolOutput | None = None
    try:
        with anyio.move_on_after(max(budget, 0.0) + HARD_STOP_GRACE):
            result = await anyio.to_thread.run_sync(fn, stop, abandon_on_cancel=True)
    except Exception as exc:
        return _convert_error(tool, exc)
    finally:
        stop.set()
    if result is None:
        return _fail(
            f"{tool} did not finish within {budget + HARD_STOP_GRACE:.0f} s and was abandoned; narrow the search",
            "timeout",
        )
    return result


# --------------------------------------------------------------------------------------------------- file access


def _open_regular(real: Path, flags: int, mode: int = 0o644) -> int:
    """Open ``real`` without following a final symlink and without blocking on FIFOs; regular files only."""
    try:
        fd = os.open(real, flags | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, mode)
    except OSError as exc:
        if exc.errno == errno.ELOOP:  # the final component became a symlink after the sandbox check
            raise _ToolError("refused to follow a symbolic link", "sandbox") from exc
        raise
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise _ToolError("not a regular file", "not_a_file")
        os.set_blocking(fd, True)
    except BaseException:
        os.close(fd)
        raise
    return fd


def _reader(real: Path) -> IO[bytes]:
    return os.fdopen(_open_regular(real, os.O_RDONLY), "rb")


def _is_binary(head: bytes) -> bool:
    return b"\x00" in head


def _require_file(sb: Sandbox, path: str) -> tuple[Path, str]:
    real = sb.resolve(path, must_exist=True)
    rel = sb.relative(real)
    if real.is_dir():
        raise _ToolError(
            f"{rel!r} is a directory; use list_dir or glob to see what it contains", "is_a_directory"
        )
    if not real.is_file():
        raise _ToolError(f"{rel!r} is not a regular file", "not_a_file")
    return real, rel


# --------------------------------------------------------------------------------------------------- read_file


async def read_file(sb: Sandbox, path: str, offset: int = 1, limit: int = DEFAULT_READ_LIMIT) -> ToolOutput:
    """Lines ``offset`` … ``offset+limit-1`` (1-based) of a text file, numbered ``"  12| text"``."""
    if offset < 1:
        return _fail(f"offset must be 1 or more (a 1-based line number), got {offset}", "invalid_arguments")
    if limit < 1:
        return _fail(f"limit must be 1 or more, got {limit}", "invalid_arguments")
    return await _in_thread(
        "read_file", lambda: _read_file_sync(sb, path, offset, min(limit, MAX_READ_LINES))
    )


def _read_file_sync(sb: Sandbox, path: str, offset: int, limit: int) -> ToolOutput:
    real, rel = _require_file(sb, path)
    shown: list[tuple[int, str]] = []
    used = 0
    lineno = 0
    scanned = 0
    eof = False
    stopped_by: str | None = None  # "lines" | "bytes" | "scan"
    with _reader(real) as f:
        if _is_binary(f.read(_SNIFF_BYTES)):
            return _fail(
                f"{rel!r} looks like a binary file; read_file shows text files only", "binary", path=rel
            )
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
            return ToolOutput(
                ok=True, text=f"({rel} is empty)", data=_read_data(rel, offset, 0, None, False, 0)
            )
        if stopped_by == "scan":
            return _fail(
                f"offset {offset} is too far into {rel!r}: read_file scans at most {MAX_SCAN_BYTES} bytes; "
                "use grep to find the lines you need",
                "too_large",
                path=rel,
            )
        return _fail(
            f"offset {offset} is past the end of {rel!r} ({lineno} lines)", "invalid_arguments", path=rel
        )
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


# --------------------------------------------------------------------------------------------------- list_dir


async def list_dir(sb: Sandbox, path: str = ".") -> ToolOutput:
    """The entries of a directory, sorted by name, directories with a ``/`` suffix."""
    return await _in_thread("list_dir", lambda: _list_dir_sync(sb, path))


def _list_dir_sync(sb: Sandbox, path: str) -> ToolOutput:
    real = sb.resolve(path, must_exist=True)
    rel = sb.relative(real)
    if not real.is_dir():
        raise _ToolError(f"{rel!r} is not a directory; use read_file to read a file", "not_a_directory")
    with os.scandir(real) as it:
        entries = sorted(it, key=lambda e: e.name)
    total = len(entries)
    shown: list[str] = []
    for entry in entries[:MAX_LIST_ENTRIES]:
        shown.append(_describe_entry(sb, entry))
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


# --------------------------------------------------------------------------------------------------- glob matching


def _expand_braces(pattern: str, _depth: int = 0) -> list[str]:
    """``"*.{ts,tsx}"`` → ``["*.ts", "*.tsx"]`` (innermost-last, bounded); no braces → ``[pattern]``."""
    m = re.search(r"\{([^{}]*,[^{}]*)\}", pattern)
    if m is None or _depth > 8:
        return [pattern]
    out: list[str] = []
    for alt in m.group(1).split(","):
        out.extend(_expand_braces(pattern[: m.start()] + alt + pattern[m.end() :], _depth + 1))
        if len(out) > 64:
            break
    return out[:64]


class _PathPattern:
    """A glob over ``/``-separated segments: ``*``, ``?``, ``[…]`` within a segment, ``**`` for any depth.

    Matching is an NFA over pattern positions, carried down the directory walk, so a directory is entered only
    when something below it can still match.
    """

    def __init__(self, pattern: str) -> None:
        segs: list[str] = []
        for seg in pattern.split("/"):
            if seg in ("", "."):
                continue
            if seg == "**" and segs and segs[-1] == "**":
                continue
            segs.append(seg)
        self.segments = segs
        self.literals = frozenset(s for s in segs if not re.search(r"[*?\[]", s))
        self._regex: list[re.Pattern[str] | None] = [
            None if s == "**" else re.compile(fnmatch.translate(s)) for s in segs
        ]

    @property
    def size(self) -> int:
        return len(self.segments)

    def start(self) -> frozenset[int]:
        return self._closure({0})

    def _closure(self, states: set[int]) -> frozenset[int]:
        out = set(states)
        for i in sorted(states):
            j = i
            while j < len(self.segments) and self.segments[j] == "**":
                j += 1
                out.add(j)
        return frozenset(out)

    def step(self, states: frozenset[int], name: str) -> frozenset[int]:
        nxt: set[int] = set()
        for i in states:
            if i >= len(self.segments):
                continue
            rx = self._regex[i]
            if rx is None:
                nxt.add(i)
            elif rx.match(name):
                nxt.add(i + 1)
        return self._closure(nxt) if nxt else frozenset()

    def accepts(self, states: frozenset[int]) -> bool:
        return len(self.segments) in states

    def can_continue(self, states: frozenset[int]) -> bool:
        return any(i < len(self.segments) for i in states)


@dataclass(slots=True)
class _Walk:
    """Outcome flags of a bounded walk."""

    timed_out: bool = False
    entries_seen: int = 0


def _walk(
    sb: Sandbox,
    base: Path,
    patterns: list[_PathPattern],
    deadline: float,
    stop: threading.Event,
    report: _Walk,
) -> Iterator[tuple[str, Path, bool]]:
    """Yield ``(relative path, real path, is_dir)`` for entries under ``base`` matched by any pattern.

    Symlinks leading outside the workspace are skipped without being opened; symlinked directories inside it are
    reported but not descended into (no loops); :data:`SKIP_DIRS` are skipped unless a pattern names them.
    """
    base_rel = sb.relative(base)
    prefix = "" if base_rel == "." else base_rel + "/"
    literal_names = frozenset(name for p in patterns for name in p.literals)
    starts = [p.start() for p in patterns]
    stack: list[tuple[Path, str, list[frozenset[int]]]] = [(base, prefix, starts)]
    while stack:
        if stop.is_set() or time.monotonic() > deadline:
            report.timed_out = True
            return
        dir_path, rel_prefix, states = stack.pop()
        try:
            with os.scandir(dir_path) as it:
                entries = sorted(it, key=lambda e: e.name)
        except OSError:
            continue
        subdirs: list[tuple[Path, str, list[frozenset[int]]]] = []
        for entry in entries:
            report.entries_seen += 1
            if report.entries_seen % 256 == 0 and (stop.is_set() or time.monotonic() > deadline):
                report.timed_out = True
                return
            new_states = [p.step(s, entry.name) if s else s for p, s in zip(patterns, states, strict=True)]
            if not any(new_states):
                continue
            rel = rel_prefix + entry.name
            try:
                if entry.is_symlink():
                    target = os.path.realpath(entry.path)
                    if not sb.contains(target):
                        continue  # never touch what lies outside
                    is_dir = os.path.isdir(target)
                    descend = False
                    real = Path(target)
                else:
                    is_dir = entry.is_dir(follow_symlinks=False)
                    descend = is_dir
                    real = Path(entry.path)
            except OSError:
                continue
            if is_dir and entry.name in SKIP_DIRS and entry.name not in literal_names:
                continue
            if any(p.accepts(s) for p, s in zip(patterns, new_states, strict=True)):
                yield rel, real, is_dir
            if descend and any(p.can_continue(s) for p, s in zip(patterns, new_states, strict=True)):
                subdirs.append((real, rel + "/", new_states))
        stack.extend(reversed(subdirs))


def _check_pattern(pattern: str, what: str) -> None:
    if not pattern or not pattern.strip():
        raise _ToolError(f"{what} is empty", "invalid_arguments")
    if "\x00" in pattern:
        raise _ToolError(f"{what} contains a NUL byte", "invalid_arguments")
    if pattern.startswith(("/", "~")) or os.path.isabs(pattern):
        raise _ToolError(
            f"absolute {what} {pattern!r} refused; patterns are relative to the workspace root (e.g. 'src/**/*.py')",
            "sandbox",
        )
    if ".." in pattern.split("/"):
        raise _ToolError(
            f"{what} {pattern!r} refused: '..' is not allowed; stay inside the workspace", "sandbox"
        )


# --------------------------------------------------------------------------------------------------- glob


async def glob(sb: Sandbox, pattern: str, *, time_budget: float = SEARCH_TIME_BUDGET) -> ToolOutput:
    """Workspace-relative paths matching ``pattern`` (``*``, ``?``, ``[…]``, ``**``, ``{a,b}``); dirs end in ``/``."""
    return await _bounded_search(
        "glob", lambda stop: _glob_sync(sb, pattern, time.monotonic() + time_budget, stop), time_budget
    )


def _glob_sync(sb: Sandbox, pattern: str, deadline: float, stop: threading.Event) -> ToolOutput:
    _check_pattern(pattern, "pattern")
    patterns = [_PathPattern(p) for p in _expand_braces(pattern)]
    patterns = [p for p in patterns if p.size] or [_PathPattern("*")]
    report = _Walk()
    found: list[str] = []
    truncated = False
    for rel, _real, is_dir in _walk(sb, sb.root, patterns, deadline, stop, report):
        if len(found) >= MAX_GLOB_RESULTS:
            truncated = True
            break
        found.append(rel + "/" if is_dir else rel)
    lines = list(found) if found else [f"no paths match {pattern!r}"]
    if truncated:
        lines.append(f"[truncated: first {MAX_GLOB_RESULTS} matches shown; use a narrower pattern]")
    if report.timed_out:
        lines.append(
            "[partial: the search time budget ran out; the list may be incomplete — narrow the pattern]"
        )
    return ToolOutput(
        ok=True,
        text="\n".join(lines),
        data={"pattern": pattern, "paths": found, "truncated": truncated, "partial": report.timed_out},
    )


# --------------------------------------------------------------------------------------------------- grep


async def grep(
    sb: Sandbox,
    pattern: str,
    path: str = ".",
    include: str | None = None,
    *,
    time_budget: float = SEARCH_TIME_BUDGET,
) -> ToolOutput:
    """Lines matching the Python regex ``pattern`` as ``file:line: text``, under ``path`` (a file or directory).

    ``include`` filters file names (``"*.py"``; with a ``/`` it is matched against the path relative to ``path``).
    """
    try:
        rx = re.compile(pattern)
    except (re.error, TypeError, ValueError, OverflowError, RecursionError) as exc:
        return _fail(f"invalid regular expression {pattern!r}: {exc}", "invalid_arguments")
    if _has_nested_repeat(pattern):
        return _fail(
            f"regular expression {pattern!r} repeats a group that itself repeats (like '(a+)+'), which can take "
            "exponential time; simplify it (e.g. 'a+' instead of '(a+)+')",
            "unsafe_regex",
        )
    return await _bounded_search(
        "grep",
        lambda stop: _grep_sync(sb, rx, path, include, time.monotonic() + time_budget, stop),
        time_budget,
    )


def _has_nested_repeat(pattern: str) -> bool:
    """Whether a variable repeat sits inside another repeat (star height ≥ 2): the classic catastrophic-backtracking
    shape. ``re`` holds the GIL while matching, so such a pattern would freeze the whole process, not one thread;
    it is refused up front instead."""
    try:
        parser: Any = importlib.import_module("re._parser")
        tree: Any = parser.parse(pattern)
    except Exception:
        return False
    unbounded = parser.MAXREPEAT

    def walk(items: Any, inside: bool) -> bool:
        for op, av in items:
            name = str(op)
            if name in ("MAX_REPEAT", "MIN_REPEAT"):
                lo, hi, body = av
                repeats = hi == unbounded or hi > 1
                if inside and repeats and lo != hi:
                    return True
                if walk(body, inside or repeats):
                    return True
            elif name == "SUBPATTERN":
                if walk(av[3], inside):
                    return True
            elif name == "BRANCH":
                if any(walk(branch, inside) for branch in av[1]):
                    return True
            elif name in ("ASSERT", "ASSERT_NOT"):
                if walk(av[1], inside):
                    return True
            elif name == "GROUPREF_EXISTS" and any(walk(b, inside) for b in av[1:] if b is not None):
                return True
        return False

    try:
        return walk(tree, False)
    except Exception:  # an unexpected parser shape: do not block the search on our own analysis
        return False


def _grep_sync(
    sb: Sandbox,
    rx: re.Pattern[str],
    path: str,
    include: str | None,
    deadline: float,
    stop: threading.Event,
) -> ToolOutput:
    base = sb.resolve(path, must_exist=True)
    base_rel = sb.relative(base)
    report = _Walk()
    if base.is_dir():
        if include:
            _check_pattern(include, "include pattern")
            pats = [p if "/" in p else "**/" + p for p in _expand_braces(include)]
        else:
            pats = ["**/*"]
        files: Iterator[tuple[str, Path, bool]] = _walk(
            sb, base, [_PathPattern(p) for p in pats], deadline, stop, report
        )
    elif base.is_file():
        files = iter([(base_rel, base, False)])
    else:
        raise _ToolError(f"{base_rel!r} is neither a file nor a directory", "not_a_file")

    matches: list[str] = []
    files_searched = 0
    skipped_large = 0
    skipped_binary = 0
    truncated = False
    timed_out = False
    for rel, real, is_dir in files:
        if is_dir:
            continue
        if stop.is_set() or time.monotonic() > deadline:
            timed_out = True
            break
        try:
            if real.stat().st_size > MAX_GREP_FILE_BYTES:
                skipped_large += 1
                continue
            with _reader(real) as f:
                blob = f.read(MAX_GREP_FILE_BYTES + 1)
        except (OSError, _ToolError):
            continue
        if len(blob) > MAX_GREP_FILE_BYTES:
            skipped_large += 1
            continue
        if _is_binary(blob[:_SNIFF_BYTES]):
            skipped_binary += 1
            continue
        files_searched += 1
        for lineno, line in enumerate(blob.decode("utf-8", errors="replace").split("\n"), start=1):
            if lineno % 1000 == 0 and (stop.is_set() or time.monotonic() > deadline):
                timed_out = True
                break
            m = rx.search(line, 0, MAX_GREP_SEARCH_CHARS)
            if m is None:
                continue
            if len(matches) >= MAX_GREP_MATCHES:
                truncated = True
                break
            matches.append(f"{rel}:{lineno}: {_clip_line(line.rstrip(chr(13)), m.start())}")
        if truncated or timed_out:
            break
    timed_out = timed_out or report.timed_out
    lines = list(matches) if matches else [f"no matches for {rx.pattern!r} in {base_rel!r}"]
    if truncated:
        lines.append(f"[truncated: first {MAX_GREP_MATCHES} matches shown; use a narrower pattern or path]")
    if timed_out:
        lines.append("[partial: the search time budget ran out; results may be incomplete — narrow the path]")
    if skipped_large or skipped_binary:
        lines.append(
            f"[skipped {skipped_large} file(s) over {MAX_GREP_FILE_BYTES // (1024 * 1024)} MB "
            f"and {skipped_binary} binary file(s)]"
        )
    return ToolOutput(
        ok=True,
        text="\n".join(lines),
        data={
            "pattern": rx.pattern,
            "path": base_rel,
            "matches": matches,
            "files_searched": files_searched,
            "skipped_large": skipped_large,
            "skipped_binary": skipped_binary,
            "truncated": truncated,
            "partial": timed_out,
        },
    )


def _clip_line(line: str, at: int) -> str:
    if len(line) <= MAX_GREP_LINE_CHARS:
        return line
    start = max(0, at - 100)
    end = start + MAX_GREP_LINE_CHARS
    return ("…" if start else "") + line[start:end] + ("…" if end < len(line) else "")


# --------------------------------------------------------------------------------------------------- write / edit


async def write_file(sb: Sandbox, path: str, content: str) -> ToolOutput:
    """Create or overwrite a file with ``content`` (UTF-8), creating parent directories inside the workspace."""
    return await _in_thread("write_file", lambda: _write_file_sync(sb, path, content))


def _write_bytes(sb: Sandbox, real: Path, data: bytes) -> None:
    # re-check after any mkdir: the real location must still be inside the workspace
    if not sb.contains(os.path.realpath(real)):
        raise _ToolError("refused: the path now leads outside the workspace", "sandbox")
    fd = _open_regular(real, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
    with os.fdopen(fd, "wb") as f:
        f.write(data)


def _write_file_sync(sb: Sandbox, path: str, content: str) -> ToolOutput:
    real = sb.resolve(path)
    rel = sb.relative(real)
    if real == sb.root or real.is_dir():
        raise _ToolError(f"{rel!r} is a directory; give a file path", "is_a_directory")
    data = content.encode("utf-8")
    if len(data) > MAX_WRITE_BYTES:
        raise _ToolError(
            f"content is {len(data)} bytes; write_file accepts at most {MAX_WRITE_BYTES}", "too_large"
        )
    created = not os.path.lexists(real)
    try:
        real.parent.mkdir(parents=True, exist_ok=True)
    except (FileExistsError, NotADirectoryError) as exc:
        raise _ToolError(
            f"cannot create the parent directory of {rel!r}: a file is in the way", "io"
        ) from exc
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
    return await _in_thread("edit_file", lambda: _edit_file_sync(sb, path, old, new))


def _count_occurrences(text: str, sub: str, cap: int = 1000) -> int:
    n, i = 0, text.find(sub)
    while i != -1 and n < cap:
        n += 1
        i = text.find(sub, i + 1)
    return n


def _edit_file_sync(sb: Sandbox, path: str, old: str, new: str) -> ToolOutput:
    if old == "":
        raise _ToolError(
            "old is empty; give the exact text to replace (to create a file, use write_file)",
            "invalid_arguments",
        )
    real, rel = _require_file(sb, path)
    with _reader(real) as f:
        blob = f.read(MAX_WRITE_BYTES + 1)
    if len(blob) > MAX_WRITE_BYTES:
        raise _ToolError(f"{rel!r} is larger than {MAX_WRITE_BYTES} bytes; edit_file refuses it", "too_large")
    if _is_binary(blob[:_SNIFF_BYTES]):
        raise _ToolError(f"{rel!r} looks like a binary file; edit_file edits text files only", "binary")
    try:
        text = blob.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise _ToolError(f"{rel!r} is not valid UTF-8 text", "binary") from exc
    count = _count_occurrences(text, old)
    if count == 0:
        hint = ""
        if "\r\n" in text and "\r\n" not in old and "\n" in old:
            hint = " (the file uses CRLF line endings)"
        elif old.strip() and old.strip() in text:
            hint = " (it does occur with different leading/trailing whitespace; check the indentation)"
        raise _ToolError(
            f"old text not found in {rel!r}{hint}; read the file and copy the exact text to replace",
            "not_found",
        )
    if count > 1:
        shown = f"{count}" if count < 1000 else "1000+"
        raise _ToolError(
            f"old text found {shown} times in {rel!r}; include more context so it matches exactly once",
            "not_unique",
        )
    at = text.find(old)
    updated = text[:at] + new + text[at + len(old) :]
    _write_bytes(sb, real, updated.encode("utf-8"))
    line = text.count("\n", 0, at) + 1
    return ToolOutput(
        ok=True,
        text=f"edited {rel}: replaced 1 occurrence at line {line}",
        data={"path": rel, "line": line, "replacements": 1},
    )


# --------------------------------------------------------------------------------------------------- schemas


def _fn(name: str, description: str, properties: dict[str, Any], required: list[str]) -> dict[str, Any]:
    return {
        "type": "function",
        "function": {
            "name": name,
            "description": description,
            "parameters": {
                "type": "object",
                "properties": properties,
                "required": required,
                "additionalProperties": False,
            },
        },
    }


_PATH_NOTE = "Relative to the workspace root; absolute paths and '..' are refused."

#: OpenAI function-tool objects (``{"type": "function", "function": {name, description, parameters}}``), ready
#: for ``litellm.acompletion(tools=[...])``; see :func:`tool_schemas`.
TOOL_SCHEMAS: dict[str, dict[str, Any]] = {
    "read_file": _fn(
        "read_file",
        "Read a text file of the workspace. Returns numbered lines ('  12| text'), at most `limit` lines and "
        f"{MAX_READ_BYTES // 1000} KB per call; when the reply says it was truncated, call again with the given "
        "offset. Binary files are refused.",
        {
            "path": {"type": "string", "description": f"File path. {_PATH_NOTE}"},
            "offset": {
                "type": "integer",
                "description": "1-based line number to start at (default 1).",
                "minimum": 1,
            },
            "limit": {
                "type": "integer",
                "description": f"Maximum number of lines to return (default {DEFAULT_READ_LIMIT}, "
                f"at most {MAX_READ_LINES}).",
                "minimum": 1,
            },
        },
        ["path"],
    ),
    "list_dir": _fn(
        "list_dir",
        f"List a directory of the workspace: entry names sorted, directories ending in '/' "
        f"(at most {MAX_LIST_ENTRIES}).",
        {"path": {"type": "string", "description": f"Directory path (default '.', the root). {_PATH_NOTE}"}},
        [],
    ),
    "glob": _fn(
        "glob",
        "Find workspace paths matching a glob pattern: '*' and '?' within one path segment, '**' for any "
        "number of directories, '[abc]' classes, '{a,b}' alternatives (e.g. 'src/**/*.py', '*.{ts,tsx}'). "
        f"Directories end in '/'. At most {MAX_GLOB_RESULTS} results; .git and node_modules are skipped.",
        {"pattern": {"type": "string", "description": f"Glob pattern. {_PATH_NOTE}"}},
        ["pattern"],
    ),
    "grep": _fn(
        "grep",
        "Search file contents with a Python regular expression (use '(?i)' for case-insensitive). Returns "
        f"'file:line: text' lines, at most {MAX_GREP_MATCHES}; binary files and files over "
        f"{MAX_GREP_FILE_BYTES // (1024 * 1024)} MB are skipped.",
        {
            "pattern": {
                "type": "string",
                "description": "Python `re` regular expression searched in each line.",
            },
            "path": {
                "type": "string",
                "description": f"File or directory to search (default '.', the whole workspace). {_PATH_NOTE}",
            },
            "include": {
                "type": "string",
                "description": "Only search files whose name matches this glob, e.g. '*.py' or '*.{ts,tsx}'.",
            },
        },
        ["pattern"],
    ),
    "write_file": _fn(
        "write_file",
        "Create or overwrite a file in the workspace with the given content (UTF-8). Parent directories are "
        "created as needed.",
        {
            "path": {"type": "string", "description": f"File path. {_PATH_NOTE}"},
            "content": {"type": "string", "description": "The complete new content of the file."},
        },
        ["path", "content"],
    ),
    "edit_file": _fn(
        "edit_file",
        "Edit a file by replacing one exact occurrence of `old` with `new`. Fails if `old` is not found or "
        "occurs more than once (then include more surrounding lines in `old`). Whitespace and indentation must "
        "match exactly; read the file first.",
        {
            "path": {"type": "string", "description": f"File path. {_PATH_NOTE}"},
            "old": {"type": "string", "description": "The exact text to replace; must occur exactly once."},
            "new": {"type": "string", "description": "The replacement text."},
        },
        ["path", "old", "new"],
    ),
}


def tool_schemas(names: Collection[str] = ALL_TOOLS) -> list[dict[str, Any]]:
    """The schemas of ``names`` in that order, for ``tools=``. Unknown names raise ``KeyError``."""
    return [TOOL_SCHEMAS[n] for n in names]


# --------------------------------------------------------------------------------------------------- dispatch

_Handler = Callable[..., Any]

_HANDLERS: dict[str, _Handler] = {
    "read_file": read_file,
    "list_dir": list_dir,
    "glob": glob,
    "grep": grep,
    "write_file": write_file,
    "edit_file": edit_file,
}


def _coerce(tool: str, name: str, spec: Mapping[str, Any], value: Any) -> Any:
    kind = spec.get("type")
    if kind == "string":
        if isinstance(value, str):
            return value
        raise _ToolError(
            f"{tool}: argument {name!r} must be a string, got {_json_type(value)}", "invalid_arguments"
        )
    if kind == "integer":
        if isinstance(value, int) and not isinstance(value, bool):
            return value
        if (isinstance(value, float) and value.is_integer()) or (
            isinstance(value, str) and re.fullmatch(r"\s*-?\d+\s*", value)
        ):
            return int(value)
        raise _ToolError(
            f"{tool}: argument {name!r} must be an integer, got {_json_type(value)}", "invalid_arguments"
        )
    return value  # pragma: no cover - every schema property is typed


def _json_type(value: Any) -> str:
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


def _bind_arguments(tool: str, args: Mapping[str, Any]) -> dict[str, Any]:
    params = TOOL_SCHEMAS[tool]["function"]["parameters"]
    props: dict[str, Any] = params["properties"]
    required: list[str] = params["required"]
    unknown = sorted(set(args) - set(props))
    if unknown:
        raise _ToolError(
            f"{tool}: unexpected argument(s) {', '.join(map(repr, unknown))}; "
            f"it accepts {', '.join(map(repr, props))}",
            "invalid_arguments",
        )
    missing = [r for r in required if args.get(r) is None]
    if missing:
        raise _ToolError(
            f"{tool}: missing required argument(s) {', '.join(map(repr, missing))}", "invalid_arguments"
        )
    bound: dict[str, Any] = {}
    for name, value in args.items():
        if value is None:  # an optional argument sent as null means "use the default"
            continue
        bound[name] = _coerce(tool, name, props[name], value)
    return bound


async def dispatch(
    sb: Sandbox,
    name: str,
    arguments_json: str | Mapping[str, Any] | None,
    *,
    allowed: Collection[str] | None = None,
) -> ToolOutput:
    """Run tool ``name`` with the model's JSON ``arguments_json``; every failure comes back as ``ok=False``.

    ``allowed`` restricts the callable tools (for example :data:`READ_ONLY_TOOLS` for reviewers); a tool outside
    it is reported as unknown. Empty or ``null`` arguments mean ``{}``; an already-parsed mapping is accepted.
    """
    available = [t for t in ALL_TOOLS if allowed is None or t in allowed]
    if name not in _HANDLERS or name not in available:
        return _fail(
            f"unknown tool {name!r}; available tools: {', '.join(available)}", "unknown_tool", tool=name
        )
    if arguments_json is None or (isinstance(arguments_json, str) and not arguments_json.strip()):
        args: Any = {}
    elif isinstance(arguments_json, str):
        try:
            args = json.loads(arguments_json)
        except (ValueError, RecursionError) as exc:
            return _fail(f"arguments are not valid JSON: {exc}", "invalid_json", tool=name)
    else:
        args = arguments_json
    if not isinstance(args, Mapping):
        return _fail(
            f'arguments must be a JSON object like {{"path": "..."}}, got {_json_type(args)}',
            "invalid_arguments",
            tool=name,
        )
    try:
        bound = _bind_arguments(name, args)
    except _ToolError as exc:
        return _fail(str(exc), exc.kind, tool=name)
    try:
        result: ToolOutput = await _HANDLERS[name](sb, **bound)
    except Exception as exc:  # the tools do not raise; this is a last line of defence
        return _convert_error(name, exc)
    return result
