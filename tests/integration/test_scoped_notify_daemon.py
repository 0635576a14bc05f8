"""Scoped notifications and re-runs inside a real daemon: a mission's and a task's own rules reach file channels
(also for mission:completed, after the board has forgotten the mission: Polpo's G21 does not come back), a filled
Polpo template's rule is delivered with its text, unknown channels are rejected, and ``rerun`` makes identical
bytes start a new run."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
import pytest

from polpo.config import Config, load_config
from polpo.mission.templates import fill, filled_bytes, parse_template
from tests.support.daemon import mission_json, running_daemon, shell_task, submit, write_config

pytestmark = pytest.mark.anyio

EXAMPLES = Path(__file__).resolve().parents[2] / "templates"
CHANNELS = """
[channels.global]
type = "file"
path = "global.jsonl"

[channels.team]
type = "file"
path = "team.jsonl"

[channels.audit]
type = "file"
path = "audit.jsonl"

[[notify.rules]]
events = ["mission:completed", "task:transition"]
channels = ["global"]
"""


def config(tmp_path: Path) -> Config:
    return load_config(write_config(tmp_path, extra=CHANNELS))


def lines(cfg: Config, channel: str) -> list[dict[str, Any]]:
    path = cfg.source.parent / f"{channel}.jsonl" if cfg.source else Path(channel)
    return [json.loads(x) for x in path.read_text().splitlines()] if path.exists() else []


async def until_lines(cfg: Config, channel: str, pred: Any, timeout: float = 20) -> list[dict[str, Any]]:
    with anyio.fail_after(timeout):
        while not pred(found := lines(cfg, channel)):
            await anyio.sleep(0.02)
    return found


async def test_mission_and_task_rules_reach_their_channels_with_inherit(tmp_path: Path) -> None:
    cfg = config(tmp_path)
    task_rule = {"id": "a-done", "events": ["task:transition"], "channels": ["team"],
                 "template": "{{taskId}} went {{from}} → {{to}}"}
    doc = json.loads(mission_json(
        shell_task("a", "echo a", notifications={"rules": [task_rule], "inherit": False}),
        shell_task("b", "echo b", dependsOn=["a"]),
        name="scoped",
        notifications={"rules": [{"id": "done", "events": ["plan:completed"], "channels": ["team"],
                                  "severity": "warning", "template": "{{missionId}} {{outcome}}"}]}))
    async with running_daemon(cfg) as (_, w):
        submit(cfg, "scoped.json", json.dumps(doc))
        accepted = await w.wait_event("mission:accepted")
        await w.wait_event("mission:completed")
        team = await until_lines(cfg, "team", lambda ls: any(x["event"] == "mission:completed" for x in ls))
        await until_lines(cfg, "global", lambda ls: any(x["event"] == "mission:completed" for x in ls))
    assert any('"plan:completed" is Polpo\'s name' in x for x in accepted.data["warnings"])
    done = [x for x in team if x["event"] == "mission:completed"]
    assert len(done) == 1 and done[0]["summary"] == "scoped completed"
    assert done[0]["rule"] == {"id": "done", "severity": "warning"}
    task_lines = [x for x in team if x["event"] == "task:transition"]
    assert {x["taskId"] for x in task_lines} == {"scoped:1"}  # only task a has the rule
    assert "scoped:1 went review → done" in [x["summary"] for x in task_lines]
    glob = lines(cfg, "global")
    # inherit false on task a: its transitions went to its own channel only; b's still follow the config
    assert {x["taskId"] for x in glob if x["event"] == "task:transition"} == {"scoped:2"}
    assert [x["event"] for x in glob].count("mission:completed") == 1  # inherit (default): config rules too


async def test_a_filled_site_audit_template_notifies_the_file_channel(tmp_path: Path) -> None:
    cfg = config(tmp_path)
    template, problems, _ = parse_template(json.loads((EXAMPLES / "site-audit.workflow.json").read_text()))
    assert template is not None and problems == []
    filled = fill(template, {"url": "https://example.com", "telegram_channel": "audit"})
    assert filled.mission is not None
    async with running_daemon(cfg) as (_, w):
        submit(cfg, "site-audit.json", filled_bytes(filled.mission).decode())
        await w.wait_event("mission:accepted")
        done = await w.wait_event("mission:completed")  # its team agents have no model here: it fails fast
        audit = await until_lines(cfg, "audit", lambda ls: len(ls) >= 1)
    assert done.mission_id == "site-audit"
    assert [(x["event"], x["missionId"], x["summary"], x["rule"]["id"]) for x in audit] == [
        ("mission:completed", "site-audit", "Audit completato per https://example.com", "audit-completato")]


async def test_an_unknown_channel_in_a_rule_is_rejected_with_its_path(tmp_path: Path) -> None:
    cfg = config(tmp_path)
    doc = mission_json(shell_task("a", "true", notifications={"rules": [{"events": ["task:*"],
                                                                          "channels": ["telegram"]}]}))
    async with running_daemon(cfg) as (_, w):
        submit(cfg, "bad.json", doc)
        rejected = await w.wait_event("mission:rejected")
    assert rejected.data["errors"] == [{"path": "$.tasks[0].notifications.rules[0].channels[0]",
                                        "message": 'no channel named "telegram"; available: audit, global, team (or add [channels.telegram])'}]


async def test_rerun_makes_identical_bytes_start_a_new_run(tmp_path: Path) -> None:
    cfg = config(tmp_path)
    text = mission_json(shell_task("a", "echo a"), name="again")
    async with running_daemon(cfg) as (daemon, w):
        path = submit(cfg, "again.json", text)
        await w.wait_event("mission:completed", mission_id="again")
        assert daemon.engine is not None
        commands = daemon.engine.commands
        status, answer = await commands.apply("rerun", str(path))
        assert status == "done" and "forgotten (last: mission again)" in answer
        submit(cfg, "again.json", text)  # the very same bytes
        second = await w.wait_event("mission:accepted", mission_id="again#2")
        assert second.data["hash"] == w.of("mission:accepted", mission_id="again")[0].data["hash"]
        await w.wait_event("mission:completed", mission_id="again#2")
        status, answer = await commands.apply("rerun", str(tmp_path / "missions" / "never.json"))
        assert status == "done" and "nothing to forget" in answer
        slow = submit(cfg, "slow.json", mission_json(shell_task("a", "sleep 30"), name="slow"))
        await w.wait_event("agent:spawned", mission_id="slow")
        status, answer = await commands.apply("rerun", str(slow))
        assert status == "refused" and "mission slow from" in answer and "polpo cancel slow" in answer
