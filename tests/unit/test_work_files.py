"""The changed files a review reads once for its evidence and every seat's prompt: confined, regular, bounded."""

from __future__ import annotations

import os
from pathlib import Path

from polpo.review.work_files import INLINE_CHARS, MAX_SOURCE_BYTES, numbered_files, read_work_files


def test_links_pipes_and_outside_files_are_not_read_and_links_are_not_plain(tmp_path: Path) -> None:
    ws, outside = tmp_path / "ws", tmp_path / "outside"
    ws.mkdir()
    outside.mkdir()
    (outside / "secret.py").write_text("SECRET = 1\n")
    (ws / "a.py").write_text("def f():\n    return 1\n")
    os.symlink(ws / "a.py", ws / "inside_link.py")
    os.symlink(outside / "secret.py", ws / "leak.py")
    os.mkfifo(ws / "pipe.py")  # a plain read would block forever
    (ws / ".git").mkdir()
    (ws / ".git" / "hook.py").write_text("x = 1\n")
    (ws / "latin.txt").write_bytes("caf\xe9\n".encode("latin-1"))

    files = read_work_files(ws, ["a.py", "inside_link.py", "leak.py", "pipe.py", ".git/hook.py", "gone.py",
                                 "../outside/secret.py", "latin.txt", "a.py"])

    assert [(f.name, f.plain) for f in files] == [("a.py", True), ("inside_link.py", False),
                                                  (".git/hook.py", False)]
    assert files[0].text == "def f():\n    return 1\n" and not files[0].cut and files[0].size == 22


def test_sources_are_read_whole_for_the_examples_and_other_files_only_as_far_as_a_prompt_shows(
        tmp_path: Path) -> None:
    big = "x = 1\n" * (INLINE_CHARS // 3)
    (tmp_path / "big.py").write_text(big)
    (tmp_path / "README.md").write_text(big)
    (tmp_path / "data.txt").write_text(big)

    py, readme, data = read_work_files(tmp_path, ["big.py", "README.md", "data.txt"])

    assert py.text == big and readme.text == big and not py.cut
    assert data.cut and data.size == INLINE_CHARS
    assert numbered_files((py, readme, data), INLINE_CHARS) == ""  # none fits the prompt
    assert len(big) < MAX_SOURCE_BYTES


def test_numbered_files_skip_what_does_not_fit_and_keep_what_still_does(tmp_path: Path) -> None:
    (tmp_path / "a.py").write_text("one\ntwo\n")
    (tmp_path / "b.txt").write_text("y" * 300)
    (tmp_path / "c.py").write_text("three\n")

    shown = numbered_files(read_work_files(tmp_path, ["a.py", "b.txt", "c.py"]), 200)

    assert shown == "--- a.py\n   1| one\n   2| two\n--- c.py\n   1| three"
