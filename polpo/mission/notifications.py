"""Polpo's notification event names in a mission document, and the warnings the loader gives about them.

Polpo renamed its ``plan:*`` events to ``mission:*``, and its bundled workflow templates still use the old
names (``plan:completed``, spec §14-G21). A rule with such a name is mapped to polpo's event, with a warning,
instead of silently never firing. Whether a (mapped) name matches any polpo event at all is checked where the
event catalog is known (:mod:`polpo.intake.scoped`): this module only knows names, so the mission layer stays
below the events layer.
"""

from __future__ import annotations

from typing import Any

__all__ = ["POLPO_NAMES", "RULE_TOLERATED", "current_event_name", "notification_warnings"]

Loc = tuple[str | int, ...]

# Polpo name → polpo's name. "plan:…" is the generic rename (plan:completed, plan:resumed, plan:*…);
# Polpo's "executed" is polpo's "accepted" (a run of the mission starts).
POLPO_NAMES: dict[str, str] = {"mission:executed": "mission:accepted", "plan:executed": "mission:accepted"}
_IGNORED = "Polpo field not implemented by polpo; ignored"
# Keys of a Polpo rule that polpo accepts and ignores (with a warning): filters, throttles, attachments, actions.
RULE_TOLERATED = frozenset({"condition", "cooldownMs", "includeOutcomes", "outcomeFilter", "maxAttachmentSize",
                            "actions"})


def current_event_name(name: str) -> str:
    """``plan:completed`` → ``mission:completed``; polpo's own names (and globs over them) are unchanged."""
    if name in POLPO_NAMES:
        return POLPO_NAMES[name]
    return "mission:" + name[len("plan:"):] if name.startswith("plan:") else name


def _scopes(data: dict[str, Any]) -> list[tuple[Loc, Any]]:
    """(location, value) of the mission's ``notifications`` and of every task's."""
    out: list[tuple[Loc, Any]] = [(("notifications",), data.get("notifications"))]
    tasks = data.get("tasks")
    if isinstance(tasks, list):
        out.extend((("tasks", i, "notifications"), t.get("notifications"))
                   for i, t in enumerate(tasks) if isinstance(t, dict))
    return out


def notification_warnings(data: dict[str, Any]) -> list[tuple[Loc, str]]:
    """A warning per Polpo event name that was mapped, and per Polpo rule key polpo ignores (``condition``…)."""
    out: list[tuple[Loc, str]] = []
    for loc, scope in _scopes(data):
        rules = scope.get("rules") if isinstance(scope, dict) else None
        for i, rule in enumerate(rules if isinstance(rules, list) else []):
            if not isinstance(rule, dict):
                continue
            out.extend(((*loc, "rules", i, k), _IGNORED) for k in rule
                       if k in RULE_TOLERATED)
            events = rule.get("events")
            for j, name in enumerate(events if isinstance(events, list) else []):
                if isinstance(name, str) and (new := current_event_name(name)) != name:
                    out.append(((*loc, "rules", i, "events", j),
                                f'"{name}" is Polpo\'s name; polpo calls this event "{new}" and uses that'))
    return out
