"""Is a daemon running on this state folder? (Kept apart from daemon.py so the CLI stays light.)"""

from __future__ import annotations

import fcntl
from pathlib import Path

from polpo.state_lock import lock_path


def daemon_pid(state_dir: Path) -> int | None:
    """The pid of the daemon holding ``state_dir``'s lock, or None when none is running."""
    try:
        with open(lock_path(state_dir)) as f:
            try:
                fcntl.flock(f, fcntl.LOCK_SH | fcntl.LOCK_NB)
            except BlockingIOError:
                text = f.read().strip()
                return int(text) if text.isdigit() else -1
            fcntl.flock(f, fcntl.LOCK_UN)
            return None
    except FileNotFoundError:
        return None
