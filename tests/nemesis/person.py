"""The person the workload's checkpoints wait for: a thread that, a moment after a mission reaches a checkpoint
(``checkpoint:reached`` in any node's log), runs ``polpo resume MISSION`` as someone at a terminal would, and
tries again a second later while the command fails (the database is down, the state folder read-only…)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from tests.nemesis.world import World

__all__ = ["Person"]

THINKS = 1.0  # seconds between seeing a checkpoint and resuming it


class Person:
    def __init__(self, world: World, log: Callable[[str], None]) -> None:
        self.world = world
        self.log = log
        self.resumed: set[str] = set()
        self._over = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="person", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._over.set()
        if self._thread.ident is not None:  # (a run that failed in its set-up never started it)
            self._thread.join(90)

    def _waiting(self) -> list[str]:
        reached = {e.get("missionId") for n in self.world.plan.nodes for e in self.world.events(n)
                   if e.get("event") == "checkpoint:reached"}
        return sorted(m for m in reached if isinstance(m, str) and m not in self.resumed)

    def _loop(self) -> None:
        while not self._over.wait(0.5):
            for mission in self._waiting():
                if self._over.wait(THINKS):
                    return
                error = self.world.resume(mission)
                if error is None:
                    self.resumed.add(mission)
                    self.log(f"person: polpo resume {mission}")
                else:
                    self.log(f"person: polpo resume {mission} failed ({error[:160]}); trying again")
                    time.sleep(1.0)
