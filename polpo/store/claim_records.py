"""What a claim of the cluster's queue is, and which offers a claimer takes within the limits, whichever queue holds
it (PostgreSQL's :mod:`polpo.store.cluster.claims` or the in-memory :mod:`polpo.store.memory_claims`): one
decision, so the two queues cannot drift apart."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from polpo.model.records import Attempt, Mission, Task
from polpo.store import rows as R

__all__ = ["Claim", "DeadClaim", "limit_keys", "within_limits"]


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


def limit_keys(offer: Mapping[str, Any]) -> dict[str, int]:
    """The cluster-wide limits an offer counts against (``agent:KEY``, ``mission:ID``) and their sizes."""
    out: dict[str, int] = {}
    if offer["agent_limit"] is not None:
        out[f"agent:{offer['agent_key']}"] = offer["agent_limit"]
    if offer["mission_limit"] is not None:
        out[f"mission:{offer['mission_id']}"] = offer["mission_limit"]
    return out


def within_limits(offers: Sequence[Mapping[str, Any]], held: dict[str, int], n: int) -> list[int]:
    """Which of ``offers`` (in queue order) a claimer takes: at most ``n``, each only while every limit it counts
    against has room, counting ``held`` (claims held now, per limit key; updated in place) and those taken here.
    Returns their positions."""
    taken: list[int] = []
    for i, offer in enumerate(offers):
        if len(taken) >= n:
            break
        limits = limit_keys(offer)
        if any(held[k] >= lim for k, lim in limits.items()):
            continue
        for k in limits:
            held[k] += 1
        taken.append(i)
    return taken
