"""The daemon's HTTP API over real HTTP on 127.0.0.1: a real daemon in this process, real SQLite, real agents."""

from __future__ import annotations

import base64
import json
import sqlite3
from collections.abc import AsyncIterator
from http import HTTPStatus
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest

from polpo.config import Config, ConfigError, load_config
from polpo.daemon import Daemon
from polpo.http.hub import EventHub
from polpo.http.openapi import ROUTES
from tests.support.daemon import (
    mission_files,
    mission_json,
    read_events,
    running_daemon,
    shell_task,
    write_config,
)

pytestmark = pytest.mark.anyio

HTTP = '[http]\nlisten = "127.0.0.1:0"\ntoken_env = "{env}"\n'
JSON = {"Content-Type": "application/json"}  # what the API asks of every POST (a browser guard: README "Security")


def config(tmp_path: Path, env: str = "POLPO_TEST_NO_TOKEN") -> Config:
    return load_config(write_config(tmp_path, extra=HTTP.format(env=env)))


def two_tasks(**top: Any) -> str:
    return mission_json(
        shell_task("write", "echo hi > out.txt", expectations=[{"type": "file_exists", "path": "out.txt"}]),
        shell_task("read", "cat out.txt", dependsOn=["write"]), **top)


async def sse_events(client: httpx.AsyncClient, url: str, until: str, headers: dict[str, str] | None = None,
                     limit: int | None = None) -> list[dict[str, Any]]:
    """Follow an SSE stream until an event named ``until`` (or ``limit`` events); each data line parsed."""
    out: list[dict[str, Any]] = []
    async with client.stream("GET", url, headers=headers or {}) as r:
        assert r.status_code == 200 and r.headers["content-type"].startswith("text/event-stream")
        event_id = None
        async for line in r.aiter_lines():
            if line.startswith("id: "):
                event_id = int(line[4:])
            elif line.startswith("data: "):
                ev = json.loads(line[6:])
                assert ev["seq"] == event_id  # the SSE id is the event's seq
                out.append(ev)
                if ev["event"] == until or (limit is not None and len(out) >= limit):
                    return out
    return out


@pytest.fixture
async def api(tmp_path: Path) -> AsyncIterator[tuple[Daemon, httpx.AsyncClient]]:
    cfg = config(tmp_path)
    async with running_daemon(cfg) as (daemon, _), httpx.AsyncClient(timeout=20, headers=JSON) as client:
        assert daemon.http is not None
        client.base_url = httpx.URL(daemon.http.url)
        yield daemon, client


async def test_submit_follow_and_read_a_mission(api: tuple[Daemon, httpx.AsyncClient]) -> None:
    daemon, client = api
    health = (await client.get("/healthz")).json()
    assert health["status"] == "ok" and health["store"]["ok"] is True and health["version"]
    assert health["uptimeSeconds"] >= 0

    bad = await client.post("/api/missions", content=json.dumps({"name": "bad", "tasks": [{"title": "x",
                                                                                         "assignTo": "nobody"}]}))
    assert bad.status_code == 422 and bad.headers["content-type"] == "application/problem+json"
    problem = bad.json()  # RFC 9457, with the errors list as an extension member
    assert (problem["type"], problem["title"], problem["status"]) == ("about:blank", HTTPStatus(422).phrase, 422)
    assert "$.tasks[0]" in problem["detail"]
    paths = {e["path"] for e in problem["errors"]}
    assert {"$.tasks[0].assignTo", "$.tasks[0].description"} <= paths
    assert mission_files(daemon.cfg.missions_dir) == []  # nothing written for a bad document

    async with anyio.create_task_group() as tg:
        followed: list[dict[str, Any]] = []

        async def follow() -> None:
            followed.extend(await sse_events(client, "/api/events/stream", "mission:completed"))

        tg.start_soon(follow)
        with anyio.fail_after(10):  # the stream is live before the mission is sent
            while not daemon.http or not daemon.http.hub.listeners:
                await anyio.sleep(0.01)
        created = await client.post("/api/missions", content=two_tasks(name="Two Steps"))
        assert created.status_code == 201, created.text
        mid = created.json()["missionId"]
    assert mid == "Two-Steps" and (daemon.cfg.missions_dir / "Two-Steps.json").exists()
    seqs = [e["seq"] for e in followed]
    assert seqs == list(range(seqs[0], seqs[0] + len(seqs)))  # no event lost or repeated
    names = [e["event"] for e in followed]
    assert names[0] == "mission:accepted" and names[-1] == "mission:completed"
    assert followed[-1]["data"]["outcome"] == "completed"

    listing = (await client.get("/api/missions")).json()["missions"]
    assert [(m["id"], m["status"], m["done"], m["total"]) for m in listing] == [(mid, "completed", 2, 2)]
    m = (await client.get(f"/api/missions/{mid}")).json()
    assert m["status"] == "completed" and m["createdAt"] and m["finishedAt"]  # camelCase, like the events
    assert [(t["id"], t["status"], t["attemptKind"]) for t in m["tasks"]] == [
        (f"{mid}:1", "done", "initial"), (f"{mid}:2", "done", "initial")]
    assert m["spec"]["tasks"][1]["dependsOn"] == ["write"]
    assert m["quality"] == {**m["report"]["quality"], "scored": 0}
    t = (await client.get(f"/api/tasks/{mid}:1")).json()
    check = t["attempts"][0]["assessments"][0]["checks"][0]
    assert (check["type"], check["passed"]) == ("file_exists", 1) and t["attemptCount"] == 1
    assert (await client.get("/api/tasks/nope:1")).status_code == 404
    assert (await client.get("/api/missions/nope")).status_code == 404

    page = (await client.get("/api/events", params={"after": 0, "mission": mid})).json()
    logged = [e for e in read_events(daemon.cfg.state_dir) if e.get("missionId") == mid]
    assert page["events"] == logged and page["last"] == logged[-1]["seq"] and page["more"] is False

    metrics = (await client.get("/metrics")).text
    assert 'polpo_tasks_finished_total{status="done"} 2.0' in metrics
    assert 'polpo_attempts_total{kind="initial",outcome="passed"} 2.0' in metrics
    assert 'polpo_missions_finished_total{outcome="completed"} 1.0' in metrics
    assert 'polpo_events_total{event="mission:completed"} 1.0' in metrics
    assert 'polpo_checks_total{outcome="passed",type="file_exists"} 1.0' in metrics
    assert "polpo_task_duration_seconds_count 2.0" in metrics and "polpo_queue_depth 0.0" in metrics


