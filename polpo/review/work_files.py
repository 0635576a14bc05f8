"""The work's changed files, read once per review for everything the panel does with them.

The panel's evidence step looks for stated examples in the Python files and READMEs, and every seat shows the
changed files in its prompt, numbered by line. Each read is confined to the workspace
(:func:`~polpo.tools.bounded_read.read_confined`); reading them once for all of these, through one sandbox,
halves the panel's own file work (measured with scripts/bench_panel.py: the evidence step's checks and reads
and each seat's were the panel's largest new cost per judge call).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from polpo.review.scratch import MAX_PY_FILES, SKIPPED
from polpo.tools.bounded_read import read_confined
from polpo.tools.sandbox import Sandbox

__all__ = ["INLINE_CHARS", "MAX_SOURCE_BYTES", "WorkFile", "numbered_files", "read_work_files"]

INLINE_CHARS = 8_000
"""Changed files shown in a reviewer's prompt, in characters (less with a small context window)."""
MAX_SOURCE_BYTES = 200_000
"""How much of a Python file or README the stated examples are looked for in."""


@dataclass(frozen=True)
class WorkFile:
    """One changed file's text as read (UTF-8 text only: anything else is not shown nor searched)."""

    name: str
    text: str
    size: int
    """Bytes read."""
    cut: bool
    """The file is longer than what was read."""
    plain: bool
    """A regular file reached through no link and outside version-control folders: what a scratch copy holds,
    so what the stated examples run against."""

    def fits(self, budget: int) -> bool:
        return not self.cut and self.size <= budget

    @property
    def is_source(self) -> bool:
        return self.name.endswith(".py")

    @property
    def is_readme(self) -> bool:
        return _is_readme(self.name)


def read_work_files(workspace: Path, names: Sequence[str]) -> tuple[WorkFile, ...]:
    """The changed files' text: Python files (the first :data:`~polpo.review.scratch.MAX_PY_FILES`) and READMEs
    up to :data:`MAX_SOURCE_BYTES`, the rest up to :data:`INLINE_CHARS` (all a prompt shows)."""
    sandbox = Sandbox(workspace)
    root = os.fspath(sandbox.root)
    out: list[WorkFile] = []
    sources = 0
    for name in dict.fromkeys(names):
        wide = (name.endswith(".py") and sources < MAX_PY_FILES) or _is_readme(name)
        read = read_confined(sandbox, name, MAX_SOURCE_BYTES if wide else INLINE_CHARS)
        if read is None:
            continue
        sources += name.endswith(".py")
        plain = read.real == os.path.join(root, os.path.normpath(name)) and SKIPPED.isdisjoint(name.split("/"))
        out.append(WorkFile(name, read.text, read.size, read.cut, plain))
    return tuple(out)


def _is_readme(name: str) -> bool:
    return os.path.basename(name).lower().startswith("readme")


def numbered_files(files: Sequence[WorkFile], budget: int) -> str:
    """The changed text files that fit in ``budget`` characters, each line numbered (``  12| code``)."""
    out: list[str] = []
    left = budget
    for f in files:
        if not f.fits(budget):
            continue
        block = f"--- {f.name}\n" + "\n".join(f"{i:4d}| {line}" for i, line in enumerate(f.text.splitlines(), 1))
        if len(block) > left:
            continue
        out.append(block)
        left -= len(block)
    return "\n".join(out)
