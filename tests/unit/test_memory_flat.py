"""Memory stays flat with many tasks (issue 14, item 8): what the mechanism guarantees, not RSS.

A mission keeps its spec as the stored JSON (``MissionDoc``); a waiting task holds no parsed ``TaskSpec``; a task
parses its own for its turn and drops it when the turn ends; a finished mission's records leave memory. The RSS
numbers live in scripts/bench_memory.py and scripts/bench_throughput.py.
"""

from __future__ import annotations

import gc
import json
import weakref
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import anyio
import pytest

from polpo.agents.base import AgentRequest
from polpo.clock import FakeClock
from polpo.intake.check import check_mission
from polpo.mission.loader import load_mission
from polpo.mission.schema import MissionSpec, TaskSpec
from polpo.model.doc import MissionDoc
from polpo.model.records import Task
from polpo.model.status import TaskStatus
from polpo.store.memory import MemoryStore
from tests.support.engine import EngineRun, ScriptAgent, config, engine_on_memory

DOC: dict[str, Any] = {
    "name": "n", "description": "naïve ☃",
    "tasks": [
        {"title": "a", "description": "x", "assignTo": "fake", "priority": 2, "deadline": "P1D",
         "maxDuration": "PT5M", "isolation": "none"},
        {"title": "b", "description": "y", "dependsOn": ["a"], "assignTo": "fake",
         "expectations": [{"type": "file_exists", "path": "out.txt"}],
         "notifications": {"rules": [{"events": ["task:*"], "channels": ["c"]}]}},
        {"title": "c", "description": "z", "dependsOn": ["a", "b"]},
    ],
    "qualityGates": [{"name": "g", "afterTasks": ["a"], "blocksTasks": ["c"]}],
    "settings": {"maxConcurrency": 2}, "deadline": "2030-01-01T00:00:00Z",
}


CRASHED = DOC | {"tasks": [{k: v for k, v in t.items() if k != "expectations"} | {"assignTo": "fake"}
                           for t in DOC["tasks"]]}


def spec_of(doc: dict[str, Any]) -> MissionSpec:
    spec = load_mission(json.dumps(doc).encode(), known_agents=None).spec
    assert spec is not None
    return spec


# --------------------------------------------------------------------------------------- the stored form
def test_the_document_is_the_json_the_store_kept_before_and_reads_back_to_the_same_spec() -> None:
    spec = spec_of(DOC)
    doc = MissionDoc.of(spec)
    assert doc.text() == spec.model_dump_json(exclude_none=True)  # the store's spec column is unchanged
    again = MissionDoc.parse(doc.text())
    assert again.blob == doc.blob
    assert MissionSpec.model_validate_json(again.text()) == spec
    assert [again.task(i) for i in range(len(again))] == list(spec.tasks)
    assert again.head == spec and len(again.head.tasks) == 3 and again.head.tasks[-1] == spec.tasks[2]


def test_the_document_keeps_what_the_engine_reads_while_tasks_wait() -> None:
    spec = spec_of(DOC)
    doc = MissionDoc.parse(MissionDoc.of(spec).text())
    assert doc.titles == ["a", "b", "c"] and doc.assignees == ["fake", "fake", None]
    assert [doc.priority(i) for i in range(3)] == [2.0, 1.0, 1.0]
    assert [doc.deps(i) for i in range(3)] == [(), (0,), (0, 1)]
    assert doc.deadline(0) == spec.tasks[0].deadline and doc.deadline(1) is None
    assert doc.notifications(1) == spec.tasks[1].notifications and doc.notifications(0) is None
    assert doc.isolation(0) == "none" and doc.isolation(2) is None
    assert MissionDoc.of(doc.head) is doc  # a kept head gives its document back, nothing is parsed again
    changed = MissionDoc.of(doc.head.model_copy(update={"name": "other"}))  # a changed head is a new document
    assert changed is not doc and changed.head.name == "other" and changed.titles == doc.titles


def test_the_intake_verdict_is_a_document_head_not_a_list_of_models() -> None:
    v = check_mission(json.dumps(DOC).encode(), known_agents=None, channels=None)
    assert v.spec is not None
    doc = MissionDoc.of(v.spec)
    assert v.spec.tasks is doc.head.tasks and not isinstance(v.spec.tasks, list)
    assert list(v.spec.tasks) == list(spec_of(DOC).tasks)


