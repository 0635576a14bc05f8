"""A mission document as the daemon keeps it: the stored JSON once, its tasks parsed only while they run.

A pydantic ``TaskSpec`` costs about 1.4 KB; 50 000 waiting tasks held as models were most of the daemon's
memory. :class:`MissionDoc` holds the canonical JSON the store keeps (UTF-8, one ``bytes``), where each task's
object lies in it, and the few task fields the engine reads while a task waits (priority, dependencies,
deadline, notification rules; the last three are rare and kept sparse). A task's spec is parsed from its slice
when it starts (:attr:`polpo.model.records.Task.spec`) and dropped when its turn ends.

The head (``MissionDoc.head``) is the mission's ``MissionSpec``; its ``tasks`` is a lazy :class:`TaskSpecs`
view that parses on each access, so code that reads ``spec.tasks`` stays correct, only slower.
"""

from __future__ import annotations

import json
import sys
from array import array
from collections.abc import Iterable, Iterator, Sequence
from datetime import timedelta
from typing import Any, overload

import orjson

from polpo.mission.schema import MissionSpec, Notifications, TaskSpec

__all__ = ["MissionDoc", "TaskSpecs"]

_Deadline = Any  # a datetime or a timedelta (polpo.mission.schema.Deadline)


class MissionDoc:
    """The stored form of a mission: ``text()`` is what the ``missions.spec`` column holds."""

    __slots__ = ("_approval", "_deadlines", "_deps", "_isolation", "_notifications", "_priority", "_spans", "assignees", "blob", "head", "titles")

    def __init__(self, head: MissionSpec, parts: Iterable[tuple[str, bytes]], tasks: Iterable[TaskSpec]) -> None:
        """``parts``: the head's top-level (key, JSON value) pairs in order, ``"tasks"`` among them (its value
        ignored); ``tasks``: the validated tasks in file order (read once, for the fields kept per task)."""
        out = bytearray(b"{")
        spans = array("I")
        priority = array("d")
        self.titles: list[str] = []  # the tasks' titles and assignTo, in file order (the tasks' records share them)
        self.assignees: list[str | None] = []
        self._deps: dict[int, tuple[int, ...]] = {}
        self._deadlines: dict[int, _Deadline] = {}
        self._notifications: dict[int, Notifications] = {}
        self._isolation: dict[int, str] = {}
        self._approval: dict[int, tuple[timedelta | None, str]] = {}  # approval "before": (timeout, action)
        index: dict[str, int] = {}
        pending_deps: dict[int, Sequence[str]] = {}
        for k, (key, value) in enumerate(parts):
            if k:
                out += b","
            out += orjson.dumps(key) + b":"
            if key != "tasks":
                out += value
                continue
            out += b"["
            for i, ts in enumerate(tasks):
                if i:
                    out += b","
                spans.append(len(out))
                out += ts.__pydantic_serializer__.to_json(ts, exclude_none=True)
                spans.append(len(out))
                priority.append(ts.priority)
                self.titles.append(ts.title)
                self.assignees.append(None if ts.assign_to is None else sys.intern(ts.assign_to))
                index[ts.title] = i
                if ts.depends_on:
                    pending_deps[i] = ts.depends_on
                if ts.deadline is not None:
                    self._deadlines[i] = ts.deadline
                if ts.notifications is not None:
                    self._notifications[i] = ts.notifications
                if ts.isolation is not None:
                    self._isolation[i] = ts.isolation
                if ts.approval is not None:
                    self._approval[i] = (ts.approval_timeout, ts.approval_timeout_action)
            out += b"]"
        out += b"}"
        for i, titles in pending_deps.items():
            self._deps[i] = tuple(index[t] for t in titles if t in index)
        self.blob = bytes(out)
        self._spans = spans
        self._priority = priority
        self.head = head.model_copy(update={"tasks": TaskSpecs(self)})

    # -- building -------------------------------------------------------------------------------------------
    @classmethod
    def of(cls, spec: MissionSpec) -> MissionDoc:
        """The stored form of a validated spec (what admission writes; the same JSON as before, key for key).
        The head of a document gives that document back."""
        if isinstance(spec.tasks, TaskSpecs) and spec is spec.tasks.doc.head:
            return spec.tasks.doc
        head = spec.model_dump(mode="json", exclude_none=True, exclude={"tasks"})
        parts = [(k, b"" if k == "tasks" else orjson.dumps(head[k])) for k in _ordered_keys(spec, head)]
        return cls(spec, parts, spec.tasks)

    @classmethod
    def parse(cls, text: str | bytes) -> MissionDoc:
        """The stored JSON read back (recovery, and the intake's round trip): the head and every task validated
        again from JSON, one task at a time, so a mission of 50 000 tasks is never held as 50 000 models.
        The stdlib parser, not orjson: orjson reserves about ten times the document's size while it parses."""
        doc = json.loads(text)
        raw_tasks: list[dict[str, Any]] = doc["tasks"]
        head = MissionSpec.model_validate_json(orjson.dumps({**doc, "tasks": raw_tasks[:1]}))
        parts = [(k, b"" if k == "tasks" else orjson.dumps(v)) for k, v in doc.items()]
        return cls(head, parts, (TaskSpec.model_validate_json(orjson.dumps(t)) for t in raw_tasks))

    # -- reading --------------------------------------------------------------------------------------------
    def __len__(self) -> int:
        return len(self._priority)

    def text(self) -> str:
        """The JSON the store keeps (``missions.spec``)."""
        return self.blob.decode()

    def task_json(self, idx: int) -> bytes:
        return self.blob[self._spans[2 * idx]:self._spans[2 * idx + 1]]

    def task(self, idx: int) -> TaskSpec:
        """Task ``idx`` (file order) parsed from the stored JSON: a new model on each call."""
        return TaskSpec.model_validate_json(self.task_json(idx))

    def priority(self, idx: int) -> float:
        return self._priority[idx]

    def deps(self, idx: int) -> tuple[int, ...]:
        """The positions of the tasks task ``idx`` depends on (names resolved; unknown ones left out)."""
        return self._deps.get(idx, ())

    def deadline(self, idx: int) -> _Deadline | None:
        return self._deadlines.get(idx)

    def notifications(self, idx: int) -> Notifications | None:
        return self._notifications.get(idx)

    def approval(self, idx: int) -> tuple[timedelta | None, str] | None:
        """(timeout, action on timeout) when task ``idx`` waits for a person before its first attempt."""
        return self._approval.get(idx)

    def isolation(self, idx: int) -> str | None:
        """The task's own ``isolation`` (None: the mission's or its agent's)."""
        return self._isolation.get(idx)


