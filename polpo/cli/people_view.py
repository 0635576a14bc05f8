"""What ``polpo status`` and ``polpo show`` say about checkpoints, delays, approvals, work awaiting a person's
review and overridden verdicts."""

from __future__ import annotations

from typing import Any

from polpo.cli.common import term

__all__ = ["awaiting_review", "hold_lines", "override_line", "paused_at", "paused_note", "review_note"]


def paused_at(holds: list[dict[str, Any]]) -> list[str]:
    """The checkpoints a running mission is paused at (reached, not resumed)."""
    return [h["name"] for h in holds if h["kind"] == "checkpoint" and h["status"] == "reached"]


def paused_note(mission_id: str, names: list[str]) -> str:
    """``"; paused at go-live (polpo resume M)"`` for a mission paused at checkpoints, else ``""``."""
    if not names:
        return ""
    return f"; paused at {term(', '.join(names))} (polpo resume {term(mission_id)})"


def awaiting_review(tasks: list[dict[str, Any]]) -> list[str]:
    """The ids of the tasks that wait for a person's review (the judge could not tell)."""
    return [t["id"] for t in tasks if t.get("status") == "awaiting_review"]


def review_note(waiting: list[str]) -> str:
    """``"; waiting for a person's review of M:1 (…)"`` with the commands that answer it, else ``""``."""
    if not waiting:
        return ""
    if len(waiting) == 1:
        tid = term(waiting[0])
        return (f"; waiting for a person's review of {tid} (polpo approve {tid} passes it, polpo reject {tid} "
                "--reason TEXT fails it)")
    return (f"; waiting for a person's review of {len(waiting)} tasks: {term(', '.join(waiting))} (polpo show TASK "
            "says why; polpo approve TASK or polpo reject TASK --reason TEXT)")


def hold_lines(m: dict[str, Any]) -> list[str]:
    """One line per checkpoint and delay of the mission's document, with its stored state."""
    stored = {(h["kind"], h["name"]): h for h in m.get("holds") or []}
    out = []
    for kind, key in (("checkpoint", "checkpoints"), ("delay", "delays")):
        for spec in m["spec"].get(key) or []:
            h = stored.get((kind, spec["name"]))
            state = h["status"] if h else "waiting"
            if h and h["status"] == "reached":
                state += f" since {h['at']}: `polpo resume {m['id']} {spec['name']}` lets its tasks run"
            elif h and h["status"] == "started":
                state += f", expires {h['expires_at']}"
            elif h and h["status"] == "released":
                state += f" {h['released_at']}" + (f" by {h['resumed_by']}" if h.get("resumed_by") else "") + (
                    f": {h['note']}" if h.get("note") else "")
            out.append(f"  {kind} {term(spec['name'])}: {term(state)}\n    after {term(', '.join(spec['afterTasks']))}; "
                       f"blocks {term(', '.join(spec['blocksTasks']))}")
    return out


def override_line(override: dict[str, Any] | None) -> str | None:
    if not override:
        return None
    verdict = "pass" if override["passed"] else "fail"
    if override.get("judge_passed") is None:  # a task that awaited review: the judge could not tell
        return (f"  reviewed by {term(override['by_person'])} at {term(override['created_at'])}: {verdict} (the judge "
                f"could not tell; score {override['score']:g} for the label): {term(override['reason'])}")
    judge = "pass" if override["judge_passed"] else "fail"
    return (f"  verdict overridden to {verdict} by {term(override['by_person'])} "
            f"at {term(override['created_at'])} (its checks said {judge}): {term(override['reason'])}")
