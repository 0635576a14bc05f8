"""Safe path resolution inside a task workspace (design principle 6: nothing leaves the workspace).

Every path an agent or a reviewer hands to a file tool goes through :meth:`Sandbox.resolve`, which accepts only
relative paths that stay inside the workspace root *after every symlink is followed*:

* empty paths, NUL bytes, absolute paths (``/etc/passwd``) and any ``..`` component are refused outright, before
  the file system is consulted;
* the candidate is then resolved with :func:`os.path.realpath` and must be the root itself or lie below it, so a
  symlink inside the workspace that points outside (``link -> /etc``, then ``link/passwd``), a symlinked parent
  directory, or a dangling symlink aimed outside are all refused too.

:class:`SandboxError` messages are written for the model: they say what was refused and what is allowed, and they
never show the absolute location of the workspace.

The returned path is the *real* path (symlinks resolved), so callers open exactly the file that was checked; the
file tools also open it with ``O_NOFOLLOW`` to close the window in which a final component could be swapped for a
symlink. Blocking calls (``realpath`` stats the file system): call :meth:`Sandbox.resolve` from a worker thread.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path, PurePosixPath

__all__ = ["Sandbox", "SandboxError"]

_ALLOWED = "only relative paths inside the workspace are allowed (for example 'src/main.py' or '.')"


class SandboxError(Exception):
    """A path was refused. ``str(error)`` is meant to be shown to the model as the tool's error."""


class Sandbox:
    """Resolves model-supplied paths inside one workspace folder.

    ``root`` is resolved once (symlinks followed) when the sandbox is made; it does not have to exist yet.
    """

    __slots__ = ("_prefix", "root")

    def __init__(self, root: Path | str) -> None:
        given = os.path.join(os.getcwd(), os.fspath(root))  # unchanged when absolute
        real = None if ".." in given.split("/") else _linkless("/", given)  # "link/.." is the link target's parent
        self.root: Path = Path(real or os.path.realpath(given))
        root_s = os.fspath(self.root)
        self._prefix = root_s if root_s.endswith(os.sep) else root_s + os.sep

    def __repr__(self) -> str:
        return f"Sandbox({os.fspath(self.root)!r})"

    def contains(self, real: str | os.PathLike[str]) -> bool:
        """Whether an already-resolved absolute path is the root or lies below it (no file-system access)."""
        s = os.fspath(real)
        return s == os.fspath(self.root) or s.startswith(self._prefix)

    def resolve(self, path: str, *, must_exist: bool = False) -> Path:
        """The real absolute path of ``path`` (relative to the root), or :class:`SandboxError`.

        With ``must_exist`` the path must also exist (a dangling symlink does not count).
        """
        if not isinstance(path, str):
            raise SandboxError(f"path must be a string; {_ALLOWED}")
        if path == "" or path.strip() == "":
            raise SandboxError(f"path is empty; {_ALLOWED}")
        if "\x00" in path:
            raise SandboxError(f"path contains a NUL byte; {_ALLOWED}")
        if os.path.isabs(path) or path.startswith("/"):
            raise SandboxError(f"absolute path {path!r} refused; {_ALLOWED}")
        if ".." in PurePosixPath(path).parts:
            raise SandboxError(f"path {path!r} refused: '..' is not allowed; {_ALLOWED}")
        real = _linkless(os.fspath(self.root), path)
        if real is not None:  # every component below the root exists and is no link: the root is real already
            return Path(real)
        real = os.path.realpath(os.path.join(os.fspath(self.root), path))
        if not self.contains(real):
            raise SandboxError(
                f"path {path!r} refused: it leads outside the workspace (through a symbolic link); {_ALLOWED}"
            )
        if must_exist and not os.path.exists(real):
            raise SandboxError(f"{path!r} does not exist in the workspace (paths are relative to its root)")
        return Path(real)

    def relative(self, p: Path | str) -> str:
        """``p`` (absolute, inside the root, or already relative) in posix form relative to the root; ``.`` for it.

        Raises :class:`SandboxError` for an absolute path outside the root.
        """
        s = os.fspath(p)
        if not os.path.isabs(s):
            rel = PurePosixPath(Path(s).as_posix())
            return rel.as_posix() if str(rel) != "" else "."
        if not self.contains(s):
            s = os.path.realpath(s)
            if not self.contains(s):
                raise SandboxError("path is outside the workspace")
        if s == os.fspath(self.root):
            return "."
        return Path(s).relative_to(self.root).as_posix()


def _linkless(base: str, path: str) -> str | None:
    """``base/path`` when each component of ``path`` exists and is not a link (one ``lstat`` each; ``base`` is
    real already); None otherwise, for :func:`os.path.realpath` to resolve. ``realpath`` walks the root's own
    components again and is pure Python: a changed file's check took several times as long through it."""
    here = base
    for part in path.split("/"):
        if part in ("", "."):
            continue
        here = os.path.join(here, part)
        try:
            if stat.S_ISLNK(os.lstat(here).st_mode):
                return None
        except (OSError, ValueError):
            return None
    return here
