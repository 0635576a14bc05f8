"""Mission- and task-scoped notification rules at run time (the ``notifications`` of a mission document).

Which channels an event of mission M (and of its task T) goes to:

1. T's rules that match the event, then M's rules that match, then the config's ``[[notify.rules]]``;
2. a scope with ``inherit: false`` whose rules match the event stops there: the wider scopes are not asked
   for this event (Polpo's "scoped rules win"). ``inherit`` defaults to true: a mission adds to the config's
   routing rather than silently replacing it;
3. the caller's extra channels (a gate's ``notifyChannels``, the SLA's channels) are always added.

Each channel gets an event once; the most specific rule that chose it gives the summary (its ``template``).
Polpo's bug G21 (mission-scoped rules were never applied, because the router read them under another name)
has no room here: rules are found by the event's own ``mission_id``/``task_id``.

The registry learns a mission's rules from its record (``lookup``, wired by the daemon) the first time one of
its events is routed, again at ``mission:accepted``/``mission:resumed``, and forgets them after routing
``mission:completed`` — the board drops a finished mission before that event is published, hence the cache.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

import orjson

from polpo.events.catalog import Event
from polpo.events.names import matches
from polpo.mission.schema import NotificationRule, Notifications
from polpo.model.records import Mission
from polpo.notify.config import NotifyRule

__all__ = ["MissionScopes", "Scope", "ScopeRegistry", "Target", "render_template", "resolve", "scopes_of"]

_REFRESH = frozenset({"mission:accepted", "mission:resumed"})
_FIELD = re.compile(r"\{\{\s*([\w.-]+)\s*\}\}")


@dataclass(frozen=True)
class Scope:
    rules: tuple[NotificationRule, ...]
    inherit: bool


@dataclass(frozen=True)
class MissionScopes:
    mission: Scope | None
    tasks: Mapping[str, Scope]  # task id → its scope (only tasks with rules)


@dataclass(frozen=True)
class Target:
    channel: str
    rule: NotificationRule | None = None  # the scoped rule that chose the channel; None: config rule or extra


def _scope(n: Notifications | None) -> Scope | None:
    return Scope(tuple(n.rules), n.inherit) if n is not None and n.rules else None


def scopes_of(m: Mission) -> MissionScopes | None:
    """The mission's scoped rules, or None when neither it nor any of its tasks has any."""
    tasks = {t.id: s for t in m.tasks.values() if (s := _scope(t.notifications)) is not None}
    mission = _scope(m.spec.notifications)
    return MissionScopes(mission, tasks) if mission is not None or tasks else None


R = TypeVar("R", NotificationRule, NotifyRule)


def _hits(rules: Iterable[R], name: str) -> list[R]:
    return [r for r in rules if any(matches(name, p) for p in r.events)]


def resolve(name: str, config_rules: Sequence[NotifyRule], scopes: MissionScopes | None, task_id: str | None,
            extra_channels: Iterable[str] = ()) -> list[Target]:
    """Where an event named ``name`` goes (see the module doc), each channel once, most specific rule first."""
    if name.startswith("notification:"):
        return []
    chosen: list[Target] = []
    levels = [] if scopes is None else [scopes.tasks.get(task_id) if task_id else None, scopes.mission]
    wider = True
    for level in levels:
        if level is None:
            continue
        hits = _hits(level.rules, name)
        chosen.extend(Target(c, r) for r in hits for c in r.channels)
        if hits and not level.inherit:
            wider = False
            break
    if wider:
        chosen.extend(Target(c) for r in _hits(config_rules, name) for c in r.channels)
    chosen.extend(Target(c) for c in extra_channels)
    seen: dict[str, Target] = {}
    for t in chosen:
        seen.setdefault(t.channel, t)
    return list(seen.values())


class ScopeRegistry:
    """Scoped rules by mission id, for the notifier; it never reaches into the engine, only calls ``lookup``."""

    def __init__(self, lookup: Callable[[str], Mission | None]) -> None:
        self._lookup = lookup
        self._known: dict[str, MissionScopes | None] = {}

    def remember(self, m: Mission) -> None:
        self._known[m.id] = scopes_of(m)

    def for_event(self, ev: Event) -> MissionScopes | None:
        mid = ev.mission_id
        if mid is None:
            return None
        if ev.event in _REFRESH or mid not in self._known:
            m = self._lookup(mid)
            if m is None:  # a rejected file's name, or a mission this daemon never ran: nothing to cache
                return self._known.get(mid)
            self.remember(m)
        return self._known[mid]

    def after(self, ev: Event) -> None:
        """Called once ``ev`` is routed: a finished mission's rules are dropped (a retry brings them back)."""
        if ev.event == "mission:completed" and ev.mission_id is not None:
            self._known.pop(ev.mission_id, None)

    def __len__(self) -> int:
        return len(self._known)


def render_template(template: str, event: Mapping[str, Any]) -> str:
    """A rule's ``template`` with ``{{field}}`` read from the event (``{{missionId}}``, ``{{outcome}}``,
    ``{{data.report.summary}}``: top-level keys first, then ``data``); an unknown field stays as written."""

    def value(m: re.Match[str]) -> str:
        for root in (event, event.get("data") or {}):
            found, v = _dig(root, m.group(1).split("."))
            if found:
                return v if isinstance(v, str) else orjson.dumps(v).decode()
        return m.group(0)

    return _FIELD.sub(value, template)


def _dig(node: Any, path: list[str]) -> tuple[bool, Any]:
    for part in path:
        if isinstance(node, Mapping) and part in node:
            node = node[part]
        elif isinstance(node, list) and part.isdigit() and int(part) < len(node):
            node = node[int(part)]
        else:
            return False, None
    return True, node
