"""A running task's handle: how the dispatcher stops it from outside, and why it did."""

from __future__ import annotations

from dataclasses import dataclass

import anyio

from polpo.model.records import Attempt
from polpo.model.status import StopReason

__all__ = ["RunHandle"]


@dataclass
class RunHandle:
    task_id: str
    keys: list[str]  # concurrency keys it holds (agent, mission)
    scope: anyio.CancelScope | None = None
    stop_reason: StopReason | None = None
    attempt: Attempt | None = None

    def stop(self, reason: StopReason) -> None:
        """Ask the run to stop; the first reason given wins. The runner records what the reason means."""
        self.stop_reason = self.stop_reason or reason
        if self.scope is not None:
            self.scope.cancel()
