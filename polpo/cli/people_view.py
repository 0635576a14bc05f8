"""What ``polpo status`` and ``polpo show`` say about checkpoints, delays, approvals and overridden verdicts."""

from __future__ import annotations

from typing import Any

from polpo.cli.common import term

__all__ = ["hold_lines", "override_line", "paused_at", "paused_note"]


def paused_at(holds: list[dict[str, Any]]) -> list[str]:
    """The checkpoints a running mission is paused at (reached, not resumed)."""
    return [h["name"] for h in holds if h["kind"] == "checkpoint" and h["status"] == "reached"]


def paused_note(mission_id: str, names: list[str]) -> str:
    """``"; paused at go-live (polpo resume M)"`` for a mission paused at checkpoints, else ``""``."""
    if not names:
        return ""
    return f"; paused at {term(', '.join(names))} (polpo resume {term(mission_id)})"


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
    judge = "pass" if override.get("judge_passed") else "fail" if override.get("judge_passed") is not None else "none"
    return (f"  verdict overridden to {'pass' if override['passed'] else 'fail'} by {term(override['by_person'])} "
            f"at {term(override['created_at'])} (its checks said {judge}): {term(override['reason'])}")
