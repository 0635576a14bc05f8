"""Short human labels for checks: a command's first line, or a list of paths, cut to a readable length."""

from __future__ import annotations

__all__ = ["LABEL_MAX", "command_label", "truncate"]

LABEL_MAX = 80


def truncate(text: str, limit: int = LABEL_MAX) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def command_label(kind: str, command: str) -> str:
    """The command's first line, with `` (N lines)`` when it has more."""
    lines = command.strip().splitlines()
    if not lines:
        return kind
    first = lines[0].strip()
    if len(lines) > 1:
        suffix = f" ({len(lines)} lines)"
        return truncate(first, LABEL_MAX - len(suffix)) + suffix
    return truncate(first)
