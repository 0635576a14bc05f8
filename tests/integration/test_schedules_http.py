"""Schedules over the daemon's HTTP API on 127.0.0.1: submit a scheduled mission, list it with its next run,
pause, resume and remove it; a refused command is a 409 with the daemon's reason."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import httpx
import pytest

from polpo.clock import FakeClock
from polpo.config import load_config
from tests.support.daemon import mission_json, running_daemon, shell_task, write_config

pytestmark = pytest.mark.anyio

HTTP = '[http]\nlisten = "127.0.0.1:0"\ntoken_env = "POLPO_TEST_NO_TOKEN"\n'
JSON = {"Content-Type": "application/json"}


async def test_schedules_over_http(tmp_path: Path) -> None:
    cfg = load_config(write_config(tmp_path, extra=HTTP))
    doc = mission_json(shell_task("write", "true"), name="nightly", schedule="0 2 * * *", timezone="Europe/Rome")
    async with running_daemon(cfg) as (daemon, waiter), httpx.AsyncClient(timeout=20, headers=JSON) as client:
        assert daemon.http is not None
        client.base_url = httpx.URL(daemon.http.url)
        made = await client.post("/api/missions", content=doc)
        assert made.status_code == 201, made.text
        assert made.json()["scheduleId"] == "nightly" and made.json()["nextRunAt"].endswith(":00:00.000Z")
        assert not waiter.of("mission:accepted")  # a scheduled file starts nothing when it is read

        (row,) = (await client.get("/api/schedules")).json()["schedules"]
        assert (row["id"], row["status"], row["expression"], row["timezone"]) == (
            "nightly", "active", "0 2 * * *", "Europe/Rome")
        assert row["nextRunAt"] == made.json()["nextRunAt"] and row["overlap"] == "skip" and row["catchUp"] == "one"

        paused = await client.post("/api/schedules/nightly/pause")
        assert paused.status_code == 200 and paused.json()["status"] == "done"
        again = await client.post("/api/schedules/nightly/pause")
        assert again.status_code == 409 and "already paused" in again.json()["message"]
        listed = (await client.get("/api/schedules")).json()["schedules"]
        assert listed[0]["status"] == "paused" and listed[0]["nextRunAt"] is None

        assert (await client.post("/api/schedules/nightly/resume")).status_code == 200
        assert (await client.post("/api/schedules/nightly/remove")).status_code == 200
        assert (await client.get("/api/schedules")).json()["schedules"] == []
        gone = await client.post("/api/schedules/nightly/resume")
        assert gone.status_code == 409 and "no schedule 'nightly'" in gone.json()["message"]
        assert (await client.post("/api/schedules/nightly/explode")).status_code == 404
        openapi = json.loads((await client.get("/openapi.json")).text)
        assert "/api/schedules" in openapi["paths"]
    assert [e.data["action"] for e in waiter.of("schedule:changed")] == ["paused", "resumed", "removed"]


async def test_the_listed_next_run_is_the_schedulers_under_an_injected_clock(tmp_path: Path) -> None:
    """GET /api/schedules names the run the scheduler fires next, on the daemon's injected clock: before the first
    firing from the anchor it stored, after it from the stored cursor (the day after, not the instant that fired)."""
    cfg = load_config(write_config(tmp_path, extra=HTTP))
    clock = FakeClock(datetime(2020, 3, 2, 0, 30, tzinfo=UTC))  # long before the wall clock
    doc = mission_json(shell_task("write", "true"), name="nightly", schedule="0 2 * * *", timezone="UTC")
    async with running_daemon(cfg, clock=clock) as (daemon, waiter), \
            httpx.AsyncClient(timeout=20, headers=JSON) as client:
        assert daemon.http is not None
        client.base_url = httpx.URL(daemon.http.url)
        assert (await client.post("/api/missions", content=doc)).status_code == 201
        (row,) = (await client.get("/api/schedules")).json()["schedules"]
        assert row["nextRunAt"].startswith("2020-03-02T02:00:00")
        clock.advance(2 * 3600)  # 02:30: the 02:00 run fires
        daemon.engine.schedules.wake()  # a fake clock's step wakes no sleeper; the scheduler would notice in 5 s
        await waiter.wait_event("schedule:triggered")
        (row,) = (await client.get("/api/schedules")).json()["schedules"]
        # after its cursor: the next day's run
        assert row["lastFiredFor"].startswith("2020-03-02T02:00:00")
        assert row["nextRunAt"].startswith("2020-03-03T02:00:00"), row
