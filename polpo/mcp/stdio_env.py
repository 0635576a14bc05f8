"""A stdio server's folder and environment (no SDK import: the pool builds them for every owner)."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

__all__ = ["resolve_cwd", "server_env"]


def server_env(base: Mapping[str, str], extra: Mapping[str, str], marker: tuple[str, str] | None) -> dict[str, str]:
    """A stdio server's environment: ``base`` (the minimal one), its configured variables, the attempt's marker."""
    env = dict(base)
    env.update(extra)
    if marker is not None:
        env[marker[0]] = marker[1]
    return env


def resolve_cwd(workspace: Path, cwd: str | None) -> Path:
    """The folder a server runs in: ``cwd`` inside the workspace, or the workspace."""
    return workspace if not cwd else Path(os.path.normpath(workspace / cwd))