async def test_a_stream_resumes_after_last_event_id_without_gaps(api: tuple[Daemon, httpx.AsyncClient]) -> None:
    _daemon, client = api
    created = await client.post("/api/missions", content=two_tasks())
    assert created.status_code == 201
    first = await sse_events(client, "/api/events/stream?after=0", "", limit=4)
    rest = await sse_events(client, "/api/events/stream", "mission:completed",
                            headers={"Last-Event-ID": str(first[-1]["seq"])})
    assert [e["seq"] for e in first + rest] == list(range(1, len(first) + len(rest) + 1))
    one = await sse_events(client, "/api/events/stream?after=0&mission=test-mission", "mission:completed")
    assert {e["missionId"] for e in one} == {"test-mission"}


async def test_a_retry_over_http_can_raise_the_tasks_budget(api: tuple[Daemon, httpx.AsyncClient]) -> None:
    """``POST /api/tasks/T/retry`` with ``{"usd": …, "tokens": …}`` is ``polpo retry T --budget … --tokens …``: the
    raised budget is stored with the task's account; a budget that is not a positive number is a 400 and nothing
    is retried."""
    daemon, client = api
    assert (await client.post("/api/missions?name=b.json", content=mission_json(
        shell_task("fails", "exit 3", maxRetries=0)))).status_code == 201
    with anyio.fail_after(15):
        while (await client.get("/api/tasks/b:1")).json()["status"] != "failed":
            await anyio.sleep(0.05)
    for bad in ({"usd": -1}, {"usd": "lots"}, {"tokens": 1.5}, {"usd": True}, [1]):
        refused = await client.post("/api/tasks/b:1/retry", content=json.dumps(bad))
        assert refused.status_code == 400, (bad, refused.text)
    assert (await client.get("/api/tasks/b:1")).json()["status"] == "failed"
    retried = await client.post("/api/tasks/b:1/retry", content=json.dumps({"usd": 0.5, "tokens": 20000}))
    assert retried.status_code == 200 and retried.json()["message"] == "retrying b:1"
    await daemon.engine.store.flush()
    with sqlite3.connect(daemon.cfg.db_path) as con:
        row = con.execute("SELECT limit_usd, limit_tokens FROM spend WHERE scope='task' AND key='b:1'").fetchone()
    assert row == (0.5, 20000)


