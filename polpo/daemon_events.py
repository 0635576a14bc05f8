"""The two events that bracket a daemon's life in its store: ``orchestrator:started`` and ``orchestrator:shutdown``."""

from __future__ import annotations

import contextlib
import os

from polpo import __version__
from polpo.config import Config
from polpo.engine.engine import Engine
from polpo.events import catalog as E
from polpo.store.protocol import Store, StoreError

__all__ = ["record_shutdown", "say_started"]


async def say_started(store: Store, cfg: Config, engine: Engine) -> None:
    """Stored before anything starts work; raises StoreLost when this node may not write (fenced, its database gone)."""
    await store.commit(store.tx().event(E.OrchestratorStarted(
        version=__version__, pid=os.getpid(), missions_dir=str(cfg.missions_dir), state_dir=str(cfg.state_dir),
        agents=engine.agents.known_names(), resumed_missions=len(engine.board.missions))))


async def record_shutdown(store: Store, engine: Engine) -> None:
    with contextlib.suppress(StoreError):  # a node that lost the database cannot record its shutdown
        await store.commit(store.tx().event(E.OrchestratorShutdown(
            pid=os.getpid(), unfinished_missions=len(engine.board.missions))))