def test_a_task_parses_its_spec_once_and_drops_it_on_request() -> None:
    spec = spec_of(DOC)
    doc = MissionDoc.of(spec)
    t = Task(id="m:2", mission_id="m", idx=1, title="b", agent="fake", doc=doc, status=TaskStatus.PENDING,
             updated_at=datetime(2026, 1, 1, tzinfo=UTC))
    assert not t.spec_loaded and t.priority == 1.0 and t.notifications is not None
    first = t.spec
    assert isinstance(first, TaskSpec) and first == spec.tasks[1] and t.spec is first and t.spec_loaded
    t.drop_spec()
    assert not t.spec_loaded and t.spec == first and t.spec is not first


# --------------------------------------------------------------------------------------- in the engine
def _loaded(run: EngineRun) -> set[str]:
    return {t.id for t in run.engine.board.tasks.values() if t.spec_loaded}


@pytest.mark.anyio
async def test_only_tasks_in_their_turn_hold_a_parsed_spec(tmp_path: Path) -> None:
    seen: list[tuple[str, set[str], set[str]]] = []
    holder: list[EngineRun] = []

    release = anyio.Event()

    async def act(r: AgentRequest) -> int:
        run = holder[0]
        seen.append((r.task_id, _loaded(run), set(run.engine.dispatcher.running)))
        await release.wait()  # the first wave holds on, so the tasks behind it are certainly waiting
        return 0

    async with engine_on_memory(config(tmp_path), agents={"fake": ScriptAgent(act)}) as run:
        holder.append(run)
        m = await run.accept({"tasks": [{"title": f"t{i}", "description": "d", "assignTo": "fake",
                                         **({"dependsOn": [f"t{i - 1}"]} if i % 3 else {})} for i in range(30)]})
        waiting = [t for t in m.tasks.values() if t.status == "pending"]
        assert len(waiting) >= 20 and not any(t.spec_loaded for t in waiting)  # the 20 with a dependency, at least
        release.set()
        await run.wait_event("mission:completed", mission_id=m.id)
        assert not any(t.spec_loaded for t in m.tasks.values())  # every turn ended: every spec dropped
    assert len(seen) == 30
    for task_id, loaded, running in seen:
        assert task_id in loaded  # the running task parsed its own spec
        assert loaded <= running  # and no waiting or finished task holds one


@pytest.mark.anyio
async def test_a_finished_mission_and_its_tasks_leave_memory(tmp_path: Path) -> None:
    async with engine_on_memory(config(tmp_path), agents={"fake": ScriptAgent()}) as run:
        m = await run.accept({"tasks": [{"title": f"gone{i}", "description": "d", "assignTo": "fake"}
                                        for i in range(20)]})
        mid, gone = m.id, weakref.ref(m)
        del m
        await run.wait_event("mission:completed", mission_id=mid)
        await run.store.flush()
        gc.collect()
        assert mid not in run.engine.board.missions
        assert not [t for t in run.engine.board.tasks if t.startswith(f"{mid}:")]
        assert gone() is None
        # this mission's own (another test's mission may have the same id, and its objects are not ours to check)
        assert not [o for o in gc.get_objects() if isinstance(o, Task) and o.mission_id == mid
                    and o.title.startswith("gone")]
        assert not [o for o in gc.get_objects() if isinstance(o, MissionDoc) and o.titles[:1] == ["gone0"]]


@pytest.mark.anyio
async def test_tasks_read_back_after_a_crash_hold_no_parsed_spec(tmp_path: Path) -> None:
    store = MemoryStore(FakeClock())
    release = anyio.Event()

    async def blocked(r: AgentRequest) -> int:
        await release.wait()
        return 0

    async with engine_on_memory(config(tmp_path), agents={"fake": ScriptAgent(blocked)}, store=store,
                                stop=False) as run:
        m = await run.accept(CRASHED)
        await run.wait_event("agent:spawned", mission_id=m.id)
    async with engine_on_memory(config(tmp_path), agents={"fake": ScriptAgent()}, store=store) as run:
        m2 = run.engine.board.missions[m.id]
        assert m2 is not m and m2.doc.text() == m.doc.text()
        assert _loaded(run) <= set(run.engine.dispatcher.running)
        assert not any(m2.tasks[f"{m.id}:{i}"].spec_loaded for i in (2, 3))  # b and c wait for a
        done = await run.wait_event("mission:completed", mission_id=m.id)
        assert [m2.tasks[t].spec for t in m2.tasks] == list(spec_of(CRASHED).tasks)
    assert done.data["report"]["tasks"]["done"] == 3
