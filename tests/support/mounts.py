"""Real file-system faults for tests: a folder made read-only for a while (a read-only bind mount of itself) and
a tiny tmpfs that can be filled up and freed again.

Needs ``mount`` (root or CAP_SYS_ADMIN): :func:`mounts` skips the test with the reason when the machine refuses
a probe mount. Everything mounted is unmounted when the block ends, whatever happened (lazily if still busy).

A read-only bind mount of a folder onto itself affects what is reached through the path from then on: files a
running daemon opened before (its database, ``events.jsonl``) stay writable, while every new ``mkdir`` or
``open`` for writing below the folder fails with ``EROFS`` — the fault an operator, a backup tool or a container
runtime making the folder read-only for a moment causes.
"""

from __future__ import annotations

import contextlib
import errno
import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

__all__ = ["Mounts", "mount_refusal", "mounts"]


def _run(*argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(list(argv), capture_output=True, text=True, timeout=30, check=False)


class Mounts:
    """The mounts of one test; see the module docstring."""

    def __init__(self) -> None:
        self._mounted: list[Path] = []  # innermost last

    def _mount(self, *argv: str) -> None:
        r = _run("mount", *argv)
        if r.returncode != 0:
            raise OSError(f"mount {' '.join(argv)} failed: {r.stderr.strip()}")

    def read_only(self, folder: Path) -> None:
        """From now on, nothing can be created or opened for writing in ``folder`` (``EROFS``).

        The read-only mount is made on a stage no process writes through, then bound onto ``folder`` in one step
        (a bind copies the mount's read-only flag): remounting a bind of ``folder`` itself read-only fails as busy
        whenever the daemon opens a file for writing through it in between.
        """
        with tempfile.TemporaryDirectory(prefix="polpo-ro-") as stage:
            self._mount("--bind", str(folder), stage)
            try:
                self._mount("-o", "remount,ro,bind", stage)
                self._mount("--bind", stage, str(folder))
            finally:
                if _run("umount", stage).returncode != 0:
                    _run("umount", "-l", stage)
        self._mounted.append(folder)

    def writable(self, folder: Path) -> None:
        """Undo :meth:`read_only`."""
        self._umount(folder)

    def tmpfs(self, folder: Path, *, size_kb: int = 64, inodes: int = 64) -> None:
        """A small tmpfs of its own at ``folder`` (created if needed)."""
        folder.mkdir(parents=True, exist_ok=True)
        self._mount("-t", "tmpfs", "-o", f"size={size_kb}k,nr_inodes={inodes},mode=0755", "tmpfs", str(folder))
        self._mounted.append(folder)

    @staticmethod
    def fill(folder: Path) -> Path:
        """Use up every block and every inode of the file system ``folder`` is on; returns what holds them."""
        filler = folder / ".filler"
        filler.mkdir()
        chunk = b"\0" * 4096
        with contextlib.suppress(OSError), open(filler / "blocks", "wb", buffering=0) as f:
            while True:
                f.write(chunk)
        n = 0
        while True:
            try:
                (filler / f"i{n}").touch()
            except OSError as e:
                if e.errno != errno.ENOSPC:
                    raise
                break
            n += 1
        return filler

    @staticmethod
    def free(filler: Path) -> None:
        """Give back what :meth:`fill` took."""
        shutil.rmtree(filler)

    def _umount(self, folder: Path) -> None:
        if folder not in self._mounted:
            return
        r = _run("umount", str(folder))
        if r.returncode != 0:
            _run("umount", "-l", str(folder))  # still busy (a daemon's open file): detach it now, free it later
        self._mounted.remove(folder)

    def release_all(self) -> None:
        for folder in reversed(list(self._mounted)):
            self._umount(folder)


def mount_refusal(probe: Path) -> str | None:
    """Why this machine will not let the tests mount, or None."""
    if os.geteuid() != 0:
        return "needs root (or CAP_SYS_ADMIN) to mount a read-only bind mount or a tmpfs"
    if shutil.which("mount") is None or shutil.which("umount") is None:
        return "no mount/umount program"
    probe.mkdir(parents=True, exist_ok=True)
    r = _run("mount", "-t", "tmpfs", "-o", "size=16k", "tmpfs", str(probe))
    if r.returncode != 0:
        return f"mount is not permitted here: {r.stderr.strip() or r.returncode}"
    _run("umount", str(probe))
    return None


@contextlib.contextmanager
def mounts(scratch: Path) -> Iterator[Mounts]:
    """A :class:`Mounts` for one test (``scratch``: a folder for the probe mount); skips when mounting is refused."""
    reason = mount_refusal(scratch / ".mount-probe")
    if reason is not None:
        pytest.skip(reason)
    m = Mounts()
    try:
        yield m
    finally:
        m.release_all()
