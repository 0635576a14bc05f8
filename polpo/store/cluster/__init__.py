"""Several daemons on one PostgreSQL store: membership, leadership, the claim queue, the event follower.

PostgreSQL is the whole coordination layer (no consensus code of ours): a node's liveness is a heartbeat row
(:mod:`.membership`), the one leader is the live incarnation its row names, for a term (:mod:`.leadership`), ready tasks are rows that
nodes claim with ``FOR UPDATE SKIP LOCKED`` (:mod:`.claims`), and every node follows the events table through
``LISTEN/NOTIFY`` (:mod:`.follower`). The engine's side — what a claim, a remote event or a dead node means for
missions — is :mod:`polpo.engine.cluster_role`. SQLite daemons use none of this.
"""
