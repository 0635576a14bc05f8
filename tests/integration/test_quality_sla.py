"""Gates with judge scores, the mission threshold, the SLA monitor on a fake clock, webhooks, and metrics,
in a real daemon."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import anyio
import pytest

from polpo.clock import FakeClock
from polpo.config import Config, load_config
from polpo.events.render import render
from polpo.notify.channels import summarize
from tests.support.daemon import (
    mission_json,
    read_events,
    run_cli,
    running_daemon,
    shell_task,
    submit,
    write_config,
)
from tests.support.fake_llm import FakeLLM
from tests.support.judges import ScriptedJudge
from tests.support.procs import dies

pytestmark = pytest.mark.anyio


class Hook:
    """A local webhook receiver recording every JSON body posted to it."""

    def __init__(self) -> None:
        self.bodies: list[dict[str, Any]] = []
        hook = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                length = int(self.headers.get("content-length") or 0)
                hook.bodies.append(json.loads(self.rfile.read(length)))
                self.send_response(200)
                self.end_headers()

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/hook"

    def events(self) -> list[str]:
        return [b.get("event", "") for b in self.bodies]


@pytest.fixture
def hook() -> Iterator[Hook]:
    h = Hook()
    yield h
    h.server.shutdown()


@pytest.fixture
def srv(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeLLM]:
    monkeypatch.setenv("POLPO_QS_TEST_KEY", "sk-quality-sla-test")
    with FakeLLM() as server:
        yield server


def config(tmp_path: Path, srv: FakeLLM, hook: Hook, extra: str = "") -> Config:
    return load_config(write_config(tmp_path, extra=f"""
[judge]
model = "openai/fake-model"
api_base = "{srv.base_url}"
api_key_env = "POLPO_QS_TEST_KEY"
correct_expectations = false

[llm]
max_retries = 0

[channels.ops]
type = "webhook"
url = "{hook.url}"
retries = 0

[[notify.rules]]
events = ["sla:*", "quality:*"]
channels = ["ops"]
{extra}
"""))


def reviewed(title: str, **fields: Any) -> dict[str, Any]:
    return shell_task(title, "echo work > out.txt", expectations=[
        {"type": "llm_review", "criteria": "out.txt exists", "threshold": 1.5,
         "dimensions": [{"name": "quality", "weight": 1, "description": "good?"}]}], **fields)


def gated_mission(min_score: float) -> str:
    return mission_json(reviewed("build"), shell_task("deploy", "echo deployed > deployed.txt"),
                        qualityGates=[{"name": "review-gate", "afterTasks": ["build"], "blocksTasks": ["deploy"],
                                       "minScore": min_score}])


async def _delivered(hook: Hook, name: str) -> None:
    with anyio.fail_after(10):
        while name not in hook.events():
            await anyio.sleep(0.02)


async def test_a_gate_below_min_score_fails_its_blocked_task_once_and_notifies(
        tmp_path: Path, srv: FakeLLM, hook: Hook) -> None:
    srv.responder = ScriptedJudge(score=2.0)
    cfg = config(tmp_path, srv, hook)
    async with running_daemon(cfg) as (_, w):
        submit(cfg, "gate.json", gated_mission(3.5))
        done = await w.wait_event("mission:completed")
        await _delivered(hook, "quality:gate:failed")
    assert done.data["outcome"] == "failed"
    failed = w.of("quality:gate:failed")
    assert len(failed) == 1
    assert failed[0].data["avgScore"] == pytest.approx(2.0)
    assert not w.of("agent:spawned", taskId="gate:2")  # deploy never ran
    deploy = [e for e in w.of("task:transition") if e.task_id == "gate:2"]
    assert [e.data["to"] for e in deploy] == ["failed"]
    assert "review-gate" in deploy[0].data["reason"]
    assert hook.events().count("quality:gate:failed") == 1
    metrics = json.loads(run_cli("metrics", "--json", "--config", str(cfg.source)).stdout)
    mission = metrics["missions"][0]
    assert mission["avgScore"] == pytest.approx(2.0)
    assert mission["totalAssessments"] >= 1


async def test_a_passing_gate_releases_the_blocked_task_after_the_score_arrives(
        tmp_path: Path, srv: FakeLLM, hook: Hook) -> None:
    srv.responder = ScriptedJudge(score=4.0)
    cfg = config(tmp_path, srv, hook)
    async with running_daemon(cfg) as (_, w):
        submit(cfg, "gate.json", gated_mission(3.5))
        done = await w.wait_event("mission:completed")
    assert done.data["outcome"] == "completed"
    names = [(e.event, e.task_id) for e in w.events]
    passed_at = names.index(("quality:gate:passed", None))
    assert names.index(("agent:spawned", "gate:2")) > passed_at  # deploy waited for the gate
    assert w.of("quality:gate:passed")[0].data["avgScore"] == pytest.approx(4.0)


async def test_the_mission_threshold_fails_a_mission_whose_average_is_too_low(
        tmp_path: Path, srv: FakeLLM, hook: Hook) -> None:
    srv.responder = ScriptedJudge(score=3.0)
    cfg = config(tmp_path, srv, hook)
    async with running_daemon(cfg) as (_, w):
        submit(cfg, "avg.json", mission_json(reviewed("a", priority=2), reviewed("b"), qualityThreshold=3.5))
        done = await w.wait_event("mission:completed")
    assert done.data["outcome"] == "failed"
    quality = done.data["report"]["quality"]
    assert quality["average"] == pytest.approx(3.0) and quality["passed"] is False
    assert "priority-weighted" in quality["kind"]
    assert w.of("quality:threshold:failed")[0].data == {"avgScore": 3.0, "threshold": 3.5}


async def test_sla_warning_then_violation_fails_the_task_and_kills_its_agent(
        tmp_path: Path, srv: FakeLLM, hook: Hook) -> None:
    clock = FakeClock()
    cfg = config(tmp_path, srv, hook, extra="""
