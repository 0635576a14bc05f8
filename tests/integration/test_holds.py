"""Checkpoints, delays and approvals "before" on the real engine and the in-memory store (a "crash" is leaving
the harness without stopping; a new engine on the same store recovers from what was committed).

Time is a FakeClock: a delay's expiry and an approval's timeout are decided by ``tick`` with the clock's time,
the same call the daemon's inbox loop makes.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import anyio.lowlevel
import pytest

from polpo.clock import FakeClock
from polpo.command_args import encode
from polpo.store.memory import MemoryStore
from tests.support.engine import ScriptAgent, config, engine_on_memory

pytestmark = pytest.mark.anyio


def task(title: str, **fields: Any) -> dict[str, Any]:
    return {"title": title, "description": f"do {title}", "assignTo": "fake", **fields}


def build_deploy(**top: Any) -> dict[str, Any]:
    return {"tasks": [task("Build"), task("Deploy", dependsOn=["Build"]), task("Docs")], **top}


CHECKPOINT = {"name": "go-live", "afterTasks": ["Build"], "blocksTasks": ["Deploy"],
              "message": "Build is done: check it before the deploy"}


async def settle() -> None:
    """Let the engine run what is ready (bounded: a few scheduler turns)."""
    for _ in range(50):
        await anyio.lowlevel.checkpoint()


async def test_a_checkpoint_stops_its_blocked_task_until_resumed_and_others_go_on(tmp_path: Path) -> None:
    agent = ScriptAgent()
    async with engine_on_memory(config(tmp_path), agents={"fake": agent}) as run:
        m = await run.accept(build_deploy(checkpoints=[CHECKPOINT]))
        reached = await run.wait_event("checkpoint:reached", mission_id=m.id)
        await run.wait_event("task:transition", task_id=f"{m.id}:3", to="done")
        await settle()
        assert sorted(r.title for r in agent.requests) == ["Build", "Docs"]
        assert reached.data["message"] == CHECKPOINT["message"]
        assert reached.data["resume"] == f"polpo resume {m.id} go-live"
        assert run.engine.board.tasks[f"{m.id}:2"].status == "pending"
        rows = run.store.rows("holds")
        assert [(r["kind"], r["name"], r["status"]) for r in rows] == [("checkpoint", "go-live", "reached")]
        status, answer = await run.engine.commands.apply("resume", encode(m.id, by="ada", note="looks good"))
        assert status == "done", answer
        done = await run.wait_event("mission:completed", mission_id=m.id)
    assert done.data["outcome"] == "completed"
    resumed = run.of("checkpoint:resumed")[0]
    assert (resumed.data["by"], resumed.data["note"]) == ("ada", "looks good")
    assert [r.title for r in agent.requests][-1] == "Deploy"
    assert len(run.of("checkpoint:reached")) == 1


async def test_resume_refuses_what_does_not_apply(tmp_path: Path) -> None:
    gate = ScriptAgent(lambda r: 0)
    async with engine_on_memory(config(tmp_path), agents={"fake": gate}) as run:
        m = await run.accept(build_deploy(checkpoints=[CHECKPOINT]))
        assert await run.engine.commands.apply("resume", encode(m.id, checkpoint="nope")) == (
            "refused", f"mission {m.id} has no checkpoint 'nope' (its checkpoints: go-live)")
        await run.wait_event("checkpoint:reached", mission_id=m.id)
        assert (await run.engine.commands.apply("resume", encode(m.id, checkpoint="go-live")))[0] == "done"
        status, answer = await run.engine.commands.apply("resume", encode(m.id, checkpoint="go-live"))
        assert status == "refused" and "resumed already" in answer
        await run.wait_event("mission:completed", mission_id=m.id)


async def test_a_reached_checkpoint_survives_a_crash_and_cancel_still_works(tmp_path: Path) -> None:
    store = MemoryStore(FakeClock())
    cfg = config(tmp_path)
    async with engine_on_memory(cfg, agents={"fake": ScriptAgent()}, store=store, clock=store.clock,
                                stop=False) as run:
        m = await run.accept(build_deploy(checkpoints=[CHECKPOINT]))
        await run.wait_event("checkpoint:reached", mission_id=m.id)
        await run.wait_event("task:transition", task_id=f"{m.id}:3", to="done")
        await store.flush()
    agent = ScriptAgent()
    async with engine_on_memory(cfg, agents={"fake": agent}, store=store, clock=store.clock) as run:
        await settle()
        assert agent.requests == []  # Deploy still waits for a person
        assert run.engine.board.tasks[f"{m.id}:2"].status == "pending"
        assert run.of("checkpoint:reached") == []  # not reached a second time
        assert (await run.engine.commands.apply("cancel", m.id))[0] == "done"
        done = await run.wait_event("mission:completed", mission_id=m.id)
    assert done.data["outcome"] == "cancelled" and agent.requests == []


async def test_a_delay_releases_its_task_when_the_clock_passes_its_expiry_across_a_restart(tmp_path: Path) -> None:
    clock = FakeClock()
    store = MemoryStore(clock)
    cfg = config(tmp_path)
    delay = {"name": "cool-down", "afterTasks": ["Build"], "blocksTasks": ["Deploy"], "duration": "PT2H"}
    async with engine_on_memory(cfg, agents={"fake": ScriptAgent()}, store=store, clock=clock, stop=False) as run:
        m = await run.accept(build_deploy(delays=[delay]))
        started = await run.wait_event("delay:started", mission_id=m.id)
        assert started.data["duration"] == "PT2H"
        assert started.data["expiresAt"] == "2026-01-01T02:00:00.000Z"
        clock.advance(3600)
        assert run.engine.board.holds.tick() == 0
        await store.flush()
    agent = ScriptAgent()
    async with engine_on_memory(cfg, agents={"fake": agent}, store=store, clock=clock) as run:
        clock.advance(3599)
        assert run.engine.board.holds.tick() == 0  # 1 s before the stored expiry: still waiting
        await settle()
        assert agent.requests == []
        clock.advance(1)
        assert run.engine.board.holds.tick() == 1
        await run.wait_event("delay:expired", mission_id=m.id)
        done = await run.wait_event("mission:completed", mission_id=m.id)
    assert done.data["outcome"] == "completed" and [r.title for r in agent.requests] == ["Deploy"]


async def test_approval_before_a_task_never_starts_its_agent_until_approved(tmp_path: Path) -> None:
    agent = ScriptAgent()
    async with engine_on_memory(config(tmp_path), agents={"fake": agent}) as run:
        m = await run.accept({"tasks": [task("Send email", approval="before")]})
        asked = await run.wait_event("approval:requested", task_id=f"{m.id}:1")
        await settle()
        assert agent.requests == []
        assert run.engine.board.tasks[f"{m.id}:1"].status == "awaiting_approval"
        assert asked.data["approve"] == f"polpo approve {m.id}:1"
        assert (await run.engine.commands.apply("approve", encode(f"{m.id}:1", by="ada")))[0] == "done"
        done = await run.wait_event("mission:completed", mission_id=m.id)
    assert done.data["outcome"] == "completed" and len(agent.requests) == 1
    assert run.of("approval:resolved")[0].data == {"status": "approved", "by": "ada"}


async def test_a_rejection_fails_the_task_with_the_reason(tmp_path: Path) -> None:
    agent = ScriptAgent()
    async with engine_on_memory(config(tmp_path), agents={"fake": agent}) as run:
        m = await run.accept({"tasks": [task("Send email", approval="before")]})
        await run.wait_event("approval:requested", task_id=f"{m.id}:1")
        status, _ = await run.engine.commands.apply("reject", encode(f"{m.id}:1", by="bob", reason="wrong client"))
        assert status == "done"
        done = await run.wait_event("mission:completed", mission_id=m.id)
        assert done.data["outcome"] == "failed" and agent.requests == []
        failed = run.of("task:transition", task_id=f"{m.id}:1", to="failed")[0]
        assert failed.data["reason"] == "rejected by bob: wrong client"
        assert (await run.engine.commands.apply("retry", f"{m.id}:1"))[0] == "done"
        with anyio.fail_after(10):
            while len(run.of("approval:requested")) < 2:  # a retry asks again
                await anyio.sleep(0.01)
        assert run.engine.board.tasks[f"{m.id}:1"].status == "awaiting_approval" and agent.requests == []
        await run.engine.commands.apply("cancel", m.id)


@pytest.mark.parametrize(("action", "outcome", "runs"), [("fail", "failed", 0), ("approve", "completed", 1)])
async def test_an_approval_timeout_applies_its_policy(tmp_path: Path, action: str, outcome: str, runs: int) -> None:
    clock = FakeClock()
    agent = ScriptAgent()
    async with engine_on_memory(config(tmp_path), agents={"fake": agent}, clock=clock) as run:
        m = await run.accept({"tasks": [task("Send", approval="before", approvalTimeout="PT30M",
                                             approvalTimeoutAction=action)]})
        await run.wait_event("approval:requested", task_id=f"{m.id}:1")
        clock.advance(1799)
        assert run.engine.commands.people.tick(clock.now()) == 0
        clock.advance(1)
        assert run.engine.commands.people.tick(clock.now()) == 1
        done = await run.wait_event("mission:completed", mission_id=m.id)
    assert done.data["outcome"] == outcome and len(agent.requests) == runs
    assert run.of("approval:resolved")[0].data["status"] == ("timeout" if action == "fail" else "approved")