def _ordered_keys(spec: MissionSpec, dumped: dict[str, Any]) -> list[str]:
    """The top-level keys as ``model_dump_json`` writes them: declaration order, ``tasks`` in its place."""
    out = []
    for name, info in type(spec).model_fields.items():
        key = info.serialization_alias or info.alias or name
        if key == "tasks" or key in dumped:
            out.append(key)
    return out


class TaskSpecs(Sequence[TaskSpec]):
    """``MissionSpec.tasks`` of a kept mission: each access parses the task from the stored JSON."""

    __slots__ = ("doc",)

    def __init__(self, doc: MissionDoc) -> None:
        self.doc = doc

    def __eq__(self, other: object) -> bool:
        """Equal to any sequence of the same tasks (so a kept spec compares equal to the one it came from)."""
        if isinstance(other, TaskSpecs) and other.doc is self.doc:
            return True
        if isinstance(other, Sequence) and not isinstance(other, (str, bytes)):
            return len(self) == len(other) and all(a == b for a, b in zip(self, other, strict=True))
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]

    def __len__(self) -> int:
        return len(self.doc)

    @overload
    def __getitem__(self, i: int) -> TaskSpec: ...

    @overload
    def __getitem__(self, i: slice) -> list[TaskSpec]: ...

    def __getitem__(self, i: int | slice) -> TaskSpec | list[TaskSpec]:
        if isinstance(i, slice):
            return [self.doc.task(k) for k in range(len(self.doc))[i]]
        if i < 0:
            i += len(self.doc)
        if not 0 <= i < len(self.doc):
            raise IndexError(i)
        return self.doc.task(i)

    def __iter__(self) -> Iterator[TaskSpec]:
        return (self.doc.task(i) for i in range(len(self.doc)))
