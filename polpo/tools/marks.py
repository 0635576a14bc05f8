"""The marker every process of an attempt carries in its environment, so a restarted daemon finds its orphans.

A pid and its start time find an agent's process group; the marker also finds what left the group (a child
that called ``setsid``) and the check commands run for the attempt. The value names the state folder, so two
daemons on one machine never take each other's processes for orphans.
"""

from __future__ import annotations

from pathlib import Path

__all__ = ["ATTEMPT_MARK", "attempt_env", "attempt_mark", "daemon_mark"]

ATTEMPT_MARK = "POLPO_ATTEMPT_MARK"


def attempt_mark(state_dir: Path, attempt_id: str) -> str:
    return f"{state_dir}|{attempt_id}"


def attempt_env(state_dir: Path, attempt_id: str) -> dict[str, str]:
    return {ATTEMPT_MARK: attempt_mark(state_dir, attempt_id)}


def daemon_mark(state_dir: Path) -> str:
    """What every attempt marker of this state folder starts with (a guard kills what carries it)."""
    return attempt_mark(state_dir, "")
