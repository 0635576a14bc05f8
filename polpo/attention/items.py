"""An item that waits for a person, the sources that find them, and the states people read instead of "running".

Adding a kind of thing that waits is two small changes: the rows it needs (a read in
:mod:`polpo.store.attention_read`, under a name) and a function ``rows -> Iterator[Item]`` registered in
:data:`SOURCES` (:mod:`polpo.attention.sources`) with that name. Everything that shows the list takes it from
:func:`gather`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

__all__ = ["Action", "Item", "Rows", "Source", "gather", "mission_state", "task_state"]

Rows = Mapping[str, list[dict[str, Any]]]
"""The stored rows the sources read, by the name of the read that gives them (:mod:`polpo.store.attention_read`)."""


@dataclass(frozen=True)
class Action:
    """A button of the web view: a same-origin POST of ``body`` (plus what the person types in ``field``)."""

    label: str
    path: str
    body: Mapping[str, Any] = field(default_factory=dict)
    field: str | None = None  # a text the person types, sent under this key ("reason", "note", "usd")
    required: bool = False  # the button waits for that text
    placeholder: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {"label": self.label, "path": self.path, "body": dict(self.body), "field": self.field,
                "required": self.required, "placeholder": self.placeholder}


@dataclass(frozen=True)
class Item:
    kind: str  # the source's name: approval, checkpoint, on_hold, rejected_file …
    state: str  # what people read instead of "running": "waiting for approval", "on hold: budget" …
    title: str  # what waits: a task's title, a checkpoint's name, a file
    todo: str  # what to do, in a sentence
    commands: tuple[str, ...]  # the polpo commands that do it
    mission_id: str | None = None
    task_id: str | None = None
    since: str | None = None  # when it began to wait (ISO time)
    detail: str | None = None  # why it waits
    actions: tuple[Action, ...] = ()

    @property
    def target(self) -> str:
        return self.task_id or self.mission_id or self.title

    def to_json(self) -> dict[str, Any]:
        return {"kind": self.kind, "state": self.state, "title": self.title, "todo": self.todo,
                "commands": list(self.commands), "missionId": self.mission_id, "taskId": self.task_id,
                "since": self.since, "detail": self.detail, "target": self.target,
                "actions": [a.to_json() for a in self.actions]}


@dataclass(frozen=True)
class Source:
    """One kind of thing that waits: the rows it reads (by name) and what it makes of them."""

    kind: str
    reads: str
    items: Callable[[list[dict[str, Any]]], Iterable[Item]]


def gather(rows: Rows, sources: Iterable[Source]) -> list[Item]:
    """Every item of every source, in the sources' order (the most urgent kinds first), oldest first within one."""
    out: list[Item] = []
    for s in sources:
        out.extend(sorted(s.items(list(rows.get(s.reads) or [])), key=lambda i: i.since or ""))
    return out


# -- the states people read ----------------------------------------------------------------------------------

TASK_STATES: dict[tuple[str, str | None], str] = {
    ("awaiting_approval", "approval"): "waiting for approval",
    ("awaiting_approval", "side_effects"): "waiting for approval",
    ("awaiting_approval", None): "waiting for approval",
    ("awaiting_review", None): "waiting for review",
    ("awaiting_answer", None): "waiting for an answer",
    ("on_hold", "budget"): "on hold: budget",
    ("on_hold", "judge"): "on hold: judge",
    ("on_hold", "provider"): "on hold: model provider",
    ("on_hold", None): "on hold",
}


def task_state(status: str, waiting_for: str | None = None) -> str:
    """A task's state as people read it: "on hold: budget" rather than ``on_hold``; the status itself otherwise."""
    return TASK_STATES.get((status, waiting_for)) or TASK_STATES.get((status, None)) or status


def mission_state(status: str, items: Iterator[Item] | Iterable[Item]) -> str:
    """A running mission's state as people read it: what its first waiting item says ("waiting for approval"), else
    its status."""
    if status != "running":
        return status
    return next((i.state for i in items), status)
