"""What reviewers are shown of an attempt: the files it changed and a timeline of what the agent did."""

from __future__ import annotations

from polpo.agents.transcript import timeline_text
from polpo.model.records import Attempt

__all__ = ["TIMELINE_CHARS", "changed_files", "duration_text", "evidence"]

TIMELINE_CHARS = 12_000


def changed_files(attempt: Attempt) -> list[str]:
    files = attempt.files or {}
    return sorted({*files.get("created", []), *files.get("modified", [])})


def duration_text(seconds: float | None) -> str:
    """How long the attempt took, as reviewers are shown it: whole seconds, "under 1 s" for a quick one. Tenths
    were noise in the prompt (0.0 s one run, 0.1 s the next), and the prompt is the judge cache's key: the same
    work reviewed again missed the cache on a clock's jitter."""
    if not seconds or seconds < 1:
        return "under 1 s"
    return f"{round(seconds)} s"


def evidence(attempt: Attempt) -> tuple[list[str], str]:
    """(files the attempt created or edited, execution timeline as text) for the reviewers."""
    files = attempt.files or {}
    parts: list[str] = []
    if attempt.transcript:
        parts.append(timeline_text(attempt.transcript, TIMELINE_CHARS))
    state = ("timed out" if attempt.timed_out else f"error: {attempt.error}" if attempt.error
             else f"exit code {attempt.exit_code}")
    parts.append(f"Agent {attempt.agent} ({attempt.model or 'command'}), attempt {attempt.number}: {state}, "
                 f"{duration_text(attempt.duration)}")
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