[sla]
check_interval = 3600
violation_action = "fail"
""")
    task = shell_task("slow", "echo $$ > pid.tmp && mv pid.tmp pid; sleep 60", deadline="PT10S")
    async with running_daemon(cfg, clock=clock) as (d, w):
        submit(cfg, "sla.json", mission_json(task))
        await w.wait_event("agent:spawned")
        pid_file = cfg.state_dir / "workspaces" / "sla" / "pid"
        with anyio.fail_after(10):
            while not pid_file.exists():
                await anyio.sleep(0.01)
        clock.advance(7.9)
        await d.sla_monitor.tick()
        assert not w.of("sla:warning")  # 79 %
        clock.advance(0.1)  # 80 %
        await d.sla_monitor.tick()
        warning = await w.wait_event("sla:warning")
        clock.advance(5)
        await d.sla_monitor.tick()
        await d.sla_monitor.tick()  # nothing repeats
        violated = await w.wait_event("sla:violated")
        done = await w.wait_event("mission:completed")
        await _delivered(hook, "sla:violated")
    assert warning.data["entityId"] == "sla:1" and warning.data["percentUsed"] >= 0.8
    # the console, `polpo tail` and the notifications render the payload the keeper really emitted
    logged = next(e for e in read_events(cfg.state_dir) if e["event"] == "sla:warning")
    assert "has used 80% of its time" in render(logged)
    assert "has used 80% of its time" in summarize(warning)
    assert violated.data["overdueMs"] == pytest.approx(3000, abs=5)
    assert len(w.of("sla:warning")) == len(w.of("sla:violated")) == 1
    assert done.data["outcome"] == "failed"
    last = [e for e in w.of("task:transition") if e.task_id == "sla:1"][-1]
    assert (last.data["to"], last.data["trigger"], last.data["reason"]) == ("failed", "sla_fail",
                                                                            "SLA violated: deadline passed")
    assert not w.of("task:retry")
    pid = int(pid_file.read_text())
    assert await dies(pid)
    assert {"sla:warning", "sla:violated"} <= set(hook.events())


async def test_a_task_finishing_in_time_records_sla_met(tmp_path: Path, srv: FakeLLM, hook: Hook) -> None:
    cfg = config(tmp_path, srv, hook)
    async with running_daemon(cfg, clock=FakeClock()) as (_, w):
        submit(cfg, "met.json", mission_json(shell_task("quick", "true", deadline="PT1H"), deadline="PT2H"))
        await w.wait_event("mission:completed")
    met = w.of("sla:met")
    assert {(e.data["entityType"], e.data["entityId"]) for e in met} == {("task", "met:1"), ("mission", "met")}
    assert all(e.data["marginMs"] > 0 for e in met)
