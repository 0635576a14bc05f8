"""The cluster parts of one daemon on a PostgreSQL store, built and started in order: orphans of this node's
previous life killed, membership joined, the event log caught up — before the engine loads anything."""

from __future__ import annotations

import logging

from polpo.config import Config
from polpo.store.cluster.claims import ClaimQueue
from polpo.store.cluster.follower import EventFollower
from polpo.store.cluster.leadership import Leadership
from polpo.store.cluster.membership import Membership
from polpo.store.outage_wait import quiet_driver_outages
from polpo.store.postgres import PostgresStore
from polpo.tools.orphans import kill_state_dir_orphans

log = logging.getLogger("polpo.cluster")

__all__ = ["ClusterNode"]


class ClusterNode:
    def __init__(self, cfg: Config, store: PostgresStore) -> None:
        quiet_driver_outages()
        lease = cfg.store.lease.total_seconds()
        node = cfg.daemon.node
        self.store = store
        self.membership = Membership(store.pool, node, lease)
        self.leadership = Leadership(store.target, lease)
        self.queue = ClaimQueue(store.pool, node, self.membership.incarnation, lease)
        assert store.event_log is not None
        self.follower = EventFollower(store.target, store.events_after, store.event_log, node,
                                      on_remote=lambda _evs: None, on_claims=lambda: None)
        self.lease = lease

    async def start(self, cfg: Config) -> None:
        await kill_state_dir_orphans(cfg.state_dir)
        await self.membership.join()
        self.store.log_follower = self.follower.poke
        await self.follower.start(self.store.last_seq)