async def test_commands_answer_at_once_with_the_daemons_verdict(api: tuple[Daemon, httpx.AsyncClient]) -> None:
    _daemon, client = api
    doc = mission_json(shell_task("slow", "sleep 30"), shell_task("fails", "exit 3", maxRetries=0))
    assert (await client.post("/api/missions?name=work.json", content=doc)).status_code == 201
    with anyio.fail_after(15):
        while (await client.get("/api/tasks/work:2")).json()["status"] != "failed":
            await anyio.sleep(0.05)
    refused = await client.post("/api/tasks/work:1/retry")
    assert refused.status_code == 409 and "only failed tasks" in refused.json()["message"]
    assert (await client.post("/api/tasks/work:2/approve")).status_code == 409
    assert (await client.post("/api/tasks/work:9/retry")).status_code == 404
    retried = await client.post("/api/tasks/work:2/retry")
    assert retried.status_code == 200 and retried.json() == {"status": "done", "message": "retrying work:2",
                                                             "target": "work:2"}
    cancelled = await client.post("/api/missions/work/cancel")
    assert cancelled.status_code == 200 and cancelled.json()["message"] == "cancelling mission work"
    done = await sse_events(client, "/api/events/stream?after=0&mission=work", "mission:completed")
    assert done[-1]["data"]["outcome"] == "cancelled"
    assert "mission:cancelled" in [e["event"] for e in done]


async def test_every_route_is_in_the_openapi_document(api: tuple[Daemon, httpx.AsyncClient]) -> None:
    daemon, client = api
    doc = (await client.get("/openapi.json")).json()
    assert doc["openapi"].startswith("3.1")
    assert daemon.http is not None
    served = {(m.lower(), r.path) for r in daemon.http.app.routes for m in getattr(r, "methods", None) or ()
              if m != "HEAD"}
    described = {(m, p) for p, ops in doc["paths"].items() for m in ops}
    assert served == described == {(m, p) for m, p, *_ in ROUTES}
    body = doc["paths"]["/api/missions"]["post"]["requestBody"]["content"]["application/json"]["schema"]
    assert body == {"$ref": "#/components/schemas/Mission"}
    text = json.dumps(doc)
    assert "#/$defs/" not in text and "TaskSpec" in doc["components"]["schemas"]


async def test_with_a_token_every_call_but_healthz_needs_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("POLPO_TEST_TOKEN", "s3cret-token")
    cfg = config(tmp_path, env="POLPO_TEST_TOKEN")
    async with running_daemon(cfg) as (daemon, _), httpx.AsyncClient(timeout=10, headers=JSON) as client:
        assert daemon.http is not None
        base = daemon.http.url
        assert (await client.get(f"{base}/healthz")).status_code == 200
        for method, path in (("GET", "/"), ("GET", "/metrics"), ("GET", "/openapi.json"), ("GET", "/api/missions"),
                             ("GET", "/api/events"), ("GET", "/api/events/stream"), ("POST", "/api/missions"),
                             ("GET", "/static/app.js"), ("POST", "/api/tasks/x:1/retry")):
            r = await client.request(method, base + path)
            assert r.status_code == 401, (method, path)
            assert r.headers["www-authenticate"].startswith("Basic")
            wrong = await client.request(method, base + path, headers={"Authorization": "Bearer nope"})
            assert wrong.status_code == 401, (method, path)
        good = {"Authorization": "Bearer s3cret-token"}
        assert (await client.get(f"{base}/api/missions", headers=good)).status_code == 200
        basic = base64.b64encode(b"anyone:s3cret-token").decode()
        assert (await client.get(f"{base}/", headers={"Authorization": f"Basic {basic}"})).status_code == 200


