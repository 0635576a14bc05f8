"""A checkpoint between "Build" and "Deploy" on a real `polpo daemon` process: it stops before Deploy, notifies a
channel with its message, survives kill -9 while paused, and Deploy runs only after `polpo resume` — through the
CLI (the command inbox), the HTTP API, and the web view's button in a real browser (Debian's chromium).
An approval "before" is approved and rejected from the CLI, with the daemon's own answer.
"""

from __future__ import annotations

import json
import signal
import sqlite3
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.support.browser import page_on_a_daemon
from tests.support.daemon import (
    daemon_process,
    mission_json,
    read_events,
    run_cli,
    shell_task,
    wait_events,
    write_config,
)

CHANNEL = """
[channels.ops]
type = "file"
path = "ops.jsonl"
"""
HTTP = '[http]\nlisten = "127.0.0.1:0"\ntoken_env = "CHECKPOINT_TEST_NO_TOKEN"\n'
MESSAGE = "Build is done: check staging, then resume"


def release(name: str) -> str:
    return mission_json(
        shell_task("Build", "echo built > build.txt"),
        shell_task("Deploy", "test -f build.txt && echo deployed > deploy.txt", dependsOn=["Build"]),
        shell_task("Docs", "echo docs > docs.txt"),
        name=name, checkpoints=[{"name": "go-live", "afterTasks": ["Build"], "blocksTasks": ["Deploy"],
                                 "message": MESSAGE, "notifyChannels": ["ops"]}])


def has(name: str, **match: Any) -> Any:
    return lambda evs: any(e["event"] == name and all(e.get(k, e["data"].get(k)) == v for k, v in match.items())
                           for e in evs)


def names(evs: list[dict[str, Any]], mission: str) -> list[str]:
    return [e["event"] for e in evs if e.get("missionId") == mission]


@pytest.mark.parametrize("store", ["sqlite", "postgres"])
def test_a_checkpoint_stops_deploy_survives_kill_9_and_resumes_from_the_cli(
        tmp_path: Path, store: str, request: pytest.FixtureRequest) -> None:
    pg = f'[store]\nurl = "{request.getfixturevalue("postgres_url")}"\n' if store == "postgres" else ""
    config = write_config(tmp_path, extra=CHANNEL + pg)
    state = tmp_path / "state"
    (tmp_path / "missions" / "rel.json").write_text(release("rel"))
    with daemon_process(config) as proc:
        wait_events(state, has("checkpoint:reached", missionId="rel"))
        wait_events(state, has("task:transition", taskId="rel:3", to="done"))
        wait_events(state, lambda es: (config.parent / "ops.jsonl").exists())
        proc.send_signal(signal.SIGKILL)
        proc.wait(10)
    sent = [json.loads(line) for line in (config.parent / "ops.jsonl").read_text().splitlines()]
    assert [s["event"] for s in sent] == ["checkpoint:reached"] and MESSAGE in json.dumps(sent[0])
    status = run_cli("status", "--config", str(config))
    assert "paused at go-live (polpo resume rel)" in status.stdout, status.stdout
    as_json = json.loads(run_cli("status", "--json", "--config", str(config)).stdout)
    assert as_json["missions"][0]["pausedAt"] == ["go-live"]
    with daemon_process(config):
        wait_events(state, has("orchestrator:started"))
        wait_events(state, lambda es: [e["event"] for e in es].count("orchestrator:started") == 2)
        assert not (tmp_path / "state" / "workspaces" / "rel" / "deploy.txt").exists()
        out = run_cli("resume", "rel", "go-live", "--note", "staging looks right", "--by", "ada",
                      "--config", str(config))
        assert out.returncode == 0, out.stderr
        assert out.stdout.strip() == "resumed go-live of mission rel (1 task(s) may run)"
        evs = wait_events(state, has("mission:completed", missionId="rel"))
    done = next(e for e in evs if e["event"] == "mission:completed")
    assert done["data"]["outcome"] == "completed"
    order = names(evs, "rel")
    assert order.count("checkpoint:reached") == 1  # not reached again after the restart
    resumed = next(e for e in evs if e["event"] == "checkpoint:resumed")
    assert (resumed["data"]["by"], resumed["data"]["note"]) == ("ada", "staging looks right")
    deploy_start = next(i for i, e in enumerate(evs) if e["event"] == "agent:spawned" and e.get("taskId") == "rel:2")
    assert deploy_start > evs.index(resumed)
    if store == "sqlite":
        con = sqlite3.connect(state / "polpo.db")
        assert con.execute("SELECT kind, name, status, resumed_by FROM holds").fetchall() == [
            ("checkpoint", "go-live", "released", "ada")]
    shown = run_cli("show", "rel", "--config", str(config)).stdout
    assert "checkpoint go-live: released" in shown and "by ada: staging looks right" in shown


