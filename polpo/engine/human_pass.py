"""A person's pass counts: a task the judge failed, passed by a person (``polpo override TASK --pass``), is done.

The override itself is stored by :mod:`polpo.engine.overrides` (the label for measuring the judge); this is what it
does to the work. The task goes ``failed`` → ``done`` with the person's score, so it counts as the person judged it
in the mission's quality threshold; the tasks that failed only because of it (a dependency, a quality gate it
failed) re-open and run, as after ``polpo retry`` (:mod:`.reopen`); a mission that had finished resumes (``mission:resumed`` by
``override``) and completes again when its work is done. Its agent does not run again.

Not every failed task is work a person can pass: one that never ran (its dependency failed, it was rejected or
cancelled, its budget was spent before it started) has nothing to pass, and a cancelled mission stays cancelled;
the override is still stored. A fail over a passed task changes nothing either: the work that followed it has
already used it (``polpo retry`` runs a task again).
"""

from __future__ import annotations

from collections.abc import Callable

from polpo.engine.board import MissionBoard, wire
from polpo.engine.lifecycle import Trigger
from polpo.model.records import Mission, Task
from polpo.model.status import MissionStatus, TaskStatus
from polpo.store.protocol import Store
from polpo.store.tx import Tx

__all__ = ["pass_by_person", "why_not_passed"]

Reopen = Callable[[Tx, Mission, Task], list[Task]]


def why_not_passed(m: Mission, task: Task) -> str | None:
    """Why a person's pass leaves ``task`` as it is (None: it becomes done). Pure."""
    if task.status is not TaskStatus.FAILED:
        return f"it is {task.status}"
    if task.attempts == 0:
        return "it never ran: there is no work to pass"
    if m.status is MissionStatus.CANCELLED:
        return "its mission was cancelled"
    return None


def pass_by_person(store: Store, board: MissionBoard, m: Mission, task: Task, score: float, by: str,
                   reopen: Reopen) -> str:
    """``task`` (failed, it ran) is done with the person's ``score``; what failed because of it runs."""
    tx = store.tx().decided()
    board.resume(tx, m, "override", task.id)
    reopened = reopen(tx, m, task)
    wire(m)  # the links as they stand with the task still failed; it ends again below, as done
    _open_again(m, task)
    task.score = score
    task.feedback = None
    board.transition(tx, task, Trigger.HUMAN_PASS, f"passed by {by} over the judge's verdict")
    store.submit(tx)
    board.after_change(task)  # its dependents run, its gates and holds count it, the mission may complete
    for t in reopened:
        board.make_ready(t)
    board.settle_gates(m)
    return f"{task.id} is done" + (f"; {len(reopened)} task(s) that failed because of it run now" if reopened else "")


def _open_again(m: Mission, task: Task) -> None:
    """Undo the count of ``task``'s earlier end, so its end as done is counted once more (dependents, gates,
    holds, the mission's open tasks)."""
    m.closed.discard(task.id)
    m.open_tasks += 1
    for gate in m.gates_after.get(task.title, ()):
        m.gate_pending[gate] += 1
    for key in m.holds_after.get(task.title, ()):
        m.hold_pending[key] += 1
