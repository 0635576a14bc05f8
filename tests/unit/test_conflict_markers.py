"""Which files of a worktree still hold conflict markers: regular files only, never blocked on a FIFO."""

from __future__ import annotations

import os
from pathlib import Path

import anyio
import pytest

from polpo.vcs.worktrees import files_with_markers

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


async def test_only_the_regular_files_that_hold_markers_are_named_and_a_fifo_is_passed_over(tmp_path: Path) -> None:
    (tmp_path / "conflicted.txt").write_text("a\n<<<<<<< HEAD\nmine\n=======\ntheirs\n>>>>>>> polpo/m/1-t\n")
    (tmp_path / "resolved.txt").write_text("mine and theirs\n")
    (tmp_path / "inline.txt").write_text("x <<<<<<< not at a line start\n")
    os.mkfifo(tmp_path / "pipe.txt")  # an agent's, under a conflicted file's name: opening it would wait forever
    (tmp_path / "outside.txt").symlink_to(tmp_path / "conflicted.txt")  # a link is not followed
    with anyio.fail_after(10):
        found = await files_with_markers(tmp_path, ["conflicted.txt", "resolved.txt", "inline.txt", "pipe.txt",
                                                    "outside.txt", "gone.txt"])
    assert found == ["conflicted.txt"]
