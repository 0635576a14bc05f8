"""A person's pass counts (``polpo override TASK --pass``): failed work a person passes is done, what failed only
because of it runs, and the mission completes again; what still waits on other failed work stays failed, so the
mission ends instead of waiting forever. A retry re-opens by the same rule."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import pytest

from polpo.command_args import encode
from tests.support.engine import EngineRun, ScriptAgent, config, engine_on_memory

pytestmark = pytest.mark.anyio


def t(title: str, **fields: Any) -> dict[str, Any]:
    return {"title": title, "description": title, "assignTo": "fake", "maxRetries": 0, **fields}


def agent(failing: set[str]) -> ScriptAgent:
    """Exits 1 for the titles in ``failing`` (a person may change their mind: the set is read at each run)."""
    return ScriptAgent(lambda r: 1 if r.title in failing else 0)


def ran(a: ScriptAgent) -> list[str]:
    return [r.title for r in a.requests]


async def test_a_person_passes_failed_work_and_what_waited_on_it_runs(tmp_path: Path) -> None:
    fake = agent({"build"})
    async with engine_on_memory(config(tmp_path, retries=0, fixes=0), agents={"fake": fake}) as run:
        m = await run.accept({"tasks": [t("build"), t("deploy", dependsOn=["build"]), t("docs")]})
        await run.wait_event("mission:completed", mission_id=m.id, timeout=20)
        assert run.store.rows("tasks", lambda r: r["id"] == f"{m.id}:2")[0]["reason"].startswith("dependency failed")
        status, said = await run.engine.commands.apply("override", encode(f"{m.id}:1", passed=True,
                                                                          reason="the build is fine", by="ada"))
        assert status == "done" and said.endswith(f"{m.id}:1 is done; 1 task(s) that failed because of it run now")
        await _completions(run, m.id, 2)
    outcomes = [e.data["outcome"] for e in run.of("mission:completed", mission_id=m.id)]
    assert outcomes == ["failed", "completed"]
    assert ran(fake).count("build") == 1 and ran(fake).count("deploy") == 1  # the build's agent never ran again
    rows = {r["title"]: r for r in run.store.rows("tasks")}
    assert rows["build"]["status"] == "done" and rows["build"]["score"] == 5.0 and rows["deploy"]["status"] == "done"
    assert [e.data["by"] for e in run.of("mission:resumed")] == ["override"]


async def test_what_still_waits_on_other_failed_work_stays_failed_and_the_mission_ends(tmp_path: Path) -> None:
    fake = agent({"build", "lint"})
    async with engine_on_memory(config(tmp_path, retries=0, fixes=0), agents={"fake": fake}) as run:
        m = await run.accept({"tasks": [t("build"), t("lint"), t("deploy", dependsOn=["build"]),
                                        t("publish", dependsOn=["lint"])]})
        await run.wait_event("mission:completed", mission_id=m.id, timeout=20)
        status, _ = await run.engine.commands.apply("override", encode(f"{m.id}:1", passed=True, reason="ok",
                                                                       by="ada"))
        assert status == "done"
        await _completions(run, m.id, 2)
        status, said = await run.engine.commands.apply("retry", f"{m.id}:2")  # lint again: it fails again
        assert status == "done" and said == f"retrying {m.id}:2 (and 1 task(s) that waited on it)"
        await _completions(run, m.id, 3)
    assert [e.data["outcome"] for e in run.of("mission:completed", mission_id=m.id)] == ["failed"] * 3
    rows = {r["title"]: r for r in run.store.rows("tasks")}
    assert rows["deploy"]["status"] == "done"
    assert rows["publish"]["status"] == "failed" and rows["publish"]["reason"].startswith("dependency failed")
    assert ran(fake).count("publish") == 0 and ran(fake).count("deploy") == 1 and ran(fake).count("lint") == 2


async def test_a_retry_reopens_only_what_can_run_and_the_mission_still_ends(tmp_path: Path) -> None:
    """Before, a retry re-opened every task a dependency had failed: one waiting on other failed work waited
    forever and the mission never completed."""
    failing = {"build", "lint"}
    fake = agent(failing)
    async with engine_on_memory(config(tmp_path, retries=0, fixes=0), agents={"fake": fake}) as run:
        m = await run.accept({"tasks": [t("build"), t("lint"), t("deploy", dependsOn=["build"]),
                                        t("publish", dependsOn=["lint"]), t("announce", dependsOn=["deploy"])]})
        await run.wait_event("mission:completed", mission_id=m.id, timeout=20)
        failing.discard("build")  # fixed outside polpo: the retry passes
        status, said = await run.engine.commands.apply("retry", f"{m.id}:1")
        assert status == "done" and said == f"retrying {m.id}:1 (and 2 task(s) that waited on it)"
        await _completions(run, m.id, 2)
    rows = {r["title"]: r["status"] for r in run.store.rows("tasks")}
    assert rows == {"build": "done", "lint": "failed", "deploy": "done", "publish": "failed", "announce": "done"}


async def _completions(run: EngineRun, mission_id: str, n: int) -> None:
    with anyio.fail_after(20):
        while len(run.of("mission:completed", mission_id=mission_id)) < n:
            await anyio.sleep(0.01)