def test_resume_over_http_and_approval_before_from_the_cli(tmp_path: Path) -> None:
    rule = '[[notify.rules]]\nevents = ["approval:requested"]\nchannels = ["ops"]\n'
    config = write_config(tmp_path, extra=CHANNEL + rule + HTTP)
    state = tmp_path / "state"
    with daemon_process(config):
        wait_events(state, has("orchestrator:started"))
        url = json.loads((state / "http.json").read_text())["url"]
        (tmp_path / "missions" / "web.json").write_text(release("web"))
        wait_events(state, has("checkpoint:reached", missionId="web"))
        wrong = httpx.post(f"{url}/api/missions/web/resume", json={"checkpoint": "nope"}, timeout=30)
        assert wrong.status_code == 409 and "no checkpoint 'nope'" in wrong.json()["message"]
        r = httpx.post(f"{url}/api/missions/web/resume", json={"note": "ok", "by": "grace"}, timeout=30)
        assert r.status_code == 200, r.text
        evs = wait_events(state, has("mission:completed", missionId="web"))
        resumed = next(e for e in evs if e["event"] == "checkpoint:resumed")
        assert resumed["data"]["by"] == "grace"

        (tmp_path / "missions" / "ask.json").write_text(mission_json(
            shell_task("Send", "echo sent > sent.txt", approval="before"),
            shell_task("Call", "echo called > called.txt", approval="before"), name="ask"))
        wait_events(state, lambda es: sum(e["event"] == "approval:requested" for e in es) == 2)
        wait_events(state, lambda es: sum(e["event"] == "notification:sent" and e["data"]["event"] ==
                                          "approval:requested" for e in es) == 2)
        asked = (config.parent / "ops.jsonl").read_text()
        assert "polpo approve ask:1" in asked and "polpo reject ask:2 --reason" in asked
        r = httpx.post(f"{url}/api/tasks/ask:1/approve", json={"by": "carol", "note": "go"}, timeout=30)
        assert r.status_code == 200 and r.json()["message"] == "approved ask:1: its first attempt runs next", r.text
        out = run_cli("reject", "ask:2", "--reason", "not today", "--by", "bob", "--config", str(config))
        assert out.returncode == 0, out.stderr
        evs = wait_events(state, has("mission:completed", missionId="ask"))
    spawned = [e.get("taskId") for e in evs if e["event"] == "agent:spawned" and e.get("missionId") == "ask"]
    assert spawned == ["ask:1"]  # the rejected task's agent never started
    failed = next(e for e in evs if e["event"] == "task:transition" and e.get("taskId") == "ask:2"
                  and e["data"]["to"] == "failed")
    assert failed["data"]["reason"] == "rejected by bob: not today"
    approved = next(e for e in evs if e["event"] == "approval:resolved" and e.get("taskId") == "ask:1")
    assert approved["data"] == {"status": "approved", "by": "carol", "reason": "go"}


@pytest.mark.slow
def test_the_web_view_resume_button_releases_the_checkpoint(tmp_path: Path) -> None:
    config = write_config(tmp_path, extra=CHANNEL + HTTP)
    state = tmp_path / "state"
    with page_on_a_daemon(config) as (browser, url):
        (tmp_path / "missions" / "page.json").write_text(release("page"))
        wait_events(state, has("checkpoint:reached", missionId="page"))
        page = browser.new_page(viewport={"width": 1200, "height": 800})
        page.goto(url + "/#/mission/page")
        page.wait_for_selector('#paused[data-checkpoints="go-live"]')
        page.fill("#resume-note", "checked from the page")
        page.click("#resume")
        page.wait_for_selector('#answer[data-state="done"]')
        page.wait_for_selector('#mission-summary[data-status="completed"]', timeout=60_000)
        assert page.locator("#paused").count() == 0
    evs = read_events(state)
    resumed = next(e for e in evs if e["event"] == "checkpoint:resumed")
    assert resumed["data"]["note"] == "checked from the page"
    assert resumed["data"]["by"] == "api"  # no token, no Basic login: the API's name for an anonymous person


@pytest.mark.slow
def test_the_task_page_rejects_an_approval_and_overrides_a_verdict(tmp_path: Path) -> None:
    config = write_config(tmp_path, extra=HTTP)
    state = tmp_path / "state"
    with page_on_a_daemon(config) as (browser, url):
        (tmp_path / "missions" / "ask.json").write_text(mission_json(
            shell_task("Send", "echo sent > sent.txt", approval="before"), name="ask"))
        wait_events(state, has("approval:requested", taskId="ask:1"))
        page = browser.new_page(viewport={"width": 1200, "height": 800})
        page.goto(url + "/#/task/ask:1")
        page.wait_for_selector('#task-summary[data-status="awaiting_approval"]')
        page.fill("#reject-reason", "not to this client")
        page.click("#reject")
        page.wait_for_selector('#answer[data-state="done"]')
        page.wait_for_selector('#task-summary[data-status="failed"]')
        page.fill("#override-reason", "it would have been fine")
        page.click("#override")
        page.wait_for_function("(document.querySelector('#answer') || {}).textContent.includes('overridden')")
        page.wait_for_selector("#override-note")
        note = page.inner_text("#override-note")
    assert "to pass by api: it would have been fine" in note
    evs = read_events(state)
    assert not any(e["event"] == "agent:spawned" for e in evs)
    failed = next(e for e in evs if e["event"] == "task:transition" and e["data"]["to"] == "failed")
    assert failed["data"]["reason"] == "rejected by api: not to this client"
