"""An agent's own state files (``.aider*``…): left out of its attributed changes and of its commits.

A pattern without ``/`` matches a file or folder name at any depth (``.aider*`` matches
``.aider.chat.history.md`` and everything in ``sub/.aider.tags.cache.v4/``); a pattern with ``/`` matches the
path from the workspace root (``fnmatch``: ``*`` also crosses ``/``). The list is ``[defaults] ignore_files``
(``[".aider*"]`` unless the config says otherwise), or an agent's own ``ignore_files``.
"""

from __future__ import annotations

from collections.abc import Sequence
from fnmatch import fnmatchcase

__all__ = ["ignored"]


def ignored(rel: str, patterns: Sequence[str]) -> bool:
    """Whether the relative posix path ``rel`` is, or lies in, something ``patterns`` name."""
    if not patterns:
        return False
    parts = rel.strip("/").split("/")
    for p in patterns:
        p = p.strip("/")
        if "/" in p:
            if fnmatchcase(rel, p) or any(fnmatchcase("/".join(parts[:i]), p) for i in range(1, len(parts))):
                return True
        elif any(fnmatchcase(part, p) for part in parts):
            return True
    return False
