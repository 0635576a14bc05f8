"""The missions folder's lock: one daemon watches a folder — or the nodes of one cluster, together.

Two daemons with their own stores on one folder would each admit every file and run every mission twice. Each
daemon holds a shared ``flock`` on ``<missions_dir>/.polpo-daemon.lock`` for its life; the file names the store
the folder belongs to (its identity, :mod:`polpo.store.identity`) and the daemon that first took it. A daemon of
the same store (another node of the cluster) shares the lock; one of another store is refused with the holder's
pid, host, node and state folder. Checking needs the exclusive lock for a moment, so a folder nobody holds is
claimed atomically; a holder that died leaves no lock behind (the kernel drops it). A folder where the file
cannot be made (read-only) is watched without the lock, with a warning.
"""

from __future__ import annotations

import fcntl
import json
import logging
import os
import time
from pathlib import Path
from typing import Any, TextIO

__all__ = ["LOCK_NAME", "FolderInUse", "describe", "release", "take"]

LOCK_NAME = ".polpo-daemon.lock"
SHARE_TRIES = 50  # a peer checking at the same moment holds the lock exclusively for a few microseconds

log = logging.getLogger("polpo.daemon")


class FolderInUse(Exception):
    """Another daemon, of another store, watches the folder."""

    def __init__(self, folder: Path, holder: dict[str, Any]) -> None:
        who = ", ".join(f"{k} {holder[k]}" for k in ("pid", "host", "node") if holder.get(k))
        state = f", state folder {holder['state_dir']}" if holder.get("state_dir") else ""
        super().__init__(
            f"the missions folder {folder} is watched by another polpo daemon ({who or 'unknown'}{state}); two "
            "daemons with their own state would run every mission in it twice: stop that daemon, or give this "
            "one its own [daemon] missions_dir (the nodes of one cluster share a folder: they share [store] url)")
        self.holder = holder


def _holder(f: TextIO) -> dict[str, Any]:
    f.seek(0)
    try:
        data = json.loads(f.read() or "{}")
    except ValueError:
        return {}
    return data if isinstance(data, dict) else {}


def take(folder: Path, me: dict[str, Any]) -> TextIO | None:
    """Hold ``folder`` for the store ``me["store"]`` (keep the file open until :func:`release`), or
    :class:`FolderInUse`. None: the file could not be made (a read-only folder): not enforced."""
    path = folder / LOCK_NAME
    try:
        folder.mkdir(parents=True, exist_ok=True)
        f = open(path, "a+")  # noqa: SIM115 - held for the daemon's life
    except OSError as e:
        log.warning("cannot lock the missions folder %s (%s): another daemon on it would not be refused", folder,
                    e.strerror or e)
        return None
    try:
        for _ in range(SHARE_TRIES):
            try:
                fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:  # held: by a node of this store (share it) or by another daemon (refused)
                holder = _holder(f)
                if not holder.get("store"):  # a peer that took it a moment ago is writing its name: ask again
                    time.sleep(0.01)
                    continue
                if holder.get("store") != me["store"]:
                    raise FolderInUse(folder, holder) from None
                try:
                    fcntl.flock(f, fcntl.LOCK_SH | fcntl.LOCK_NB)
                    return f
                except BlockingIOError:  # a peer holds it exclusively for its own check: ask again
                    time.sleep(0.01)
                    continue
            f.seek(0)
            f.truncate()
            f.write(json.dumps(me))
            f.flush()
            fcntl.flock(f, fcntl.LOCK_SH)  # not atomic: another daemon may have claimed it in between
            holder = _holder(f)
            if holder.get("store") != me["store"]:
                raise FolderInUse(folder, holder)
            return f
        raise FolderInUse(folder, _holder(f))
    except BaseException:
        f.close()
        raise


def describe(store: str, state_dir: Path, node: str | None) -> dict[str, Any]:
    """What the lock file says of the daemon that took it."""
    return {"store": store, "pid": os.getpid(), "host": os.uname().nodename, "node": node,
            "state_dir": str(state_dir)}


def release(f: TextIO) -> None:
    fcntl.flock(f, fcntl.LOCK_UN)
    f.close()
