"""Which failed tasks re-open when a task runs again (``polpo retry``) or a person passes it: those that failed
only because of it — a dependency that failed, a quality gate it failed — and can run once it is back. Pure.

A task that failed because of a dependency re-opens only when every one of its dependencies is done or comes back
too: one that still waits on other failed work would wait forever (its dependency failed earlier, nothing ends
again to fail it), and its mission would never complete. A task a gate failed re-opens the same way; its gate is
decided again, and fails it again if the gate still fails.
"""

from __future__ import annotations

from polpo.model.records import Mission, Task
from polpo.model.status import TaskStatus

__all__ = ["CASCADED", "reopenable"]

CASCADED = ("dependency failed", "quality gate")
"""The reasons of a task that failed because of another task, not for its own work."""


def reopenable(m: Mission, cause: str) -> list[Task]:
    """The failed tasks of ``m`` that re-open when the task ``cause`` comes back, in the mission's order."""
    back = {cause}
    out: list[Task] = []
    waiting = [t for t in sorted(m.tasks.values(), key=lambda t: t.idx)
               if t.id != cause and t.status is TaskStatus.FAILED and (t.reason or "").startswith(CASCADED)]
    grew = True
    while grew:
        grew = False
        for t in list(waiting):
            if all(d in back or m.tasks[d].status is TaskStatus.DONE for d in t.deps):
                back.add(t.id)
                out.append(t)
                waiting.remove(t)
                grew = True
    return sorted(out, key=lambda t: t.idx)
