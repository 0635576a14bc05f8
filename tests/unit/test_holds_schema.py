"""Checkpoints, delays and approval "before" in the mission document: parsed and checked like quality gates
(titles or task ids, waits that make cycles), no longer "accepted and ignored"."""

from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path
from typing import Any

from polpo.mission.loader import load_mission

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "holds" / "release.json"


def task(title: str, **extra: Any) -> dict[str, Any]:
    return {"title": title, "description": f"do {title}", **extra}


def load(doc: dict[str, Any]) -> Any:
    return load_mission(json.dumps(doc).encode(), known_agents=None)


def test_a_polpo_document_with_checkpoints_delays_and_approval_validates_without_warnings() -> None:
    r = load_mission(FIXTURE.read_bytes(), known_agents=["dev"])
    assert r.problems == [] and r.warnings == []
    assert r.spec is not None
    cp, = r.spec.checkpoints
    assert (cp.name, cp.after_tasks, cp.blocks_tasks) == ("go-live", ["Build"], ["Deploy to production"])
    d, = r.spec.delays
    assert d.duration == timedelta(hours=2)
    send = r.spec.tasks[2]
    assert (send.approval, send.approval_timeout, send.approval_timeout_action) == (
        "before", timedelta(hours=4), "fail")


def test_checkpoints_and_delays_may_name_tasks_by_id_and_are_rewritten_to_titles() -> None:
    r = load({"tasks": [task("A"), task("B")],
              "checkpoints": [{"name": "c", "afterTasks": ["1"], "blocksTasks": ["m:2"]}],
              "delays": [{"name": "d", "afterTasks": ["1"], "blocksTasks": ["B"], "duration": 60}]})
    assert r.problems == []
    assert (r.spec.checkpoints[0].after_tasks, r.spec.checkpoints[0].blocks_tasks) == (["A"], ["B"])
    assert r.spec.delays[0].duration == timedelta(seconds=60)


def test_unknown_titles_duplicate_names_and_bad_durations_are_problems() -> None:
    r = load({"tasks": [task("Build"), task("Deploy")],
              "checkpoints": [{"name": "c", "afterTasks": ["Biuld"], "blocksTasks": ["Deploy"]},
                              {"name": "c", "afterTasks": ["Build"], "blocksTasks": ["Build"]}],
              "delays": [{"name": "d", "afterTasks": ["Build"], "blocksTasks": ["Deploy"], "duration": "2 hours"}]})
    found = {(p.path, p.message) for p in r.problems}
    assert ("$.checkpoints[0].afterTasks[0]", 'no task titled "Biuld"; did you mean "Build"?') in found
    assert ("$.checkpoints[1].name", 'duplicate checkpoint name "c" (first used at $.checkpoints[0])') in found
    assert ("$.checkpoints[1].blocksTasks[0]",
            '"Build" is also in afterTasks: a checkpoint cannot block a task it waits for') in found
    assert any(p == "$.delays[0].duration" for p, _ in found)


def test_a_cycle_made_by_a_checkpoint_names_it() -> None:
    r = load({"tasks": [task("A"), task("B", dependsOn=["A"])],
              "checkpoints": [{"name": "stop", "afterTasks": ["B"], "blocksTasks": ["A"]}]})
    assert [(p.path, p.message) for p in r.problems] == [
        ("$.checkpoints[0]", 'dependency cycle: A → B → A (checkpoint "stop" makes "A" wait for "B")')]


def test_approval_takes_only_before_and_a_known_timeout_action() -> None:
    r = load({"tasks": [task("A", approval="after"), task("B", approval="before", approvalTimeoutAction="wait")]})
    assert {p.path for p in r.problems} == {"$.tasks[0].approval", "$.tasks[1].approvalTimeoutAction"}
