"""Retention's decisions, pure: the cut-offs of a pass, which workspaces go with their missions, how to pace.

A pass at ``now`` removes the missions that finished before ``now - finished`` (and, per scheduled file, the
finished runs older than its newest ``schedule_runs``), the events of no kept mission older than the same
cut-off, handled commands, and the agents' and daemon's spend of days before the cut-off's day.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path

from polpo.clock import iso

__all__ = ["FAR_FUTURE", "PAUSE", "Cutoffs", "cutoffs", "owned_workspace", "pause_after"]

FAR_FUTURE = "9999-12-31T23:59:59.999Z"  # a schedule's runs beyond its count go whatever their age
PAUSE = 1.0  # the pruner rests as long as its last batch took, times this: at most half of a core, shared


@dataclass(frozen=True)
class Cutoffs:
    before: str  # ISO instant: what finished or happened before it goes
    day: str  # YYYY-MM-DD: the days of spend before it go


def cutoffs(now: datetime, keep: timedelta | None) -> Cutoffs | None:
    """The pass's cut-offs, or None when finished missions are kept forever."""
    if keep is None:
        return None
    at = now - keep
    return Cutoffs(iso(at), at.strftime("%Y-%m-%d"))


def owned_workspace(workspace: str, state_dir: Path) -> Path | None:
    """The workspace to remove with its mission: only one the daemon made in ``<state_dir>/workspaces``, never a
    folder the mission file named (a person's own)."""
    path = Path(workspace)
    return path if path.parent == state_dir / "workspaces" and path.name not in ("", ".", "..") else None


def pause_after(took: float) -> float:
    """Seconds to rest after a batch that took ``took``: the engine and the writer get the store in between."""
    return max(0.0, took) * PAUSE
