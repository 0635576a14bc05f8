"""Cluster semantics as unit tests: the in-memory claim queue's rules (the PostgreSQL queue's, see
tests/integration/test_cluster_store.py), and real engines sharing it in one process — one leads and decides for
missions, every node runs claimed turns, a dead node's claims are taken over and recovered once."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import anyio.lowlevel
import pytest

from polpo.agents.base import AgentRequest
from polpo.clock import FakeClock
from polpo.engine.board import MissionBoard
from polpo.engine.lifecycle import Trigger
from polpo.model.status import AttemptStatus
from polpo.store import claim_writes
from polpo.store.claim_records import DeadClaim
from polpo.store.memory import MemoryDatabase, MemoryStore
from polpo.store.memory_claims import MemoryClaims
from tests.support.engine import ScriptAgent, config
from tests.support.memory_cluster import memory_cluster
from tests.support.stores import big_mission, offered

pytestmark = pytest.mark.anyio


def queues(*names: str) -> tuple[MemoryDatabase, MemoryStore, list[MemoryClaims]]:
    db = MemoryDatabase(FakeClock())
    qs = [MemoryClaims(db, n, f"i{n}", 2) for n in names]
    for q in qs:
        db.claims.heartbeat(q.node, q.incarnation)
    return db, MemoryStore(db.clock, db), qs


def holders(db: MemoryDatabase) -> dict[str, str | None]:
    return {tid: c["node"] for tid, c in db.claims.rows.items()}


# -- the queue's rules -------------------------------------------------------------------------------------------
async def test_a_claim_is_exclusive_between_nodes_claiming_at_once() -> None:
    db, store, (a, b) = queues("a", "b")
    got: dict[str, list[str]] = {"a": [], "b": []}
    async with anyio.create_task_group() as tg:
        tg.start_soon(store.run_writer)
        await offered(store, big_mission(60))

        async def drain(q: MemoryClaims) -> None:
            while len(got["a"]) + len(got["b"]) < 60:
                got[q.node].extend(c.task_id for c in await q.claim(3))
                await anyio.lowlevel.checkpoint()
        async with anyio.create_task_group() as inner:
            inner.start_soon(drain, a)
            inner.start_soon(drain, b)
        tg.cancel_scope.cancel()
    assert not set(got["a"]) & set(got["b"])
    assert sorted(got["a"] + got["b"]) == sorted(f"m:{i}" for i in range(1, 61))
    assert got["a"] and got["b"]
    assert {tid: holders(db)[tid] for tid in got["a"]} == dict.fromkeys(got["a"], "a")


async def test_agent_and_mission_limits_hold_across_nodes() -> None:
    db, store, (a, b) = queues("a", "b")
    async with anyio.create_task_group() as tg:
        tg.start_soon(store.run_writer)
        await offered(store, big_mission(10, "m1"), agent_limit=3)
        await offered(store, big_mission(10, "m2", limit=1, seq=2), agent="other")
        first = [c.task_id for c in await a.claim(8)] + [c.task_id for c in await b.claim(8)]
        again = [c.task_id for c in await b.claim(8)] + [c.task_id for c in await a.claim(8)]
        assert sum(t.startswith("m1:") for t in first) == 3
        assert sum(t.startswith("m2:") for t in first) == 1
        assert not again  # every limit is full on both nodes
        done = next(t for t in first if t.startswith("m1:"))
        owner = a if holders(db)[done] == "a" else b
        await owner.end(done, requeue=False)
        more = [c.task_id for c in await b.claim(8)] + [c.task_id for c in await a.claim(8)]
        tg.cancel_scope.cancel()
    assert len(more) == 1 and more[0].startswith("m1:")


async def test_only_the_holder_ends_its_claim_and_an_offer_never_takes_it_back() -> None:
    db, store, (a, b) = queues("a", "b")
    m = big_mission(1)
    async with anyio.create_task_group() as tg:
        tg.start_soon(store.run_writer)
        await offered(store, m)
        [c] = await a.claim(1)
        await offered(store, m)  # offered again (a stale event): the claim stays with a
        await b.end(c.task_id, requeue=True)  # not b's claim: nothing happens
        await store.commit(claim_writes.end(store.tx(), b.end_row(c.task_id), requeue=False))  # nor through a write
        assert holders(db) == {c.task_id: "a"}
        assert await b.claim(1) == []
        await store.commit(claim_writes.end(store.tx(), a.end_row(c.task_id), requeue=True))  # the holder gives it back
        assert [x.task_id for x in await b.claim(1)] == [c.task_id]
        await b.end(c.task_id, requeue=False)
        tg.cancel_scope.cancel()
    assert holders(db) == {}


async def test_a_dead_nodes_claims_are_taken_over_by_exactly_one_node() -> None:
    db, store, (dead, x, y, z) = queues("dead", "x", "y", "z")
    async with anyio.create_task_group() as tg:
        tg.start_soon(store.run_writer)
        await offered(store, big_mission(5))
        claimed = await dead.claim(5)
        assert await x.dead() == []  # its heartbeat is fresh
        db.clock.advance(3)  # past the lease of 2 s; the others renew theirs
        for q in (x, y, z):
            db.claims.heartbeat(q.node, q.incarnation)
        found = await x.dead()
        assert sorted(d.task_id for d in found) == sorted(c.task_id for c in claimed)
        wins: list[tuple[str, str]] = []

        async def take(q: MemoryClaims, d: DeadClaim) -> None:
            if await q.take_over(d):
                wins.append((q.node, d.task_id))
        for d in found:
            async with anyio.create_task_group() as inner:
                for q in (x, y, z):
                    inner.start_soon(take, q, d)
        tg.cancel_scope.cancel()
    assert sorted(t for _, t in wins) == sorted(d.task_id for d in found)  # each exactly once


async def test_a_restarted_node_does_not_inherit_the_claims_of_its_previous_life() -> None:
    db, store, (first, other) = queues("n", "other")
    async with anyio.create_task_group() as tg:
        tg.start_soon(store.run_writer)
        await offered(store, big_mission(2))
        old = await first.claim(2)
        second = MemoryClaims(db, "n", "again", 2)
        db.claims.heartbeat("n", second.incarnation)  # the node came back as a new incarnation
        assert sorted(d.task_id for d in await other.dead()) == sorted(c.task_id for c in old)
        assert await second.end(old[0].task_id, requeue=True) is None and holders(db)[old[0].task_id] == "n"
        assert db.claims.rows[old[0].task_id]["incarnation"] == "in"  # still the old life's, for the taker
        tg.cancel_scope.cancel()


# -- engines sharing the queue -------------------------------------------------------------------------------
def t(title: str, **fields: Any) -> dict[str, Any]:
    return {"title": title, "description": f"do {title}", "assignTo": "fake", **fields}


def any_node(*tasks: dict[str, Any], **settings: Any) -> dict[str, Any]:
    return {"tasks": list(tasks), "settings": {"affinity": "any", **settings}}


class Tally:
    """Which node ran what, and how many ran at once across the cluster (the agents share it)."""

    def __init__(self) -> None:
        self.ran: list[tuple[str, str]] = []
        self.now = 0
        self.most = 0

    def agent(self, node: str, gate: anyio.Event | None = None, hold: str | None = None) -> ScriptAgent:
        async def act(r: AgentRequest) -> int:
            self.ran.append((node, r.title))
            self.now += 1
            self.most = max(self.most, self.now)
            try:
                await anyio.sleep(0.01)
                if gate is not None and r.title == hold:
                    await gate.wait()
            finally:
                self.now -= 1
            return 0
        return ScriptAgent(act)


async def test_two_engines_share_the_work_within_the_missions_limit_and_it_completes_once(tmp_path: Path) -> None:
    tally = Tally()
    async with memory_cluster(config(tmp_path)) as c:
        await c.add("L", {"fake": tally.agent("L")})
        await c.add("W", {"fake": tally.agent("W")})
        await c.lead("L")
        # 4 slots per node (config), 8 in the cluster: the mission's limit of 6 is the one that binds
        m = await c.accept("L", any_node(*[t(f"t{i}") for i in range(16)], maxConcurrency=6))
        done = await c.wait_event("mission:completed", mission_id=m.id)
    assert done.data["outcome"] == "completed" and done.node == "L"
    assert sorted(title for _, title in tally.ran) == sorted(f"t{i}" for i in range(16))  # each once
    assert {node for node, _ in tally.ran} == {"L", "W"}
    assert 4 < tally.most <= 6  # both nodes at once, never beyond the mission's limit
    assert len(c.of("mission:completed")) == 1
    assert {r["status"] for r in c.rows("tasks", mission_id=m.id)} == {"done"}
    assert c.db.claims.rows == {}


async def test_a_mission_completes_only_when_its_last_task_finished_on_another_node(tmp_path: Path) -> None:
    tally = Tally()
    last = anyio.Event()
    async with memory_cluster(config(tmp_path)) as c:
        await c.add("L", {"fake": tally.agent("L")}, dispatch=False)  # the leader decides; it runs nothing
        await c.add("W", {"fake": tally.agent("W", last, hold="c")})
        await c.lead("L")
        m = await c.accept("L", any_node(t("a"), t("b", dependsOn=["a"]), t("c", dependsOn=["b"])))
        await c.wait_event("agent:spawned", task_id=f"{m.id}:3")
        await c.wait_event("task:transition", task_id=f"{m.id}:2", to="done")
        assert c.of("mission:completed") == []  # c still runs on W
        last.set()
        done = await c.wait_event("mission:completed", mission_id=m.id)
    assert [title for _, title in tally.ran] == ["a", "b", "c"] and {n for n, _ in tally.ran} == {"W"}
    assert done.node == "L" and done.data["outcome"] == "completed"
    runs_on_w = {e.task_id for e in c.of("agent:spawned")}
    assert runs_on_w == {f"{m.id}:1", f"{m.id}:2", f"{m.id}:3"} and {e.node for e in c.of("agent:spawned")} == {"W"}


async def test_a_dead_nodes_claim_is_recovered_once_and_runs_again_elsewhere(tmp_path: Path) -> None:
    tally = Tally()
    never = anyio.Event()
    async with memory_cluster(config(tmp_path)) as c:
        await c.add("L", {"fake": tally.agent("L")}, dispatch=False)
        await c.add("W", {"fake": tally.agent("W", never, hold="slow")})
        await c.lead("L")
        m = await c.accept("L", any_node(t("slow"), t("after", dependsOn=["slow"])))
        await c.wait_event("agent:spawned", task_id=f"{m.id}:1", node="W")
        c.crash("W")
        await c.add("W2", {"fake": tally.agent("W2")})
        await c.sweep("L")
        await c.sweep("L")  # a second look finds nothing more to recover
        done = await c.wait_event("mission:completed", mission_id=m.id)
    assert done.data["outcome"] == "completed"
    [recovered] = c.of("task:recovered", task_id=f"{m.id}:1")
    assert recovered.data["action"] == "run again" and recovered.node == "L"
    [lost] = c.of("cluster:node-lost")
    assert lost.data["node"] == "W" and lost.data["tasks"] == [f"{m.id}:1"]
    attempts = sorted(c.rows("attempts", task_id=f"{m.id}:1"), key=lambda a: a["number"])
    assert [a["status"] for a in attempts] == [AttemptStatus.INTERRUPTED, AttemptStatus.FINISHED]
    assert tally.ran == [("W", "slow"), ("W2", "slow"), ("W2", "after")]
    [task_row] = c.rows("tasks", id=f"{m.id}:1")
    assert (task_row["status"], task_row["interruptions"], task_row["retries"]) == ("done", 1, 0)


async def test_a_finish_the_leader_had_not_followed_is_decided_once_when_it_takes_the_claim_over(
        tmp_path: Path) -> None:
    """The chaos test's bug: a worker wrote its task's finish and died holding the claim; the leader, which
    had not followed that finish yet, takes the claim over and must decide the finish once, not twice (twice
    counted the mission's open tasks down twice and completed it while a task still ran)."""
    tally = Tally()
    slow = anyio.Event()
    cfg = config(tmp_path)
    async with memory_cluster(cfg) as c:
        leader = await c.add("L", {"fake": tally.agent("L")}, dispatch=False)
        await c.lead("L")
        m = await c.accept("L", any_node(t("c"), t("a"), t("b", dependsOn=["a"])))
        await leader.store.flush()
        # a worker without an engine: it claims "a", writes its whole turn, and dies still holding the claim
        w = MemoryStore(c.clock, c.db)
        w.node = "W"
        queue = MemoryClaims(c.db, "W", "iW", 2)
        c.db.claims.heartbeat("W", "iW")
        role = leader.engine.cluster
        assert role is not None
        leader.store.on_remote = None  # the leader has not followed W's events when it takes the claim over
        async with anyio.create_task_group() as tg:
            tg.start_soon(w.run_writer)
            got = {x.task_id: x for x in await queue.claim(2)}
            assert set(got) == {f"{m.id}:1", f"{m.id}:2"}
            await queue.end(f"{m.id}:1", requeue=True)  # "c" goes back to the queue
            loaded = await w.load_mission(m.id)
            assert loaded is not None
            board = MissionBoard(cfg, w, c.clock, on_ready=lambda _t: None, on_forget=lambda _m: None)
            a = loaded.mission.tasks[f"{m.id}:2"]
            tx = w.tx()
            for trigger in (Trigger.DISPATCH, Trigger.SPAWNED, Trigger.FINISHED, Trigger.PASS):
                board.transition(tx, a, trigger)
            await w.commit(tx)
            tg.cancel_scope.cancel()
        c.clock.advance(3)  # W's lease runs out
        c.heartbeat()
        await c.add("W2", {"fake": tally.agent("W2", slow, hold="c")})
        await c.wait_event("agent:spawned", task_id=f"{m.id}:1", node="W2")
        leader.store.on_remote = role.on_remote
        await c.sweep("L")
        await c.wait_event("task:transition", task_id=f"{m.id}:3", to="done")
        for _ in range(20):
            await anyio.lowlevel.checkpoint()
        assert c.of("mission:completed") == []  # "c" still runs: the mission is not over
        assert c.of("task:recovered") == []  # a finished task is not recovered as an interrupted one
        slow.set()
        done = await c.wait_event("mission:completed", mission_id=m.id)
    assert done.data["outcome"] == "completed" and done.data["report"]["tasks"]["done"] == 3
    assert len(c.of("mission:completed")) == 1
    assert sorted(title for _, title in tally.ran) == ["b", "c"]  # "a" ran once, on W
    assert c.db.claims.rows == {}


async def test_leadership_lost_and_regained_without_stopping_decides_each_thing_once(tmp_path: Path) -> None:
    """A leader whose term ended stops deciding at once but keeps running its turn; the new leader
    loads and settles (the start-up path); later the first node is elected again, and the mission completes
    once, every task run once."""
    tally = Tally()
    hold_b = anyio.Event()
    async with memory_cluster(config(tmp_path)) as c:
        first = await c.add("L", {"fake": tally.agent("L", hold_b, hold="b")})
        await c.add("W", {"fake": tally.agent("W")}, dispatch=False)
        await c.lead("L")
        m = await c.accept("L", any_node(t("a"), t("b", dependsOn=["a"]), t("c", dependsOn=["b"]),
                                         t("d", dependsOn=["c"])))
        await c.wait_event("agent:spawned", task_id=f"{m.id}:2", node="L")
        c.depose("L")
        assert first.engine.board.missions == {}  # no decision about the mission is made on L any more
        mark = len(c.events)
        hold_b.set()  # L's turn on b goes on and ends; W, elected, decides what that means
        await c.wait_event("task:transition", task_id=f"{m.id}:2", to="done")
        await c.lead("W")
        await c.wait_event("agent:spawned", task_id=f"{m.id}:3", node="L")  # offered by W, claimed by L
        c.depose("W")
        await c.lead("L")
        done = await c.wait_event("mission:completed", mission_id=m.id)
    assert done.data["outcome"] == "completed" and done.node == "L"
    assert [title for _, title in tally.ran] == ["a", "b", "c", "d"]
    assert len(c.of("mission:completed")) == 1
    assert [e.node for e in c.of("cluster:leader")] == ["L", "W", "L"]
    # between its deposition and W's election, L wrote only its own turn on b
    assert {e.task_id for e in c.events[mark:] if e.node == "L" and e.seq < c.of("cluster:leader")[1].seq} \
        <= {f"{m.id}:2"}
    assert c.of("task:recovered") == []  # nothing was lost: no node died


async def test_an_sla_failure_of_a_task_another_node_runs_is_recorded_there_and_decided_once(tmp_path: Path) -> None:
    """One fail_for_sla for one node or many: the leader asks the holder to stop; the holder records the
    failure once its agent has stopped; the leader decides what it means (the dependent fails, the mission
    ends)."""
    tally = Tally()
    never = anyio.Event()
    cfg = config(tmp_path, '[sla]\nviolation_action = "fail"\n', retries=0, fixes=0)
    async with memory_cluster(cfg) as c:
        leader = await c.add("L", {"fake": tally.agent("L")}, dispatch=False)
        await c.add("W", {"fake": tally.agent("W", never, hold="slow")})
        await c.lead("L")
        m = await c.accept("L", any_node(t("slow", deadline="PT10S"), t("after", dependsOn=["slow"])))
        await c.wait_event("agent:spawned", task_id=f"{m.id}:1", node="W")
        c.clock.advance(11)
        await leader.engine.sla.check(c.clock.now())
        done = await c.wait_event("mission:completed", mission_id=m.id)
    stop = c.of("task:stop-requested", task_id=f"{m.id}:1")
    assert [(e.node, e.data["node"], e.data["reason"]) for e in stop] == [("L", "W", "sla")]
    failed = [e for e in c.of("task:transition", task_id=f"{m.id}:1") if e.data["to"] == "failed"]
    assert [(e.node, e.data["trigger"]) for e in failed] == [("W", "sla_fail")]  # recorded by its holder
    after = [e for e in c.of("task:transition", task_id=f"{m.id}:2") if e.data["to"] == "failed"]
    assert [(e.node, e.data["trigger"]) for e in after] == [("L", "dependency_failed")]  # decided by the leader
    assert done.node == "L" and done.data["outcome"] == "failed" and len(c.of("mission:completed")) == 1
    assert tally.ran == [("W", "slow")]
    [attempt] = c.rows("attempts", task_id=f"{m.id}:1")
    assert attempt["status"] == AttemptStatus.INTERRUPTED


async def test_a_leader_that_lost_its_lock_writes_its_turn_but_none_of_its_queued_decisions(tmp_path: Path) -> None:
    """The gap fencing rule 4 left: L's lock is gone and L has not noticed; its turn on "a" ends, and in the same
    batch it decides what that means (a's dependent offered, a's cascade). The database refuses the batch for the
    lock alone; the turn's own writes are written under L's lease, its decisions are dropped, and the next leader
    decides them from the store, once."""
    tally = Tally()
    hold_a = anyio.Event()
    async with memory_cluster(config(tmp_path)) as c:
        first = await c.add("L", {"fake": tally.agent("L", hold_a, hold="a")})
        await c.add("W", {"fake": tally.agent("W")}, dispatch=False)
        await c.lead("L")
        m = await c.accept("L", any_node(t("a"), t("b", dependsOn=["a"])))
        await c.wait_event("agent:spawned", task_id=f"{m.id}:1", node="L")
        c.lose_lock("L")  # L still believes it leads
        hold_a.set()
        await c.wait_event("task:transition", task_id=f"{m.id}:1", to="done", node="L")
        await first.store.flush()  # everything L queued meanwhile has been written or dropped
        for _ in range(20):
            await anyio.lowlevel.checkpoint()
        assert first.store.term == 0  # the refusal ended its term in the store at once
        assert f"{m.id}:2" not in c.db.claims.rows  # L's offer of b was not written ...
        assert tally.ran == [("L", "a")]  # ... so nobody ran b on L's word
        [a_row] = c.rows("tasks", id=f"{m.id}:1")
        assert a_row["status"] == "done"  # the turn's own writes were
        c.depose("L")  # L notices
        await c.lead("W")
        done = await c.wait_event("mission:completed", mission_id=m.id)
    assert done.node == "W" and done.data["outcome"] == "completed"
    assert tally.ran == [("L", "a"), ("L", "b")]  # b offered by W, claimed by L: each task ran once
    assert len(c.of("mission:completed")) == 1
    assert {e.node for e in c.of("task:transition", task_id=f"{m.id}:2")} == {"L"}  # only its holder wrote b
