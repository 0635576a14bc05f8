"""Checkpoints and delays — the holds a mission document puts between tasks — and what is stored of each.

A hold is ``waiting`` until every afterTask is terminal; then a checkpoint is ``reached`` (its blocksTasks wait
for a person: ``polpo resume``) and a delay is ``started`` (they wait until ``expires_at``). ``released`` ends
both. The state is a row per hold, written in the same transaction as the event that announces it, so a restart
(or ``kill -9``) finds a reached checkpoint still reached and a started delay's expiry unchanged.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum

__all__ = ["HoldKind", "HoldState", "HoldStatus"]


class HoldKind(StrEnum):
    CHECKPOINT = "checkpoint"
    DELAY = "delay"
    APPROVAL = "approval"  # a task's approval "before" (polpo.engine.people); its name is the task's id


class HoldStatus(StrEnum):
    WAITING = "waiting"      # afterTasks not all terminal (no row is stored for it)
    REACHED = "reached"      # a checkpoint: its blocksTasks wait for a person
    STARTED = "started"      # a delay: its blocksTasks wait until expires_at
    RELEASED = "released"    # resumed by a person, or the delay expired: its blocksTasks may run
    REFUSED = "refused"      # an approval rejected (or timed out with action fail): a retry asks again

    @property
    def holding(self) -> bool:
        return self in (HoldStatus.REACHED, HoldStatus.STARTED)


@dataclass
class HoldState:
    kind: HoldKind
    name: str
    status: HoldStatus
    at: datetime  # when it was reached or started
    expires_at: datetime | None = None  # a delay's end
    released_at: datetime | None = None
    by: str | None = None  # who resumed a checkpoint
    note: str | None = None  # what they said
