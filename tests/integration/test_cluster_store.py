"""The cluster's coordination on a real PostgreSQL: claims are exclusive and honour cluster-wide limits and home
nodes; a dead node's claims are taken over by exactly one node; a node name is used by one live daemon; the
follower writes every node's events to the log in global order."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import anyio
import asyncpg
import pytest

from polpo.clock import FakeClock
from polpo.config import StoreSettings
from polpo.events import catalog as E
from polpo.events.log import EventLog, read_lines
from polpo.store.cluster.claims import ClaimQueue, DeadClaim
from polpo.store.cluster.follower import EventFollower
from polpo.store.cluster.membership import ClusterError, Membership
from polpo.store.postgres import PostgresStore
from tests.support.stores import big_mission, offered, writing

pytestmark = pytest.mark.anyio


async def open_pg(url: str) -> PostgresStore:
    return await PostgresStore.open(StoreSettings(url=url), clock=FakeClock())


async def held(url: str) -> dict[str, str | None]:
    conn = await asyncpg.connect(url)
    try:
        return {r["task_id"]: r["node"] for r in await conn.fetch("SELECT task_id, node FROM claims")}
    finally:
        await conn.close()


async def test_two_nodes_claiming_at_once_never_get_the_same_task(postgres_url: str) -> None:
    store = await open_pg(postgres_url)
    a, b = ClaimQueue(store.pool, "a", "ia", 30), ClaimQueue(store.pool, "b", "ib", 30)
    got: dict[str, list[str]] = {"a": [], "b": []}
    async with writing(store):
        await offered(store, big_mission(60))

        async def drain(q: ClaimQueue, name: str) -> None:
            while len(got["a"]) + len(got["b"]) < 60:  # an empty answer: the other holds the candidates now
                got[name].extend(c.task_id for c in await q.claim(3))
                await anyio.sleep(0.002)

        async with anyio.create_task_group() as tg:
            tg.start_soon(drain, a, "a")
            tg.start_soon(drain, b, "b")
    assert not set(got["a"]) & set(got["b"])
    assert sorted(got["a"] + got["b"]) == sorted(f"m:{i}" for i in range(1, 61))
    assert got["a"] and got["b"]  # both took part
    owners = await held(postgres_url)
    assert {tid: owners[tid] for tid in got["a"]} == dict.fromkeys(got["a"], "a")


async def test_agent_and_mission_limits_hold_across_nodes(postgres_url: str) -> None:
    store = await open_pg(postgres_url)
    a, b = ClaimQueue(store.pool, "a", "ia", 30), ClaimQueue(store.pool, "b", "ib", 30)
    async with writing(store):
        await offered(store, big_mission(10, "m1"), agent_limit=3)  # agent "shell": 3 at once in the cluster
        await offered(store, big_mission(10, "m2", limit=1, seq=2), agent="other")  # mission m2: 1 at once
        first = [c.task_id for c in await a.claim(8)] + [c.task_id for c in await b.claim(8)]
        again = [c.task_id for c in await b.claim(8)] + [c.task_id for c in await a.claim(8)]
        assert sum(t.startswith("m1:") for t in first) == 3
        assert sum(t.startswith("m2:") for t in first) == 1
        assert not again  # every limit is full on both nodes
        done = next(t for t in first if t.startswith("m1:"))
        owner = a if done in (await held(postgres_url)) and (await held(postgres_url))[done] == "a" else b
        await owner.end(done, requeue=False)  # a slot of the agent frees: one more m1 task, on any node
        more = [c.task_id for c in await b.claim(8)] + [c.task_id for c in await a.claim(8)]
    assert len(more) == 1 and more[0].startswith("m1:")


async def test_a_node_affine_task_is_claimed_only_by_its_home_node(postgres_url: str) -> None:
    store = await open_pg(postgres_url)
    a, b = ClaimQueue(store.pool, "a", "ia", 30), ClaimQueue(store.pool, "b", "ib", 30)
    async with writing(store):
        await offered(store, big_mission(4, "homed", home="a"))
        assert await b.claim(10) == []
        assert len(await a.claim(10)) == 4


async def test_a_claim_given_back_is_claimable_and_an_offer_never_takes_a_held_claim_back(postgres_url: str) -> None:
    store = await open_pg(postgres_url)
    a, b = ClaimQueue(store.pool, "a", "ia", 30), ClaimQueue(store.pool, "b", "ib", 30)
    m = big_mission(1)
    async with writing(store):
        await offered(store, m)
        [c] = await a.claim(1)
        await offered(store, m)  # the leader offers it again (a stale event): the claim stays with a
        assert await b.claim(1) == []
        await a.end(c.task_id, requeue=True)
        assert [x.task_id for x in await b.claim(1)] == [c.task_id]
        await b.end(c.task_id, requeue=False)
    assert await held(postgres_url) == {}


async def test_a_dead_nodes_claims_are_taken_over_by_exactly_one_node(postgres_url: str) -> None:
    store = await open_pg(postgres_url)
    dead_member = Membership(store.pool, "dead", 2)
    await dead_member.join()
    dead = ClaimQueue(store.pool, "dead", dead_member.incarnation, 2)
    alive = [ClaimQueue(store.pool, n, f"i{n}", 2) for n in ("x", "y", "z")]
    for n, q in zip(("x", "y", "z"), alive, strict=True):
        await Membership(store.pool, n, 2).join()
        q.incarnation = (await store.pool.fetchval("SELECT incarnation FROM nodes WHERE name = $1", n))
    async with writing(store):
        await offered(store, big_mission(5))
        claimed = await dead.claim(5)
        for q in alive:
            assert await q.dead() == []  # its heartbeat is fresh
        await store.pool.execute("UPDATE nodes SET heartbeat_at = clock_timestamp() - interval '1 hour' "
                                 "WHERE name = 'dead'")
        found = await alive[0].dead()
        assert sorted(d.task_id for d in found) == sorted(c.task_id for c in claimed)
        wins: list[tuple[str, str]] = []

        async def take(q: ClaimQueue, d: DeadClaim) -> None:
            if await q.take_over(d):
                wins.append((q.node, d.task_id))

        async with anyio.create_task_group() as tg:
            for d in found:
                for q in alive:
                    tg.start_soon(take, q, d)
    assert sorted(t for _, t in wins) == sorted(d.task_id for d in found)  # each exactly once


async def test_a_restarted_node_does_not_inherit_the_claims_of_its_previous_life(postgres_url: str) -> None:
    store = await open_pg(postgres_url)
    first = Membership(store.pool, "n", 30)
    await first.join()
    async with writing(store):
        await offered(store, big_mission(2))
        old = await ClaimQueue(store.pool, "n", first.incarnation, 30).claim(2)
        await store.pool.execute("UPDATE nodes SET pid = 999999999 WHERE name = 'n'")  # its process is gone
        second = Membership(store.pool, "n", 30)
        await second.join()  # same host, dead pid: the node came back
        other = ClaimQueue(store.pool, "other", "io", 30)
        assert sorted(d.task_id for d in await other.dead()) == sorted(c.task_id for c in old)


async def test_a_node_name_in_use_by_a_live_daemon_is_refused(postgres_url: str) -> None:
    store = await open_pg(postgres_url)
    try:
        await Membership(store.pool, "busy", 30).join()
        await store.pool.execute("UPDATE nodes SET host = 'elsewhere' WHERE name = 'busy'")
        with pytest.raises(ClusterError, match="in use by a live daemon"):
            await Membership(store.pool, "busy", 30).join()
    finally:
        await store.close()


async def test_seize_withdraws_free_offers_and_names_the_nodes_holding_the_rest(postgres_url: str) -> None:
    store = await open_pg(postgres_url)
    leader, worker = ClaimQueue(store.pool, "L", "iL", 30), ClaimQueue(store.pool, "W", "iW", 30)
    async with writing(store):
        await offered(store, big_mission(3))
        [c] = await worker.claim(1)
        ids = ["m:1", "m:2", "m:3"]
        assert await leader.seize(ids) == {c.task_id: "W"}
    assert await held(postgres_url) == {c.task_id: "W"}


async def test_the_follower_writes_every_nodes_events_in_global_order(postgres_url: str, tmp_path: Path) -> None:
    a, b = await open_pg(postgres_url), await open_pg(postgres_url)
    a.node, b.node = "a", "b"
    log_a = EventLog(tmp_path / "a.jsonl")
    remote: list[Any] = []
    fol = EventFollower(a.target, a.events_after, log_a, "a", on_remote=remote.extend, on_claims=lambda: None)
    a.log_follower = fol.poke
    await fol.start(a.last_seq)
    async with writing(a), writing(b), anyio.create_task_group() as tg:
        tg.start_soon(fol.run)

        async def produce(store: PostgresStore, name: str) -> None:
            for i in range(30):
                await store.commit(store.tx().event(E.TaskTransition(from_="x", to=f"{name}{i}", trigger="t")))

        async with anyio.create_task_group() as inner:
            inner.start_soon(produce, a, "a")
            inner.start_soon(produce, b, "b")
        with anyio.fail_after(10):
            while log_a.last_seq < 60:
                await anyio.sleep(0.05)
        tg.cancel_scope.cancel()
    log_a.close()
    lines = list(read_lines(tmp_path / "a.jsonl"))
    assert [ln["seq"] for ln in lines] == list(range(1, 61))
    assert {ln["node"] for ln in lines} == {"a", "b"}
    assert [ln["data"]["to"] for ln in lines if ln["node"] == "a"] == [f"a{i}" for i in range(30)]
    assert [ev.seq for ev in remote] == [ln["seq"] for ln in lines if ln["node"] == "b"]  # only others' events
    assert all(ev.node == "b" for ev in remote) and replace(remote[0], node="b") == remote[0]
