"""The glob pattern engine of ``glob`` and ``grep --include``: ``*``, ``?``, ``[…]``, ``**`` and ``{a,b}``.

Patterns are matched segment by segment as the directory walk goes down (:class:`PathPattern`), so a directory is
entered only when something below it can still match. :func:`check_pattern` refuses patterns that would leave the
workspace before any matching starts.
"""

from __future__ import annotations

import fnmatch
import os
import re

from polpo.tools.output import ToolError

__all__ = ["PathPattern", "check_pattern", "expand_braces"]

_MAX_ALTERNATIVES = 64
_MAX_BRACE_DEPTH = 8


def expand_braces(pattern: str, _depth: int = 0) -> list[str]:
    """``"*.{ts,tsx}"`` → ``["*.ts", "*.tsx"]`` (innermost-last, bounded); no braces → ``[pattern]``."""
    m = re.search(r"\{([^{}]*,[^{}]*)\}", pattern)
    if m is None or _depth > _MAX_BRACE_DEPTH:
        return [pattern]
    out: list[str] = []
    for alt in m.group(1).split(","):
        out.extend(expand_braces(pattern[: m.start()] + alt + pattern[m.end() :], _depth + 1))
        if len(out) > _MAX_ALTERNATIVES:
            break
    return out[:_MAX_ALTERNATIVES]


class PathPattern:
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


def check_pattern(pattern: str, what: str) -> None:
    """Refuse an empty pattern, a NUL byte, an absolute pattern or a ``..`` segment (:class:`ToolError`)."""
    if not pattern or not pattern.strip():
        raise ToolError(f"{what} is empty", "invalid_arguments")
    if "\x00" in pattern:
        raise ToolError(f"{what} contains a NUL byte", "invalid_arguments")
    if pattern.startswith(("/", "~")) or os.path.isabs(pattern):
        raise ToolError(
            f"absolute {what} {pattern!r} refused; patterns are relative to the workspace root (e.g. 'src/**/*.py')",
            "sandbox",
        )
    if ".." in pattern.split("/"):
        raise ToolError(f"{what} {pattern!r} refused: '..' is not allowed; stay inside the workspace", "sandbox")
