"""What reviewers are shown of an attempt: the files it changed and a timeline of what the agent did."""

from __future__ import annotations

from polpo.agents.transcript import timeline_text
from polpo.model.records import Attempt

__all__ = ["TIMELINE_CHARS", "changed_files", "evidence"]

TIMELINE_CHARS = 12_000


def changed_files(attempt: Attempt) -> list[str]:
    files = attempt.files or {}
    return sorted({*files.get("created", []), *files.get("modified", [])})


def evidence(attempt: Attempt) -> tuple[list[str], str]:
    """(files the attempt created or edited, execution timeline as text) for the reviewers."""
    files = attempt.files or {}
    parts: list[str] = []
    if attempt.transcript:
        parts.append(timeline_text(attempt.transcript, TIMELINE_CHARS))
    state = ("timed out" if attempt.timed_out else f"error: {attempt.error}" if attempt.error
             else f"exit code {attempt.exit_code}")
    parts.append(f"Agent {attempt.agent} ({attempt.model or 'command'}), attempt {attempt.number}: {state}, "
                 f"{attempt.duration or 0:.1f} s")
    if attempt.stdout_tail.strip():
        parts.append("stdout (end):\n" + attempt.stdout_tail[-4000:])
    if attempt.stderr_tail.strip():
        parts.append("stderr (end):\n" + attempt.stderr_tail[-2000:])
    if attempt.outcomes:
        parts.append("Declared outcomes:\n" + "\n".join(
            f"- {o.get('type')}: {o.get('label')}: {o.get('value') or o.get('path') or ''}" for o in attempt.outcomes))
    if files.get("deleted"):
        parts.append("Files deleted: " + ", ".join(files["deleted"]))
    if files.get("note"):  # e.g. another task worked in the same folder meanwhile: judge by what the agent did
        parts.append(f"Files: {files['note']}")
    return changed_files(attempt), "\n\n".join(parts)
