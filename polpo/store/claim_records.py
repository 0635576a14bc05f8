"""What a claim of the cluster's queue is, whichever queue holds it (PostgreSQL's :mod:`polpo.store.cluster.claims`
or the in-memory :mod:`polpo.store.memory_claims`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from polpo.model.records import Attempt, Mission, Task
from polpo.store import rows as R

__all__ = ["Claim", "DeadClaim"]


@dataclass(frozen=True, slots=True)
class Claim:
    """A claimed task, with its row and latest attempt as stored when it was claimed (read in the same
    transaction: the turn before may have run on another node)."""

    task_id: str
    mission_id: str
    task_row: Any = None
    attempt_row: Any = None

    def task(self, m: Mission) -> Task | None:
        return None if self.task_row is None else R.task_from_row(self.task_row, m)

    def attempt(self) -> Attempt | None:
        return None if self.attempt_row is None else R.attempt_from_row(self.attempt_row)


@dataclass(frozen=True, slots=True)
class DeadClaim:
    """A claim whose holder's lease ran out (or an earlier life of a node)."""

    task_id: str
    node: str
    incarnation: str
    stop: str | None
