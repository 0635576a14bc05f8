"""Event-name patterns (``task:*``, ``sla:**``), used by ``polpo tail --event`` and notification rules.

Kept apart from the catalog so ``polpo tail`` matches names without building every payload type.
"""

from __future__ import annotations

import fnmatch

__all__ = ["matches"]


def matches(name: str, pattern: str) -> bool:
    """Glob match of an event name: ``*`` within one ``:`` segment, ``**`` across segments."""
    if pattern in ("*", "**"):
        return True
    if "**" in pattern:
        return fnmatch.fnmatchcase(name, pattern.replace("**", "*"))
    parts, pparts = name.split(":"), pattern.split(":")
    if len(parts) != len(pparts):
        # "task:*" also matches "task:retry:blocked": a trailing * swallows the rest.
        if pparts[-1] == "*" and len(parts) > len(pparts):
            parts = [*parts[: len(pparts) - 1], ":".join(parts[len(pparts) - 1 :])]
        else:
            return False
    return all(fnmatch.fnmatchcase(p, q) for p, q in zip(parts, pparts, strict=True))
