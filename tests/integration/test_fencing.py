"""Fencing on a real PostgreSQL (polpo.store.fencing): a node whose lease is gone writes nothing — its batches,
claims and heartbeats are refused by the database — and a taker fences a dead incarnation in the transaction
that takes its claim. Two stores (two pools) play two nodes, as two daemons would."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from datetime import timedelta

import anyio
import asyncpg
import pytest

from polpo.clock import FakeClock
from polpo.config import StoreSettings
from polpo.events import catalog as E
from polpo.store.cluster.claims import ClaimQueue, DeadClaim
from polpo.store.cluster.leadership import Leadership
from polpo.store.cluster.membership import Membership
from polpo.store.fencing import Fence, Fenced, session_settings
from polpo.store.postgres import PostgresStore
from tests.support.cluster import END_LEADER_TERM
from tests.support.stores import big_mission, offered

pytestmark = pytest.mark.anyio

LEASE = 30.0


@dataclass
class Node:
    store: PostgresStore
    member: Membership
    fence: Fence
    queue: ClaimQueue
    fenced: list[str]


@asynccontextmanager
async def node(url: str, name: str, lease: float = LEASE) -> AsyncIterator[Node]:
    """A node as ClusterNode wires one: its membership joined, one fence shared by the writer and its claims."""
    store = await PostgresStore.open(StoreSettings(url=url, lease=timedelta(seconds=lease)), clock=FakeClock())
    member = Membership(store.pool, name, lease)
    await member.join()
    fence = Fence(name, member.incarnation, lease)
    fenced: list[str] = []
    fence.on_fenced += [store.fence, fenced.append]
    store.lease_fence = fence
    store.node = name
    try:
        async with anyio.create_task_group() as tg:
            tg.start_soon(store.run_writer)
            yield Node(store, member, fence, ClaimQueue(store.pool, name, member.incarnation, lease, fence), fenced)
            tg.cancel_scope.cancel()
    finally:
        await store.close()


async def expire(url: str, name: str) -> None:
    conn = await asyncpg.connect(url)
    try:
        await conn.execute("UPDATE nodes SET heartbeat_at = clock_timestamp() - interval '1 hour' WHERE name = $1",
                           name)
    finally:
        await conn.close()


async def event_count(url: str) -> int:
    conn = await asyncpg.connect(url)
    try:
        return int(await conn.fetchval("SELECT count(*) FROM events"))
    finally:
        await conn.close()


def started() -> E.OrchestratorStarted:
    return E.OrchestratorStarted(version="t", pid=1, missions_dir="/m", state_dir="/s", agents=[], resumed_missions=0)


async def test_a_node_fenced_by_a_taker_cannot_commit_claim_or_renew(postgres_url: str) -> None:
    async with node(postgres_url, "a") as a, node(postgres_url, "b") as b:
        await offered(a.store, big_mission(2))
        [c1, c2] = await a.queue.claim(2)
        await a.store.commit(a.store.tx().event(started()))  # while it holds its lease, it writes
        before = await event_count(postgres_url)
        await expire(postgres_url, "a")  # a paused past its lease (and the margin)
        dead = await b.queue.dead()
        assert sorted(d.task_id for d in dead) == sorted([c1.task_id, c2.task_id])
        assert await b.queue.take_over(dead[0])  # fences a's incarnation, in the same transaction
        conn = await asyncpg.connect(postgres_url)
        try:  # the heartbeat of the fenced incarnation no longer matches: it cannot win its lease back
            await conn.execute("UPDATE nodes SET heartbeat_at = clock_timestamp() WHERE name = 'a'")
            assert await conn.fetchval("SELECT incarnation FROM nodes WHERE name = 'a'") != a.member.incarnation
        finally:
            await conn.close()
        with pytest.raises(Fenced, match="no longer holds its lease"):
            await a.store.commit(a.store.tx().event(started()))
        assert a.fenced and a.store.fenced is not None  # told once, and the store writes nothing more
        with pytest.raises(Fenced):
            await a.store.commit(a.store.tx().event(started()))
        with pytest.raises(Fenced):
            await a.queue.claim(1)
        assert await event_count(postgres_url) == before
        assert await b.queue.take_over(dead[1])  # the rest of its claims: still taken (it is fenced already)
        lost: list[str] = []
        with anyio.fail_after(10):
            await a.member.run(lost.append)  # its next heartbeat finds the lease gone and says so
        assert lost and "no longer holds its lease" in lost[0]


async def test_an_expired_lease_alone_refuses_every_write(postgres_url: str) -> None:
    async with node(postgres_url, "a") as a:
        await a.store.commit(a.store.tx().event(started()))
        before = await event_count(postgres_url)
        await expire(postgres_url, "a")
        with pytest.raises(Fenced):
            await a.store.commit(a.store.tx().event(started()))
        assert await event_count(postgres_url) == before


async def test_a_node_that_renewed_before_the_take_over_keeps_its_claim(postgres_url: str) -> None:
    async with node(postgres_url, "a") as a, node(postgres_url, "b") as b:
        await offered(a.store, big_mission(1))
        [c] = await a.queue.claim(1)
        await expire(postgres_url, "a")
        [d] = await b.queue.dead()
        conn = await asyncpg.connect(postgres_url)
        try:  # a's heartbeat lands between the taker's read and its take-over
            await conn.execute("UPDATE nodes SET heartbeat_at = clock_timestamp() WHERE name = 'a'")
        finally:
            await conn.close()
        assert not await b.queue.take_over(d)
        assert d == DeadClaim(c.task_id, "a", a.member.incarnation, None)
        await a.store.commit(a.store.tx().event(started()))  # still its lease: it writes


@asynccontextmanager
async def leading(a: Node) -> AsyncIterator[list[str]]:
    """``a`` elected the leader by its Leadership loop (as ClusterNode runs it); the reasons it was deposed for."""
    elected, deposed = anyio.Event(), []

    async def on_elected() -> None:
        a.store.term = (a.store.term or 0) + 1  # its term as ClusterRole.lead starts it
        elected.set()

    async def on_deposed(why: str) -> None:
        a.store.term = 0
        a.fence.leader_term = None
        deposed.append(why)

    lead = Leadership(a.store.target, a.fence.node, a.fence.incarnation, a.fence.lease, a.fence)
    async with anyio.create_task_group() as tg:
        tg.start_soon(lead.run, on_elected, on_deposed)
        with anyio.fail_after(10):
            await elected.wait()
        yield deposed
        tg.cancel_scope.cancel()


async def end_term(url: str) -> None:
    conn = await asyncpg.connect(url)
    try:
        await conn.execute(END_LEADER_TERM)
    finally:
        await conn.close()


async def test_a_leader_whose_term_ended_is_deposed_and_writes_on_under_its_lease_alone(postgres_url: str) -> None:
    """The refusal for the leadership alone (PLF02) is a deposition, not a fence: the node stops claiming
    leadership in its writes and is not stopped (its lease holds), and the leader's decisions queued in the refused
    batch are dropped while its own writes go on; a fenced lease still stops it (the other tests)."""
    async with node(postgres_url, "a") as a, leading(a) as deposed:
        assert a.fence.leader_term is not None
        await a.store.commit(a.store.tx().event(started()))  # leads, holds its lease: writes
        await a.store.commit(a.store.tx().decided().event(started()))  # and decides
        before = await event_count(postgres_url)
        await end_term(postgres_url)
        decision = a.store.submit(a.store.tx().decided().event(started()))  # queued before it noticed
        await a.store.commit(a.store.tx().event(started()))  # in the same batch: its turn's own write
        assert a.fence.leader_term is None and a.fence.fenced is None
        assert await event_count(postgres_url) == before + 1
        assert decision.finished and decision.error is not None and decision.events == []
        assert a.store.term == 0
        with anyio.fail_after(10):  # and its Leadership steps down too (it may be elected again later)
            while not deposed:
                await anyio.sleep(0.05)


async def test_a_new_leader_waits_for_a_cut_off_leaders_open_transaction_until_the_server_ends_it(
        postgres_url: str) -> None:
    """The half-open network: the old leader's session is left idle inside a fenced transaction (it holds the
    leader-writes lock shared) and its lease runs out. The next election waits for that transaction — its writes
    must commit before a new term begins — and the server ends it after ``idle_in_transaction``, not when TCP
    gives up; what the old leader sends afterwards is refused."""
    async with node(postgres_url, "a", lease=2.0) as a, node(postgres_url, "b", lease=2.0) as b, leading(a):
        term = a.fence.leader_term
        cut = await asyncpg.connect(postgres_url, server_settings=session_settings(2.0))
        await cut.execute(f"BEGIN; {a.fence.call(term)}")  # the leader's next batch, begun; then the cable is cut
        idle_since = anyio.current_time()
        await expire(postgres_url, "a")
        async with leading(b):
            waited = anyio.current_time() - idle_since
            assert b.fence.leader_term == (term or 0) + 1
        # it did wait for the open transaction: the server ends it once idle for 1 s (counted from its last
        # statement, so a slow expire() on a loaded machine cannot make the wait look short: CI's failure)
        assert waited >= 0.9
        with anyio.move_on_after(10):  # the server ended that session: the client learns it at its next read
            while not cut.is_closed():
                await anyio.sleep(0.02)
        assert cut.is_closed()
        with pytest.raises(Fenced):  # and the old leader's next write is refused
            await a.store.commit(a.store.tx().decided().event(started()))


async def test_every_session_a_node_opens_is_ended_by_the_server_when_left_idle_in_a_transaction(
        postgres_url: str) -> None:
    """The store's pool, the heartbeat's connection and the election's: each carries ``idle_in_transaction`` (half
    the lease, capped), so a cut-off node's open transaction holds no other node's writes for long, whichever of
    its sessions was cut (the test above shows the server ending one)."""
    async with node(postgres_url, "a", lease=2.0) as a:
        member = Membership(a.store.pool, "a", 2.0, a.store.target)
        lead = Leadership(a.store.target, "a", member.incarnation, 2.0)
        own = [await member._connect(), await lead._connect()]
        try:
            async with a.store.pool.acquire() as pooled:
                for conn in [pooled, *own]:
                    assert await conn.fetchval("SHOW idle_in_transaction_session_timeout") == "1s"
        finally:
            for conn in own:
                await conn.close()


async def test_a_node_whose_heartbeat_hangs_stops_by_its_own_clock_before_its_lease_runs_out(
        postgres_url: str) -> None:
    store = await PostgresStore.open(StoreSettings(url=postgres_url), clock=FakeClock())
    member = Membership(store.pool, "slow", 1.5, store.target)
    await member.join()
    beats: list[float] = []
    member.beat = lambda: beats.append(0)
    blocker = await asyncpg.connect(postgres_url)
    try:
        async with blocker.transaction():  # the heartbeat's UPDATE waits on this lock: the database never answers
            await blocker.execute("SELECT 1 FROM nodes WHERE name = 'slow' FOR UPDATE")
            lost: list[str] = []
            with anyio.fail_after(20):
                await member.run(lost.append)
            assert lost and "stops its runs before the lease can run out" in lost[0]
            assert not member.fresh()  # and nothing more starts here (polpo.tools.guard_link)
    finally:
        await blocker.close()
        await store.close()
    assert beats  # the guard was beaten while the node could act


async def test_a_node_that_leaves_on_a_clean_stop_does_not_take_its_leave_for_a_lost_lease(
        postgres_url: str) -> None:
    """Nemesis seed 8160: a clean stop deleted the node's row, then a renewal already under way found it gone and
    said the lease was lost: the stop exited 1. Leaving ends the renewals first."""
    store = await PostgresStore.open(StoreSettings(url=postgres_url), clock=FakeClock())
    member = Membership(store.pool, "leaver", 1.2, store.target)  # a renewal every 0.2 s
    await member.join()
    lost: list[str] = []
    try:
        async with anyio.create_task_group() as tg:
            tg.start_soon(member.run, lost.append)
            await anyio.sleep(0.5)  # renewing
            await member.leave()
            await anyio.sleep(1.0)  # five renewals' time, and past the watch's 2/3 of the lease
            tg.cancel_scope.cancel()
    finally:
        await store.close()
    assert lost == []
    conn = await asyncpg.connect(postgres_url)
    try:
        assert await conn.fetchval("SELECT count(*) FROM nodes WHERE name = 'leaver'") == 0  # it left
    finally:
        await conn.close()
