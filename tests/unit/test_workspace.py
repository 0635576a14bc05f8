"""polpo.workspace: snapshots of real folders and their diffs."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from polpo.workspace import FileChanges, diff, snapshot


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def _write(path: Path, text: str = "x") -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def test_snapshot_lists_regular_files_with_posix_relative_paths(tmp_path: Path) -> None:
    _write(tmp_path / "a.txt", "hello")
    _write(tmp_path / "src" / "pkg" / "mod.py", "print(1)\n")
    (tmp_path / "empty-dir").mkdir()
    snap = snapshot(tmp_path)
    assert set(snap) == {"a.txt", "src/pkg/mod.py"}
    size, mtime_ns = snap["a.txt"]
    assert size == 5
    assert mtime_ns == (tmp_path / "a.txt").stat().st_mtime_ns


def test_snapshot_skips_tool_directories_at_any_depth(tmp_path: Path) -> None:
    for skipped in (".git", "node_modules", "__pycache__", ".venv", ".polpo"):
        _write(tmp_path / skipped / "inner.txt")
        _write(tmp_path / "sub" / skipped / "inner.txt")
    _write(tmp_path / "sub" / "kept.txt")
    _write(tmp_path / ".gitignore")
    assert set(snapshot(tmp_path)) == {"sub/kept.txt", ".gitignore"}


def test_snapshot_does_not_follow_symlinks(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    _write(outside / "secret.txt")
    ws = tmp_path / "ws"
    _write(ws / "real.txt")
    (ws / "link-dir").symlink_to(outside, target_is_directory=True)
    (ws / "link-file").symlink_to(outside / "secret.txt")
    (ws / "loop").symlink_to(ws, target_is_directory=True)
    assert set(snapshot(ws)) == {"real.txt"}


def test_snapshot_of_a_missing_folder_is_empty(tmp_path: Path) -> None:
    assert snapshot(tmp_path / "nope") == {}


def test_snapshot_stops_at_max_entries(tmp_path: Path) -> None:
    for i in range(20):
        _write(tmp_path / f"d{i % 3}" / f"f{i:02d}.txt")
    first = snapshot(tmp_path, max_entries=7)
    assert len(first) == 7
    assert snapshot(tmp_path, max_entries=7) == first
    assert len(snapshot(tmp_path)) == 20


def test_diff_created_modified_deleted(tmp_path: Path) -> None:
    _write(tmp_path / "keep.txt", "same")
    _write(tmp_path / "grow.txt", "a")
    _write(tmp_path / "touch.txt", "t")
    _write(tmp_path / "gone.txt", "bye")
    _write(tmp_path / "dir" / "gone-too.txt", "bye")
    before = snapshot(tmp_path)

    (tmp_path / "grow.txt").write_text("abc")  # size changes
    st = (tmp_path / "touch.txt").stat()
    # only the mtime changes:
    os.utime(tmp_path / "touch.txt", ns=(st.st_atime_ns, st.st_mtime_ns + 5_000_000_000))
    (tmp_path / "gone.txt").unlink()
    (tmp_path / "dir" / "gone-too.txt").unlink()
    _write(tmp_path / "new" / "b.txt")
    _write(tmp_path / "a-new.txt")
    _write(tmp_path / "node_modules" / "ignored.js")
    after = snapshot(tmp_path)

    changes = diff(before, after)
    assert changes == FileChanges(
        created=["a-new.txt", "new/b.txt"],
        modified=["grow.txt", "touch.txt"],
        deleted=["dir/gone-too.txt", "gone.txt"],
    )
    assert changes.as_dict() == {
        "created": ["a-new.txt", "new/b.txt"],
        "modified": ["grow.txt", "touch.txt"],
        "deleted": ["dir/gone-too.txt", "gone.txt"],
    }
    assert not changes.empty


def test_diff_of_identical_snapshots_is_empty(tmp_path: Path) -> None:
    _write(tmp_path / "a.txt")
    snap = snapshot(tmp_path)
    changes = diff(snap, dict(snap))
    assert changes.empty
    assert changes.as_dict() == {"created": [], "modified": [], "deleted": []}


def test_diff_on_plain_dicts() -> None:
    before = {"a": (1, 10), "b": (2, 20), "c": (3, 30)}
    after = {"a": (1, 10), "b": (2, 21), "d": (4, 40)}
    assert diff(before, after) == FileChanges(created=["d"], modified=["b"], deleted=["c"])
