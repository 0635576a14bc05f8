"""What a daemon holds for its life: its state folder (:mod:`polpo.state_lock`: one daemon per state folder) and
its missions folder (:mod:`polpo.missions_lock`: one store's daemons per missions folder)."""

from __future__ import annotations

from typing import TYPE_CHECKING, TextIO

from polpo import missions_lock, state_lock
from polpo.missions_lock import FolderInUse
from polpo.state_lock import StateInUse

if TYPE_CHECKING:
    from polpo.config import Config

__all__ = ["DaemonLocks", "FolderInUse", "StateInUse"]


class DaemonLocks:
    def __init__(self, cfg: Config) -> None:
        self.cfg = cfg
        self._state: TextIO | None = None
        self._folder: TextIO | None = None

    def take_state(self) -> None:
        """The state folder, first of all (:class:`StateInUse` when another daemon uses it)."""
        self._state = state_lock.take(self.cfg.state_dir)

    def take_folder(self, store_id: str) -> None:
        """The missions folder, once the store's identity is known (:class:`FolderInUse`)."""
        self._folder = missions_lock.take(self.cfg.missions_dir, missions_lock.describe(
            store_id, self.cfg.state_dir, self.cfg.daemon.node))

    def release(self) -> None:
        if self._folder is not None:
            missions_lock.release(self._folder)
            self._folder = None
        if self._state is not None:
            state_lock.release(self._state)
            self._state = None
