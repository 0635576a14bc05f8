"""A throw-away copy of the work to run things in, so a review never changes the work it judges.

It holds the work's regular files (never a link, a pipe or a device) and leaves out version-control folders;
dependency folders (``node_modules``, virtual environments) are copied last, each only if it fits the copy's
bounds, and named when left out. A work that is only text has its Python code blocks written to the copy.
"""

from __future__ import annotations

import os
import re
import shutil
import tempfile
from collections.abc import Sequence
from pathlib import Path

import anyio

__all__ = ["ANSWER", "LINKED", "MAX_COPY_BYTES", "MAX_COPY_FILES", "MAX_PY_FILES", "SKIPPED", "Scratch",
           "output_code"]

MAX_COPY_FILES = 20_000
MAX_COPY_BYTES = 200 * 1024 * 1024
MAX_PY_FILES = 20
LINKED = frozenset({"node_modules", ".venv", "venv", "env", ".tox", "target", "vendor"})
SKIPPED = frozenset({".git", ".hg", ".svn", "__pycache__", ".mypy_cache", ".pytest_cache", ".ruff_cache"})
_CODE_BLOCK = re.compile(r"```(?:python|py|python3)?[ \t]*\n(.*?)```", re.DOTALL)
ANSWER = "answer.py"
"""The file a text-only work's Python code is written to in its scratch folder."""


class Scratch:
    """A throw-away copy of the work to run things in, made on first use and removed by :meth:`close`."""

    def __init__(self, workspace: Path, files: Sequence[str], output: str | None = None) -> None:
        self.workspace = workspace
        self.files = list(files)
        self.output = output
        self._dir: tempfile.TemporaryDirectory[str] | None = None
        self.problem: str | None = None
        self.python_files: list[str] = []
        self.left_out: list[str] = []
        """Dependency folders too large to copy with the rest (commands that need them may fail)."""

    async def path(self) -> Path | None:
        """The copy (None, with :attr:`problem` set, when it cannot be made)."""
        if self._dir is None and self.problem is None:
            self._dir = tempfile.TemporaryDirectory(prefix="polpo-review-")
            try:
                self.problem = await anyio.to_thread.run_sync(self._fill, Path(self._dir.name))
            except OSError as exc:
                self.problem = f"the work could not be copied to run it: {exc}"
        return None if self._dir is None or self.problem else Path(self._dir.name)

    def _fill(self, root: Path) -> str | None:
        if self.output is not None:
            code = output_code(self.output)
            if code:
                (root / ANSWER).write_text(code, encoding="utf-8")
                self.python_files = [ANSWER]
            return None
        left_out = _copy_tree(self.workspace, root)
        if left_out is None:
            return (f"the workspace is too large to copy for running (over {MAX_COPY_FILES} files or "
                    f"{MAX_COPY_BYTES // 2**20} MB outside dependency folders); nothing was run")
        self.left_out = left_out
        self.python_files = [f for f in self.files if f.endswith(".py") and (root / f).is_file()
                             and not set(Path(f).parts[:-1]) & LINKED][:MAX_PY_FILES]
        return None

    def close(self) -> None:
        if self._dir is not None:
            self._dir.cleanup()


def _compiles(text: str) -> bool:
    try:
        compile(text, "<output>", "exec")
    except (SyntaxError, ValueError):
        return False
    return True


def output_code(output: str) -> str:
    """The Python a work that is only text holds: its code blocks that parse as Python (a shell transcript in an
    untagged block is not the work's code, and would fail to load as if the work did), else the whole text when
    it is Python defining something; "" when there is none."""
    blocks = [b for b in _CODE_BLOCK.findall(output) if _compiles(b)]
    if blocks:
        return "\n\n".join(blocks)
    return output if _compiles(output) and ("def " in output or "class " in output) else ""


def _copy_tree(src: Path, dst: Path) -> list[str] | None:
    """Copy the work's regular files and folders into ``dst`` — never a link (it may point outside), a pipe or a
    device — within :data:`MAX_COPY_FILES` entries and :data:`MAX_COPY_BYTES`; dependency folders
    (:data:`LINKED`) last, each only if it fits whole. Returns the dependency folders left out, or None when the
    rest does not fit. Walked without recursion, so a deep tree cannot exhaust the stack."""
    budget = [MAX_COPY_FILES, MAX_COPY_BYTES]
    deps: list[tuple[Path, Path]] = []
    if not _copy_walk(src, dst, budget, deps):
        return None
    left_out = []
    for folder, target in deps:
        trial = [budget[0], budget[1]]
        if _copy_walk(folder, target, trial, None):
            budget[:] = trial
        else:
            shutil.rmtree(target, ignore_errors=True)
            left_out.append(str(folder.relative_to(src)))
    return left_out


def _copy_walk(src: Path, dst: Path, budget: list[int], deps: list[tuple[Path, Path]] | None) -> bool:
    """Copy ``src`` into ``dst`` (made), spending ``budget`` ([entries, bytes]); dependency folders met on the
    way are listed in ``deps`` instead (None: copied as any folder). False when the budget runs out."""
    stack = [(src, dst)]
    while stack:
        here, there = stack.pop()
        there.mkdir(exist_ok=True)
        budget[0] -= 1
        with os.scandir(here) as entries:
            for entry in entries:
                if entry.name in SKIPPED or entry.is_symlink():
                    continue
                target = there / entry.name
                if entry.is_dir(follow_symlinks=False):
                    if deps is not None and entry.name in LINKED:
                        deps.append((Path(entry.path), target))
                    else:
                        stack.append((Path(entry.path), target))
                elif entry.is_file(follow_symlinks=False):  # a FIFO or a device is neither: left out
                    budget[0] -= 1
                    budget[1] -= entry.stat(follow_symlinks=False).st_size
                    if budget[0] < 0 or budget[1] < 0:
                        return False
                    shutil.copyfile(entry.path, target, follow_symlinks=False)
        if budget[0] < 0:
            return False
    return True
