"""A valid mission's notification rules checked against what polpo and the config know.

Kept out of :mod:`polpo.intake.handler` so ``polpo validate`` / ``polpo submit`` can run the same check
without importing the engine. Like a gate's ``notifyChannels``: a rule naming a channel the config does not
define would lose its notifications silently, and an event glob that matches no polpo event would never fire;
both are problems with their JSON path.
"""

from __future__ import annotations

from collections.abc import Collection, Iterator

from polpo.events.names import matches
from polpo.mission.loader import Problem
from polpo.mission.schema import MissionSpec, Notifications

__all__ = ["channel_text", "scoped_problems"]


def _scopes(spec: MissionSpec) -> Iterator[tuple[str, Notifications]]:
    if spec.notifications is not None:
        yield "$.notifications", spec.notifications
    for i, t in enumerate(spec.tasks):
        if t.notifications is not None:
            yield f"$.tasks[{i}].notifications", t.notifications


def scoped_problems(spec: MissionSpec, channels: Collection[str] | None) -> list[Problem]:
    """Unknown channels (only when ``channels``, the config's, is known) and event globs that match nothing."""
    out: list[Problem] = []
    for base, scope in _scopes(spec):
        for i, rule in enumerate(scope.rules):
            # lazy for start-up speed: the catalog builds ~100 dataclasses (~25 ms) and only a mission with
            # notification rules needs its names (tests/unit/test_cli_startup.py guards this)
            from polpo.events.catalog import ALL_EVENTS

            for j, pattern in enumerate(rule.events):
                hits = [ev for ev in ALL_EVENTS if matches(ev, pattern)]
                if not hits:
                    out.append(Problem(f"{base}.rules[{i}].events[{j}]",
                                       f'"{pattern}" matches no polpo event (see `polpo tail`, or the event list in '
                                       "docs/reference/events.md)"))
                elif all(ev.startswith("notification:") for ev in hits):
                    out.append(Problem(f"{base}.rules[{i}].events[{j}]",
                                       f'"{pattern}": notification:* events report deliveries and are never '
                                       "routed (that could loop)"))
            if channels is not None:
                out.extend(Problem(f"{base}.rules[{i}].channels[{j}]",
                                   channel_text(name, channels))
                           for j, name in enumerate(rule.channels) if name not in channels)
    return out


def channel_text(name: str, known: Collection[str]) -> str:
    """Why a channel name does not do: it must be a ``[channels.NAME]`` table of the config first."""
    if not known:
        return (f'no channel named "{name}": the config has none; add a [channels.{name}] table first '
                "(docs/how-to/notifications.md)")
    return f'no channel named "{name}"; available: {", ".join(sorted(known))} (or add [channels.{name}])'
