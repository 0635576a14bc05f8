"""The engine, the runner and recovery on the in-memory store: no daemon, no watcher, no database file.

Agents are the test's own (``ScriptAgent``); checks are the real ones against real files in the workspace.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
import pytest

from polpo.agents.base import AgentRequest
from polpo.clock import FakeClock
from polpo.engine.commands import CommandRefused
from polpo.model.status import AttemptStatus, TaskStatus
from polpo.store.memory import MemoryStore
from tests.support.engine import ScriptAgent, config, engine_on_memory

pytestmark = pytest.mark.anyio


def task(title: str, **fields: Any) -> dict[str, Any]:
    return {"title": title, "description": f"do {title}", "assignTo": "fake", **fields}


def writes(name: str, content: str = "x") -> ScriptAgent:
    def act(r: AgentRequest) -> int:
        (r.workspace / name).write_text(content)
        return 0
    return ScriptAgent(act)


def rows(store: MemoryStore, table: str, **eq: Any) -> list[dict[str, Any]]:
    return store.rows(table, lambda r: all(r.get(k) == v for k, v in eq.items()))


async def test_a_chain_runs_in_dependency_order_and_the_mission_completes(tmp_path: Path) -> None:
    order: list[str] = []
    agent = ScriptAgent(lambda r: order.append(r.title) or 0)
    async with engine_on_memory(config(tmp_path), agents={"fake": agent}) as run:
        m = await run.accept({"tasks": [task("b", dependsOn=["a"]), task("a"), task("c", dependsOn=["b"])]})
        done = await run.wait_event("mission:completed", mission_id=m.id)
    assert order == ["a", "b", "c"]
    assert done.data["outcome"] == "completed" and done.data["report"]["tasks"]["done"] == 3
    assert {r["status"] for r in rows(run.store, "tasks", mission_id=m.id)} == {"done"}
    assert rows(run.store, "missions", id=m.id)[0]["status"] == "completed"
    seqs = [e.seq for e in run.store.events]
    assert seqs == list(range(1, len(seqs) + 1))  # stamped in commit order, no gap


async def test_a_failed_check_gets_a_fix_with_feedback_then_passes(tmp_path: Path) -> None:
    def act(r: AgentRequest) -> int:
        if r.kind == "fix":
            (r.workspace / "out.txt").write_text("ok")
        return 0
    agent = ScriptAgent(act)
    async with engine_on_memory(config(tmp_path), agents={"fake": agent}) as run:
        m = await run.accept({"tasks": [task("t", expectations=[{"type": "file_exists", "path": "out.txt"}])]})
        await run.wait_event("mission:completed", mission_id=m.id)
    assert [r.kind for r in agent.requests] == ["initial", "fix"]
    assert agent.requests[1].feedback is not None and "out.txt" in agent.requests[1].feedback
    fix = run.of("task:fix")[0]
    assert fix.data["check"] == "file_exists out.txt"
    [t] = rows(run.store, "tasks", mission_id=m.id)
    assert (t["status"], t["attempts"], t["total_fixes"]) == ("done", 2, 1)


async def test_a_failing_dependency_fails_its_dependents_at_once(tmp_path: Path) -> None:
    agent = ScriptAgent(lambda r: 1 if r.title == "a" else 0)
    async with engine_on_memory(config(tmp_path, retries=0, fixes=0),
                                agents={"fake": agent}) as run:
        m = await run.accept({"tasks": [task("a"), task("b", dependsOn=["a"])]})
        done = await run.wait_event("mission:completed", mission_id=m.id)
    assert [r.title for r in agent.requests] == ["a"]  # b never ran
    b = rows(run.store, "tasks", id=f"{m.id}:2")[0]
    assert (b["status"], b["reason"]) == ("failed", "dependency failed: a")
    assert done.data["outcome"] == "failed"


async def test_a_runner_that_raises_fails_only_its_task(tmp_path: Path) -> None:
    def act(r: AgentRequest) -> int:
        if r.title == "boom":
            raise RuntimeError("a bug in an agent adapter")
        return 0
    async with engine_on_memory(config(tmp_path), agents={"fake": ScriptAgent(act)}) as run:
        bad = await run.accept({"tasks": [task("boom")]}, source="/missions/bad.json")
        good = await run.accept({"tasks": [task("fine"), task("after", dependsOn=["fine"])]},
                                source="/missions/good.json")
        failed = await run.wait_event("mission:completed", mission_id=bad.id)
        ok = await run.wait_event("mission:completed", mission_id=good.id)
    assert failed.data["outcome"] == "failed" and ok.data["outcome"] == "completed"
    error = run.of("task:error", task_id=f"{bad.id}:1")[0]
    assert "RuntimeError: a bug in an agent adapter" in error.data["error"]
    last = run.of("task:transition", task_id=f"{bad.id}:1")[-1]
    assert (last.data["to"], last.data["trigger"]) == ("failed", "internal_error")
    assert "internal error" in last.data["reason"]
    [attempt] = rows(run.store, "attempts", task_id=f"{bad.id}:1")
    assert attempt["status"] == AttemptStatus.INTERRUPTED


async def test_a_gate_by_task_id_still_blocks_after_a_crash(tmp_path: Path) -> None:
    store = MemoryStore(FakeClock())
    release = anyio.Event()

    async def slow(r: AgentRequest) -> int:
        if r.title == "build":
            await release.wait()
        return 0
    doc = {"tasks": [task("build"), task("deploy")],
           "qualityGates": [{"name": "g", "afterTasks": ["1"], "blocksTasks": ["2"]}]}
    async with engine_on_memory(config(tmp_path), agents={"fake": ScriptAgent(slow)}, store=store, stop=False) as run:
        m = await run.accept(doc)
        await run.wait_event("agent:spawned", task_id=f"{m.id}:1")
    # "kill -9": a new engine on what was committed
    release.set()
    agent = ScriptAgent(slow)
    async with engine_on_memory(config(tmp_path), agents={"fake": agent}, store=store) as run:
        await run.wait_event("mission:completed", mission_id=m.id)
    assert [r.title for r in agent.requests] == ["build", "deploy"]  # the gate held deploy back
    passed = run.of("quality:gate:passed")
    assert len(passed) == 1 and passed[0].data["gateName"] == "g"
    gate_seq = passed[0].seq
    deploy_dispatch = next(e for e in run.of("task:transition", task_id=f"{m.id}:2") if e.data["to"] == "assigned")
    assert deploy_dispatch.seq > gate_seq


async def test_recovery_reruns_an_interrupted_attempt_without_using_a_retry(tmp_path: Path) -> None:
    store = MemoryStore(FakeClock())
    hang = anyio.Event()

    async def first(r: AgentRequest) -> int:
        await hang.wait()  # never set: the "daemon" dies while the agent runs
        return 0
    async with engine_on_memory(config(tmp_path), agents={"fake": ScriptAgent(first)}, store=store,
                                stop=False) as run:
        m = await run.accept({"tasks": [task("t")]})
        await run.wait_event("agent:spawned")
    [t] = rows(store, "tasks")
    assert t["status"] == TaskStatus.IN_PROGRESS
    again = ScriptAgent(lambda r: 0)
    async with engine_on_memory(config(tmp_path), agents={"fake": again}, store=store) as run:
        await run.wait_event("mission:completed", mission_id=m.id)
    recovered = run.of("task:recovered")[0]
    assert (recovered.data["previousStatus"], recovered.data["action"]) == ("in_progress", "run again")
    first_attempt = rows(store, "attempts", id=f"{m.id}:1/1")[0]
    assert first_attempt["status"] == "interrupted"
    [t] = rows(store, "tasks")
    assert (t["status"], t["retries"], t["attempts"]) == ("done", 0, 2)
    assert [r.kind for r in again.requests] == ["initial"]  # the same kind of run again, not a retry


async def test_a_stored_result_is_assessed_after_a_crash_without_running_the_agent(tmp_path: Path) -> None:
    store = MemoryStore(FakeClock())
    doc = {"tasks": [task("t", expectations=[{"type": "script", "command": "test -f gate && exit 0; sleep 30"}])]}
    async with engine_on_memory(config(tmp_path), agents={"fake": writes("out.txt")}, store=store,
                                stop=False) as run:
        m = await run.accept(doc)
        await run.wait_event("assessment:check:started")  # the check runs; the "daemon" dies before it ends
    ws = tmp_path / "state" / "workspaces" / m.id
    (ws / "gate").write_text("")
    agent = writes("out.txt")
    async with engine_on_memory(config(tmp_path), agents={"fake": agent}, store=store) as run:
        done = await run.wait_event("mission:completed", mission_id=m.id)
    assert agent.requests == []  # the agent's stored result was assessed; it did not run again
    assert run.of("task:recovered")[0].data["action"] == "resume checks"
    assert done.data["outcome"] == "completed"


async def test_three_interruptions_count_as_a_failed_run(tmp_path: Path) -> None:
    store = MemoryStore(FakeClock())

    async def hangs(r: AgentRequest) -> int:
        await anyio.sleep_forever()
        return 0
    m = None
    for _ in range(3):
        async with engine_on_memory(config(tmp_path), agents={"fake": ScriptAgent(hangs)}, store=store,
                                    stop=False) as run:
            if m is None:
                m = await run.accept({"tasks": [task("t")]})
            await run.wait_event("agent:spawned")
    async with engine_on_memory(config(tmp_path), agents={"fake": ScriptAgent(lambda r: 0)}, store=store) as run:
        assert m is not None
        await run.wait_event("mission:completed", mission_id=m.id)
    retry = run.of("task:retry")[0]
    assert retry.data["reason"] == "interrupted 3 times"
    [t] = rows(store, "tasks")
    assert (t["status"], t["retries"]) == ("done", 1)


async def test_a_retry_through_the_command_inbox_reopens_a_finished_mission(tmp_path: Path) -> None:
    attempts: list[str] = []

    def act(r: AgentRequest) -> int:
        attempts.append(f"{r.title}:{r.kind}")
        return 1 if len(attempts) == 1 else 0
    cfg = config(tmp_path, retries=0, fixes=0)
    async with engine_on_memory(cfg, agents={"fake": ScriptAgent(act)}) as run, anyio.create_task_group() as tg:
        tg.start_soon(run.engine.commands.run_inbox, 0.01)
        m = await run.accept({"tasks": [task("flaky")]})
        await run.wait_event("mission:completed", mission_id=m.id)
        cid = run.store.queue_command("retry", f"{m.id}:1")
        await run.wait_event("mission:completed", mission_id=m.id, outcome="completed")
        tg.cancel_scope.cancel()
    command = rows(run.store, "commands", id=cid)[0]
    assert command["status"] == "done" and command["result"].startswith("retrying")
    assert attempts == ["flaky:initial", "flaky:retry"]
    assert [e.data["outcome"] for e in run.of("mission:completed")] == ["failed", "completed"]
    assert len(run.of("mission:resumed")) == 1


async def test_a_refused_retry_of_a_finished_mission_does_not_leave_it_loaded(tmp_path: Path) -> None:
    async with engine_on_memory(config(tmp_path), agents={"fake": ScriptAgent(lambda _r: 0)}) as run:
        m = await run.accept({"tasks": [task("fine")]})
        await run.wait_event("mission:completed", mission_id=m.id)
        assert m.id not in run.engine.board.missions
        status, answer = await run.engine.commands.apply("retry", f"{m.id}:1")
        assert (status, answer) == ("refused", f"task {m.id}:1 is done; only failed tasks and tasks on hold can be "
                                               "retried")
        assert m.id not in run.engine.board.missions  # read back to look, and forgotten again
        assert f"{m.id}:1" not in run.engine.board.tasks


async def test_cancel_stops_the_running_agent_and_fails_open_tasks(tmp_path: Path) -> None:
    async def hangs(r: AgentRequest) -> int:
        await anyio.sleep_forever()
        return 0
    async with engine_on_memory(config(tmp_path), agents={"fake": ScriptAgent(hangs)}) as run:
        m = await run.accept({"tasks": [task("a"), task("b", dependsOn=["a"])]})
        await run.wait_event("agent:spawned")
        assert run.engine.commands.cancel_mission(m.id) == f"cancelling mission {m.id}"
        done = await run.wait_event("mission:completed", mission_id=m.id)
    assert done.data["outcome"] == "cancelled"
    reasons = {r["title"]: (r["status"], r["reason"]) for r in rows(run.store, "tasks", mission_id=m.id)}
    assert reasons == {"a": ("failed", "mission cancelled"), "b": ("failed", "mission cancelled")}
    assert rows(run.store, "attempts")[0]["status"] == "interrupted"


async def test_a_side_effects_task_waits_for_approval_before_it_runs_again(tmp_path: Path) -> None:
    agent = ScriptAgent(lambda r: 0 if r.kind == "retry" else 2)
    async with engine_on_memory(config(tmp_path), agents={"fake": agent}) as run:
        m = await run.accept({"tasks": [task("deploy", sideEffects=True)]})
        await run.wait_event("task:retry:blocked")
        assert [r.kind for r in agent.requests] == ["initial"]
        assert run.engine.commands.approve_task(f"{m.id}:1") == f"approved {m.id}:1: its retry runs next"
        with pytest.raises(CommandRefused, match="not awaiting approval"):
            run.engine.commands.approve_task(f"{m.id}:1")
        done = await run.wait_event("mission:completed", mission_id=m.id)
    assert [r.kind for r in agent.requests] == ["initial", "retry"]
    assert run.of("task:approved")[0].data["next"] == "retry"
    assert done.data["outcome"] == "completed"


async def test_events_carry_typed_payloads_in_camel_case(tmp_path: Path) -> None:
    async with engine_on_memory(config(tmp_path), agents={"fake": ScriptAgent()}) as run:
        m = await run.accept({"tasks": [task("t")]})
        await run.wait_event("mission:completed", mission_id=m.id)
    finished = run.of("agent:finished")[0].data
    assert set(finished) == {"agentName", "attempt", "exitCode", "duration", "timedOut", "error", "filesChanged"}
    transition = run.of("task:transition")[0].data
    assert transition["from"] == "pending" and "exitCode" not in transition  # optional fields left out when None
    json.dumps([e.data for e in run.store.events])


async def test_a_big_mission_is_written_in_chunks_and_a_crash_between_them_loses_no_task(tmp_path: Path) -> None:
    store = MemoryStore(FakeClock())
    doc = {"tasks": [task(f"t{i}") for i in range(5)]}
    gate = anyio.Event()

    async def first_chunk_only(r: AgentRequest) -> int:
        await gate.wait()  # nothing finishes before the "crash"
        return 0
    async with engine_on_memory(config(tmp_path), agents={"fake": ScriptAgent(first_chunk_only)}, store=store,
                                stop=False) as run:
        run.engine.admission.task_chunk = 2
        m = await run.accept(doc)
    # simulate a crash after the first chunk: drop the rows of the tasks the later chunks wrote
    for tid in (f"{m.id}:3", f"{m.id}:4", f"{m.id}:5"):
        del store.tables["tasks"][(tid,)]
    store.events = [e for e in store.events if not (e.event == "task:created" and e.task_id in
                                                     {f"{m.id}:3", f"{m.id}:4", f"{m.id}:5"})]
    gate.set()
    agent = ScriptAgent()
    async with engine_on_memory(config(tmp_path), agents={"fake": agent}, store=store) as run:
        done = await run.wait_event("mission:completed", mission_id=m.id)
    assert done.data["report"]["tasks"] == {"total": 5, "done": 5, "failed": 0}
    assert sorted(r.title for r in agent.requests) == ["t0", "t1", "t2", "t3", "t4"]
    assert sorted(e.task_id for e in run.of("task:created")) == [f"{m.id}:3", f"{m.id}:4", f"{m.id}:5"]


async def test_accepting_writes_the_tasks_in_chunks_one_commit_each(tmp_path: Path) -> None:
    from polpo.agents.registry import AgentFactory
    from polpo.engine.admission import Admission
    from polpo.engine.board import MissionBoard
    from polpo.mission.loader import load_mission

    clock = FakeClock()
    store = MemoryStore(clock)
    cfg = config(tmp_path)
    board = MissionBoard(cfg, store, clock, on_ready=lambda t: None, on_forget=lambda m: None)
    adm = Admission(cfg, store, clock, board, AgentFactory(cfg, clock, extra={"fake": ScriptAgent()}))
    adm.task_chunk = 2
    spec = load_mission(json.dumps({"tasks": [task(f"t{i}") for i in range(5)]}).encode(), known_agents=["fake"]).spec
    assert spec is not None
    async with anyio.create_task_group() as tg:
        tg.start_soon(store.run_writer)
        m = await adm.accept(spec=spec, source="/m/big.json", digest="d", warnings=[])
        tg.cancel_scope.cancel()
    assert store.commits == 3  # mission + tasks 1-2, tasks 3-4, task 5
    assert len(rows(store, "tasks", mission_id=m.id)) == 5
    names = [e.event for e in store.events]
    assert names == ["mission:accepted"] + ["task:created"] * 5


async def test_an_argv_too_long_fails_the_task_at_once_and_the_description_is_stored_once(tmp_path: Path) -> None:
    agents = '[agents.sh]\ntype = "command"\ncommand = ["bash", "-c", "{description}"]\n'
    description = "true # " + "x" * 300_000  # one argument over Linux's 128 KiB limit
    async with engine_on_memory(config(tmp_path, agents, retries=2, fixes=1)) as run:
        m = await run.accept({"tasks": [{"title": "big", "description": description, "assignTo": "sh"}]})
        done = await run.wait_event("mission:completed", mission_id=m.id)
    assert done.data["outcome"] == "failed"
    [attempt] = rows(run.store, "attempts")  # no retry: another attempt could not start either
    assert attempt["permanent"] == 1 and "too long" in attempt["error"]
    assert len(attempt["prompt"]) < 2000 and "300007 characters" in attempt["prompt"]
    [t] = rows(run.store, "tasks")
    assert t["status"] == "failed" and "cannot run this task" in t["reason"] and t["retries"] == 0
    assert not run.of("task:retry")


async def test_a_finish_decided_twice_counts_once_and_the_mission_waits_for_its_running_task(tmp_path: Path) -> None:
    release = anyio.Event()

    async def act(r: AgentRequest) -> Any:
        if r.title == "slow":
            await release.wait()
        return 0
    async with engine_on_memory(config(tmp_path), agents={"fake": ScriptAgent(act)}) as run:
        m = await run.accept({"tasks": [task("quick"), task("slow")]})
        quick = next(t for t in m.tasks.values() if t.title == "quick")
        await run.wait_event("task:transition", task_id=quick.id, to="done")
        # a second decision of the same finish (as a recovery that reads a finish already followed made it)
        run.engine.board.after_change(quick)
        assert m.open_tasks == 1  # the slow task still runs: the mission is not complete
        assert not run.of("mission:completed")
        release.set()
        done = await run.wait_event("mission:completed", mission_id=m.id)
    assert done.data["outcome"] == "completed" and done.data["report"]["tasks"]["done"] == 2