def test_a_non_loopback_address_without_a_token_is_a_start_up_error(tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    path = write_config(tmp_path, extra='[http]\nlisten = "0.0.0.0:8765"\ntoken_env = "POLPO_TEST_TOKEN2"\n')
    monkeypatch.delenv("POLPO_TEST_TOKEN2", raising=False)
    with pytest.raises(ConfigError, match="not a loopback address"):
        Daemon(load_config(path), console=None)
    monkeypatch.setenv("POLPO_TEST_TOKEN2", "t")
    assert Daemon(load_config(path), console=None).http_plan is not None
    with pytest.raises(ConfigError, match="HOST:PORT"):
        load_config(write_config(tmp_path / "b", extra='[http]\nlisten = "8765"\n'))


async def test_a_taken_port_stops_the_start_with_the_reason(tmp_path: Path) -> None:
    first = config(tmp_path / "a")
    async with running_daemon(first) as (daemon, _):
        assert daemon.http is not None
        port = daemon.http.url.rsplit(":", 1)[1]
        second = load_config(write_config(tmp_path / "b", extra=f'[http]\nlisten = "127.0.0.1:{port}"\n'))
        from polpo.daemon import DaemonError

        with pytest.raises(DaemonError, match=r"cannot listen on 127\.0\.0\.1:\d+"):
            await Daemon(second, console=None, handle_signals=False).run()


async def test_a_listener_that_falls_behind_is_marked_not_waited_for() -> None:
    from polpo.events.catalog import Event

    hub = EventHub()
    slow = hub.listen(capacity=3)
    for seq in range(1, 8):
        hub.publish(Event(seq, "", "x", None, None, {}))
    assert slow.overflowed  # it catches up from the store instead of holding the writer
    hub.close()
    with anyio.fail_after(1):
        await slow.wait(30)  # returns at once: the hub is closed, its streams end


async def test_a_finished_missions_answer_changes_when_it_is_retried(api: tuple[Daemon, httpx.AsyncClient]) -> None:
    daemon, client = api
    doc = mission_json(shell_task("needs go", "test -f go", maxRetries=0, maxFixAttempts=0))
    assert (await client.post("/api/missions?name=once.json", content=doc)).status_code == 201
    await sse_events(client, "/api/events/stream?after=0&mission=once", "mission:completed")
    first = await client.get("/api/missions/once")
    assert first.json()["status"] == "failed" and (await client.get("/api/missions/once")).content == first.content
    (daemon.cfg.state_dir / "workspaces" / "once" / "go").write_text("")
    last = (await client.get("/api/events", params={"mission": "once"})).json()["last"]
    assert (await client.post("/api/tasks/once:1/retry")).status_code == 200
    await sse_events(client, f"/api/events/stream?after={last}&mission=once", "mission:completed")
    again = (await client.get("/api/missions/once")).json()
    assert again["status"] == "completed" and again["tasks"][0]["status"] == "done"


async def test_a_posted_mission_is_taken_in_by_the_api_at_once_and_the_watcher_finds_a_duplicate(
        api: tuple[Daemon, httpx.AsyncClient]) -> None:
    """The API hands what it wrote to the intake itself (no folder latency); the watcher then sees the same file
    and the same bytes, which start nothing: one mission, accepted once."""
    daemon, client = api
    assert daemon.intake is not None
    before = daemon.intake.handled
    created = await client.post("/api/missions", content=two_tasks(name="Once"))
    assert created.status_code == 201, created.text
    with anyio.fail_after(10):
        while daemon.intake.handled < before + 2 or not daemon.intake.idle:  # the API's turn, then the watcher's
            await anyio.sleep(0.01)
    events = [e for e in read_events(daemon.cfg.state_dir) if e.get("missionId") == "Once"]
    assert [e["event"] for e in events].count("mission:accepted") == 1
    assert not [e for e in read_events(daemon.cfg.state_dir) if e["event"] == "mission:rejected"]


async def test_the_missions_list_pages_back_by_seq_and_filters_by_status(api: tuple[Daemon, httpx.AsyncClient]) -> None:
    """``before=SEQ`` walks back a page at a time (``next``), ``status=`` keeps some statuses: each page is an index
    walk, the same cost whatever the history (issue 31); an old client's plain GET is unchanged."""
    from polpo.model.status import MissionStatus
    from polpo.store.tx import Tx
    from tests.support.stores import mission

    daemon, client = api
    assert daemon.store is not None
    statuses = [MissionStatus.COMPLETED, MissionStatus.FAILED, MissionStatus.COMPLETED, MissionStatus.CANCELLED,
                MissionStatus.RUNNING]
    tx = Tx()
    for i, status in enumerate(statuses, start=1):
        tx.mission(mission(f"m{i}", i, status))
    await daemon.store.commit(tx)
    pages, before = [], None
    while True:
        got = (await client.get("/api/missions", params={"limit": 2, **({"before": before} if before else {})})).json()
        pages.append([m["id"] for m in got["missions"]])
        before = got["next"]
        if before is None:
            break
    assert pages == [["m4", "m5"], ["m2", "m3"], ["m1"]]
    done = (await client.get("/api/missions", params={"status": "completed,failed", "limit": 2})).json()
    assert [m["id"] for m in done["missions"]] == ["m2", "m3"] and done["next"] == 2
    older = (await client.get("/api/missions", params={"status": "completed,failed", "before": 2})).json()
    assert [m["id"] for m in older["missions"]] == ["m1"] and older["next"] is None
    live = (await client.get("/api/missions", params={"finished": "false"})).json()
    assert [(m["id"], m["seq"]) for m in live["missions"]] == [("m5", 5)]
