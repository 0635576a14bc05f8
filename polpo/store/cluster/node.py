"""The cluster parts of one daemon on a PostgreSQL store, built and started in order: orphans of this node's
previous life killed, membership joined, the guard started, the event log caught up — before the engine loads
anything. One :class:`~polpo.store.fencing.Fence` (this incarnation's token) is shared by the store's writer, the
claim queue and the leadership, so every write this node makes is conditional on its lease."""

from __future__ import annotations

import logging

from polpo.config import Config
from polpo.store.cluster.claims import ClaimQueue
from polpo.store.cluster.follower import EventFollower
from polpo.store.cluster.leadership import Leadership
from polpo.store.cluster.membership import Membership
from polpo.store.cluster.timing import GUARD_DEADLINE
from polpo.store.fencing import Fence, Fenced
from polpo.store.outage_wait import quiet_driver_outages
from polpo.store.postgres import PostgresStore
from polpo.store.protocol import Store
from polpo.tools.guard_link import GuardLink
from polpo.tools.marks import daemon_mark
from polpo.tools.orphans import kill_state_dir_orphans
from polpo.tools.procs import kill_running

log = logging.getLogger("polpo.cluster")

__all__ = ["ClusterNode"]


class ClusterNode:
    def __init__(self, cfg: Config, store: PostgresStore) -> None:
        quiet_driver_outages()
        lease = cfg.store.lease.total_seconds()
        node = cfg.daemon.node
        self.store = store
        self.membership = Membership(store.pool, node, lease, store.target)
        self.fence = Fence(node, self.membership.incarnation, lease)
        self.fence.on_fenced += [store.fence, self._stop_runs]
        store.lease_fence = self.fence
        self.leadership = Leadership(store.target, node, self.membership.incarnation, lease, self.fence)
        self.queue = ClaimQueue(store.pool, node, self.membership.incarnation, lease, self.fence)
        self.fence.local = self.membership.why_not
        self.guard = GuardLink(lease * GUARD_DEADLINE, may_start=self._may_start, on_lost=self._guard_lost,
                               marker=daemon_mark(cfg.state_dir))
        self.membership.beat = self.guard.beat
        assert store.event_log is not None
        self.follower = EventFollower(store.target, store.events_after, store.event_log, node,
                                      on_remote=lambda _evs: None, on_claims=lambda: None)
        self.lease = lease

    @classmethod
    async def join(cls, cfg: Config, store: Store) -> ClusterNode:
        assert isinstance(store, PostgresStore)
        node = cls(cfg, store)
        await node.start(cfg)
        return node

    async def start(self, cfg: Config) -> None:
        await kill_state_dir_orphans(cfg.state_dir)
        await self.membership.join()
        self.guard.start()
        self.store.log_follower = self.follower.poke
        try:
            await self.follower.start(self.store.last_seq)
        except BaseException:
            self.guard.close()
            raise

    async def flush(self) -> None:
        """A clean stop's last writes, before it leaves; none for a fenced node (the store refuses them anyway)."""
        if self.fence.fenced is None:
            await self.store.flush()

    async def leave(self) -> None:
        """A clean stop's last step: the fence refuses every later write quietly (it would find the row gone and
        take that for a lost lease), then the row is deleted, so the others see this node gone at once. A write
        already under way holds the row (``FOR KEY SHARE``): the delete waits for it."""
        self.fence.leave()
        await self.membership.leave()

    def _may_start(self) -> bool:
        """A program may start only while this node may act; otherwise the node is fenced (and leaves) now."""
        try:
            self.fence.ensure()
        except Fenced:
            return False
        return True

    def _guard_lost(self, reason: str) -> None:
        """No guard can be kept: the node fences itself (its agents are killed, it writes nothing more, it leaves)."""
        self.fence.trip(reason)

    @staticmethod
    def _stop_runs(reason: str) -> None:
        """Fenced: every agent of this node is killed now, without waiting for anything (the guard's job too)."""
        if killed := kill_running():
            log.error("killed %d running agent process group(s): %s", killed, reason)
