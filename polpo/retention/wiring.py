"""Retention's parts on a daemon: the pruner (leader only, like the other loops that decide) and the filing of
finished missions' files (where the files are: the node whose intake took them in)."""

from __future__ import annotations

from dataclasses import dataclass

import anyio

from polpo.clock import Clock
from polpo.config import Config
from polpo.engine.engine import Engine
from polpo.intake.filing import Filing
from polpo.retention.pruner import Pruner
from polpo.store.protocol import Store

__all__ = ["Keeping", "keeping"]


@dataclass(frozen=True)
class Keeping:
    pruner: Pruner
    filing: Filing | None  # None: finished_files = "keep"


def keeping(cfg: Config, store: Store, clock: Clock, engine: Engine, turn: anyio.Lock) -> Keeping:
    """``turn``: the intake's, which the filing of a file waits for (polpo.intake.filing)."""
    filing = None if cfg.retention.finished_files == "keep" else Filing(engine.admission, cfg.missions_dir, turn)
    if filing is not None:
        engine.finished.append(filing.finishing)
        store.subscribe(filing.observe)
    pruner = Pruner(cfg, store, clock, live=lambda mid: mid in engine.board.missions,
                    schedule_sources=lambda: [s.source for s in engine.schedules.by_id.values()])
    return Keeping(pruner, filing)
