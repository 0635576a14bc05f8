"""Notifications end to end: typed config, rules, and real deliveries to a local HTTP server, a file, a program."""

from __future__ import annotations

import json
import sys
import threading
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import anyio
import pytest

from polpo.config import parse_config
from polpo.events.catalog import Event
from polpo.notify.channels import slack_text, summarize
from polpo.notify.config import NotifyConfig, NotifyConfigError, notify_config, parse_notify
from polpo.notify.router import Notifier

pytestmark = pytest.mark.anyio

TOKEN = "abcdef1234567890XYZsecret"  # a path segment redact_url masks (16+ chars, letters and digits)


# ------------------------------------------------------------------------------------------- the server
@dataclass
class Server:
    port: int = 0
    statuses: deque[int] = field(default_factory=deque)  # answers to give, in order; then `default`
    default: int = 200
    stall: bool = False  # hold every answer until `release` is set (at most 2 s)
    requests: list[dict[str, Any]] = field(default_factory=list)
    received: threading.Event = field(default_factory=threading.Event)
    answered: threading.Event = field(default_factory=threading.Event)
    release: threading.Event = field(default_factory=threading.Event)

    def url(self, path: str = "/hook") -> str:
        return f"http://127.0.0.1:{self.port}{path}"


@pytest.fixture
def server() -> Iterator[Server]:
    state = Server()

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("content-length", 0)))
            state.requests.append({"path": self.path, "headers": {k.lower(): v for k, v in self.headers.items()}, "body": json.loads(body)})
            state.received.set()
            if state.stall:
                state.release.wait(2.0)
            code = state.statuses.popleft() if state.statuses else state.default
            self.send_response(code)
            self.send_header("content-length", "2")
            self.end_headers()
            self.wfile.write(b"ok")
            state.answered.set()

        def log_message(self, format: str, *args: Any) -> None:
            pass

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    httpd.daemon_threads = True
    state.port = httpd.server_address[1]
    thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        yield state
    finally:
        state.release.set()
        httpd.shutdown()
        httpd.server_close()
        thread.join(5)


# ------------------------------------------------------------------------------------------ helpers
def ev(name: str = "sla:violated", seq: int = 1, **data: Any) -> Event:
    data = data or {"entityId": "m:1", "entityType": "task", "deadline": "2026-03-01T12:00:00.000Z",
                    "overdueMs": 5000}
    return Event(seq=seq, ts="2026-03-01T12:00:05.000Z", event=name, mission_id="m", task_id="m:1", data=data)


@dataclass
class Outcomes:
    sent: list[tuple[str, str]] = field(default_factory=list)
    failed: list[tuple[str, str, str]] = field(default_factory=list)

    def on_sent(self, channel: str, event: str) -> None:
        self.sent.append((channel, event))

    def on_failed(self, channel: str, event: str, error: str) -> None:
        self.failed.append((channel, event, error))


def notifier(channels: dict[str, Any], rules: list[dict[str, Any]] | None = None, *, base: Path | None = None,
             queue_size: int = 100) -> tuple[Notifier, Outcomes]:
    cfg = parse_notify(channels, {"rules": rules or [], "queue_size": queue_size}, base=base)
    out = Outcomes()
    return Notifier(cfg, on_failed=out.on_failed, on_sent=out.on_sent), out


async def until(pred: Callable[[], bool], timeout: float = 10) -> None:
    with anyio.fail_after(timeout):
        while not pred():
            await anyio.sleep(0.01)


def _lines(path: Path) -> int:
    return len(path.read_text().splitlines()) if path.exists() else 0


def http(url: str, kind: str = "webhook", **extra: Any) -> dict[str, Any]:
    return {"type": kind, "url": url, "backoff": 0.01, **extra}


# ---------------------------------------------------------------------------------------- webhooks
async def test_webhook_delivers_the_event_as_json(server: Server) -> None:
    n, out = notifier({"ops": http(server.url(), headers={"Authorization": "Bearer t0k3n-value"})},
                      [{"events": ["sla:*"], "channels": ["ops"]}])
    async with anyio.create_task_group() as tg:
        tg.start_soon(n.run)
        assert n.route(ev()) == ["ops"]
        assert n.route(ev("task:created")) == []  # no rule matches
        await until(lambda: out.sent == [("ops", "sla:violated")])
        assert await n.drain(5)
    [req] = server.requests
    assert req["path"] == "/hook"
    assert req["headers"]["authorization"] == "Bearer t0k3n-value"
    assert req["headers"]["x-polpo-event"] == "sla:violated"
    body = req["body"]
    assert body["event"] == "sla:violated" and body["missionId"] == "m" and body["taskId"] == "m:1"
    assert body["data"]["overdueMs"] == 5000 and body["seq"] == 1
    assert body["summary"].startswith("SLA violated: task m:1 is 5s past its deadline")
    assert out.failed == []


async def test_a_500_then_200_is_delivered_on_retry(server: Server) -> None:
    server.statuses.extend([500, 503])
    n, out = notifier({"ops": http(server.url(), retries=3)})
    async with anyio.create_task_group() as tg:
        tg.start_soon(n.run)
        n.route(ev(), extra_channels=["ops"])
        await until(lambda: bool(out.sent))
        assert await n.drain(5)
    assert len(server.requests) == 3 and out.sent == [("ops", "sla:violated")] and out.failed == []


async def test_always_500_fails_after_the_retries_with_the_url_redacted(server: Server) -> None:
    server.default = 500
    url = server.url(f"/services/T0AAAA/{TOKEN}?token=qwerty-secret")
    n, out = notifier({"ops": http(url, retries=2)})
    async with anyio.create_task_group() as tg:
        tg.start_soon(n.run)
        n.route(ev(), extra_channels=["ops"])
        await until(lambda: bool(out.failed))
        assert await n.drain(5)
    [(channel, event, error)] = out.failed
    assert (channel, event) == ("ops", "sla:violated")
    assert "HTTP 500" in error and "gave up after 3 attempt(s)" in error
    assert f"127.0.0.1:{server.port}/services/T0AAAA/***" in error
    assert TOKEN not in error and "qwerty-secret" not in error
    assert len(server.requests) == 3 and out.sent == []


async def test_a_4xx_is_final(server: Server) -> None:
    server.default = 404
    n, out = notifier({"ops": http(server.url(), retries=3)})
    async with anyio.create_task_group() as tg:
        tg.start_soon(n.run)
        n.route(ev(), extra_channels=["ops"])
        await until(lambda: bool(out.failed))
        assert await n.drain(5)
    assert len(server.requests) == 1 and "HTTP 404" in out.failed[0][2]


async def test_429_is_retried(server: Server) -> None:
    server.statuses.append(429)
    n, out = notifier({"ops": http(server.url(), retries=1)})
    async with anyio.create_task_group() as tg:
        tg.start_soon(n.run)
        n.route(ev(), extra_channels=["ops"])
        await until(lambda: bool(out.sent))
        assert await n.drain(5)
    assert len(server.requests) == 2


async def test_connection_refused_is_retried_then_reported() -> None:
    import socket

    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    n, out = notifier({"ops": http(f"http://127.0.0.1:{port}/x/{TOKEN}", retries=2)})
    async with anyio.create_task_group() as tg:
        tg.start_soon(n.run)
        n.route(ev(), extra_channels=["ops"])
        await until(lambda: bool(out.failed))
        assert await n.drain(5)
    error = out.failed[0][2]
    assert "connection failed" in error and "gave up after 3 attempt(s)" in error and TOKEN not in error


async def test_a_request_timeout_is_a_failure(server: Server) -> None:
    server.stall = True
    n, out = notifier({"ops": http(server.url(), retries=0, timeout=0.2)})
    async with anyio.create_task_group() as tg:
        tg.start_soon(n.run)
        n.route(ev(), extra_channels=["ops"])
        await until(lambda: bool(out.failed))
        server.release.set()
        assert await n.drain(5)
    assert "timed out after 0.2 s" in out.failed[0][2]


async def test_a_slow_webhook_delays_neither_route_nor_other_channels(server: Server, tmp_path: Path) -> None:
    server.stall = True
    n, out = notifier({"slow": http(server.url()), "log": {"type": "file", "path": str(tmp_path / "n.jsonl")}},
                      [{"events": ["*"], "channels": ["slow", "log"]}])
    async with anyio.create_task_group() as tg:
        tg.start_soon(n.run)
        n.route(ev(seq=1))
        await anyio.to_thread.run_sync(server.received.wait, 5.0)  # the webhook worker is now stuck
        for seq in range(2, 6):
            assert n.route(ev(seq=seq)) == ["slow", "log"]
            assert not server.answered.is_set()  # route() returned while the server still holds request 1
        await until(lambda: _lines(tmp_path / "n.jsonl") == 5)
        assert not server.answered.is_set()  # the file channel did not wait for the webhook either
        assert len(server.requests) == 1
        server.release.set()
        await until(lambda: len(server.requests) == 5)
        assert await n.drain(5)
    assert [r["body"]["seq"] for r in server.requests] == [1, 2, 3, 4, 5]  # order kept per channel
    assert out.failed == []


async def test_slack_payload_is_one_readable_line(server: Server) -> None:
    n, out = notifier({"team": http(server.url(f"/services/T0/{TOKEN}"), kind="slack")},
                      [{"events": ["quality:gate:failed"], "channels": ["team"]}])
    gate = ev("quality:gate:failed", missionId="m", gateName="review",
              reason="average score 3.20 below minScore 4 <see> & more")
    async with anyio.create_task_group() as tg:
        tg.start_soon(n.run)
        n.route(gate)
        await until(lambda: bool(out.sent))
        assert await n.drain(5)
    assert server.requests[0]["body"] == {
        "text": "[polpo] quality gate review failed in mission m: average score 3.20 below minScore 4 "
                "&lt;see&gt; &amp; more"}


# --------------------------------------------------------------------------------------- file, command
async def test_file_channel_appends_one_json_line_per_event(tmp_path: Path) -> None:
    (tmp_path / "old.jsonl").write_text('{"kept": true}\n')
    n, out = notifier({"audit": {"type": "file", "path": "old.jsonl"}}, [{"events": ["**"], "channels": ["audit"]}],
                      base=tmp_path)
    async with anyio.create_task_group() as tg:
        tg.start_soon(n.run)
        for i, name in enumerate(["sla:warning", "quality:gate:passed", "mission:completed"], 1):
            n.route(ev(name, seq=i, x=i))
        n.route(ev("notification:failed", seq=9))  # never routed: it would feed back into the router
        await until(lambda: len(out.sent) == 3)
        assert await n.drain(5)
    lines = [json.loads(x) for x in (tmp_path / "old.jsonl").read_text().splitlines()]
    assert lines[0] == {"kept": True}
    assert [(x["event"], x["data"]["x"]) for x in lines[1:]] == [
        ("sla:warning", 1), ("quality:gate:passed", 2), ("mission:completed", 3)]


def _script(tmp_path: Path, body: str) -> str:
    path = tmp_path / "hook.py"
    path.write_text(body)
    return str(path)


async def test_command_channel_gets_the_event_json_on_stdin(tmp_path: Path) -> None:
    script = _script(tmp_path, "import os, sys, pathlib\n"
                               "data = sys.stdin.read()\n"
                               "pathlib.Path('got.json').write_text(data)\n"
                               "pathlib.Path('env.txt').write_text(os.environ['POLPO_EVENT'] + ' ' + os.environ['X'])\n")
    n, out = notifier({"cmd": {"type": "command", "argv": [sys.executable, script], "env": {"X": "y"}}},
                      base=tmp_path)
    async with anyio.create_task_group() as tg:
        tg.start_soon(n.run)
        n.route(ev(), extra_channels=["cmd"])
        await until(lambda: bool(out.sent or out.failed))
        assert await n.drain(5)
    assert out.failed == []
    got = json.loads((tmp_path / "got.json").read_text())
    assert got["event"] == "sla:violated" and got["data"]["entityId"] == "m:1"
    assert (tmp_path / "env.txt").read_text() == "sla:violated y"


async def test_command_channel_times_out_cleanly(tmp_path: Path) -> None:
    script = _script(tmp_path, "import time\ntime.sleep(30)\n")
    n, out = notifier({"cmd": {"type": "command", "argv": [sys.executable, script], "timeout": 0.3}},
                      base=tmp_path)
    async with anyio.create_task_group() as tg:
        tg.start_soon(n.run)
        n.route(ev(), extra_channels=["cmd"])
        await until(lambda: bool(out.failed))
        assert await n.drain(5)
    assert out.failed[0][:2] == ("cmd", "sla:violated")
    assert "timed out after 0.3 s (killed)" in out.failed[0][2]


async def test_command_channel_reports_exit_code_and_stderr(tmp_path: Path) -> None:
    script = _script(tmp_path, "import sys\nsys.stderr.write('pager down')\nsys.exit(3)\n")
    n, out = notifier({"cmd": {"type": "command", "argv": [sys.executable, script]}}, base=tmp_path)
    async with anyio.create_task_group() as tg:
        tg.start_soon(n.run)
        n.route(ev(), extra_channels=["cmd"])
        await until(lambda: bool(out.failed))
        assert await n.drain(5)
    assert out.failed[0][2].endswith("exit 3: pager down")


# ------------------------------------------------------------------------------------------- routing
def test_channels_from_rules_and_extras_each_once() -> None:
    n, _ = notifier({"a": {"type": "file", "path": "/tmp/a"}, "b": {"type": "file", "path": "/tmp/b"}},
                    [{"events": ["sla:*"], "channels": ["a"]},
                     {"events": ["quality:gate:failed", "sla:violated"], "channels": ["b", "a"]}])
    assert n.channels_for("sla:violated") == ["a", "b"]
    assert n.channels_for("sla:warning", ["b", "b"]) == ["a", "b"]
    assert n.channels_for("quality:gate:failed") == ["b", "a"]
    assert n.channels_for("quality:gate:passed") == []
    assert n.channels_for("quality:gate:passed", ["b"]) == ["b"]
    assert n.channels_for("notification:failed", ["a"]) == []


def test_route_never_blocks_a_full_queue_drops_and_reports() -> None:
    n, out = notifier({"a": {"type": "file", "path": "/tmp/never"}}, queue_size=2)
    assert [n.route(ev(seq=i), ["a"]) for i in range(3)] == [["a"], ["a"], []]  # no worker running
    assert n.pending() == 2
    assert out.failed == [("a", "sla:violated", "queue full (2 pending); notification dropped")]


def test_an_unknown_extra_channel_is_reported_not_raised() -> None:
    n, out = notifier({})
    assert n.route(ev(), ["nope"]) == []
    assert out.failed == [("nope", "sla:violated", "unknown notification channel")]


def test_a_failing_callback_does_not_break_routing() -> None:
    def boom(channel: str, event: str, error: str) -> None:
        raise RuntimeError("callback bug")

    n = Notifier(NotifyConfig(), on_failed=boom)
    assert n.route(ev(), ["nope"]) == []


def test_summaries() -> None:
    warn = ev("sla:warning", entityId="m", entityType="mission", deadline="D", elapsed=80_000, remaining=125_000,
              percentUsed=0.8)
    assert summarize(warn) == "SLA warning: mission m has used 80% of its time; 2m 5s left (deadline D)"
    assert summarize(ev("sla:met", entityId="m:1", entityType="task", deadline="D", marginMs=3_600_000)) == (
        "SLA met: task m:1 finished 1h before its deadline D")
    assert summarize(ev("quality:threshold:failed", avgScore=3.2, threshold=3.5)) == (
        "task m:1: average score 3.2 below the mission threshold 3.5")
    move: dict[str, Any] = {"from": "review", "to": "failed", "reason": "x"}
    assert summarize(ev("task:transition", **move)) == "task m:1: review → failed (x)"
    assert summarize(ev("agent:spawned", agentName="dev", attempt=1, kind="initial", pid=42)) == (
        "task m:1: agent dev started (attempt 1, initial, pid 42)")
    assert slack_text(ev("quality:gate:passed", missionId="m", gateName="g")) == (
        "[polpo] quality gate g passed in mission m")


# -------------------------------------------------------------------------------------------- config
@pytest.mark.parametrize(
    ("channels", "notify", "message"),
    [
        ({"ops": {"type": "webhook"}}, {}, "channels.ops.url: Field required"),
        ({"ops": {"type": "webhook", "url": "ftp://x"}}, {}, "channels.ops.url: Value error, must be an http"),
        ({"ops": {"type": "webhook", "url": "http://x", "retry": 2}}, {},
         "channels.ops.retry: Extra inputs are not permitted"),
        ({"ops": {"type": "pigeon"}}, {}, "channels.ops: type must be one of webhook, slack, file, command"),
        ({"ops": {"url": "http://x"}}, {}, 'channels.ops: missing type = "webhook"'),
        ({"cmd": {"type": "command", "argv": []}}, {}, "channels.cmd.argv: List should have at least 1 item"),
        ({"cmd": {"type": "command", "argv": ["x"], "timeout": 0}}, {},
         "channels.cmd.timeout: Value error, a duration must be greater than zero"),
        ({"f": {"type": "file", "path": "x"}}, {"rules": [{"events": ["sla:*"], "channels": ["f", "slack"]}]},
         "notify.rules[0].channels: unknown notification channel(s) slack (known: f)"),
        ({}, {"rules": [{"events": ["sla:warnings"], "channels": []}]},
         "notify.rules.0.channels: List should have at least 1 item"),
        ({"f": {"type": "file", "path": "x"}}, {"rules": [{"events": ["sla:warnings"], "channels": ["f"]}]},
         "notify.rules[0].events: 'sla:warnings' matches no polpo event"),
        ({"f": {"type": "file", "path": "x"}}, {"rules": [{"events": ["notification:*"], "channels": ["f"]}]},
         "notify.rules[0].events: 'notification:*': notification:* events report deliveries and are never routed"),
        ({}, {"rule": []}, "notify.rule: Extra inputs are not permitted"),
        ({"s": {"type": "slack", "url": "${NO_SUCH_VAR_FOR_POLPO}"}}, {},
         "channels.s.url: environment variable NO_SUCH_VAR_FOR_POLPO is not set"),
    ],
)
def test_config_errors_name_the_key(channels: dict[str, Any], notify: dict[str, Any], message: str) -> None:
    with pytest.raises(NotifyConfigError) as e:
        parse_notify(channels, notify, prefix="polpo.toml: ")
    assert f"polpo.toml: {message}" in str(e.value)


def test_env_references_and_relative_paths_resolve(tmp_path: Path) -> None:
    cfg = parse_notify({"s": {"type": "webhook", "url": "https://h.example/${HOOK}",
                              "headers": {"Authorization": "Bearer ${TOK}"}},
                        "f": {"type": "file", "path": "out/n.jsonl"},
                        "c": {"type": "command", "argv": ["./page.sh", "${LEFT_AS_WRITTEN}"], "timeout": "PT5S",
                              "env": {"KEY": "${TOK}"}}},
                       {}, base=tmp_path, env={"HOOK": "abc", "TOK": "t-1"})
    s, f, c = cfg.channels["s"], cfg.channels["f"], cfg.channels["c"]
    assert s.type == "webhook" and s.url == "https://h.example/abc" and s.headers == {"Authorization": "Bearer t-1"}
    assert f.type == "file" and f.path == tmp_path / "out/n.jsonl"
    assert c.type == "command" and c.cwd == tmp_path and c.timeout.total_seconds() == 5
    assert c.argv == ["./page.sh", "${LEFT_AS_WRITTEN}"] and c.env == {"KEY": "t-1"}


def test_validate_names_used_elsewhere() -> None:
    cfg = parse_notify({"ops": {"type": "file", "path": "/tmp/x"}}, {})
    cfg.validate(["ops"], "mission m gate g")
    with pytest.raises(NotifyConfigError, match=r"mission m gate g: unknown notification channel\(s\) pager "
                                                r"\(known: ops\)"):
        cfg.validate(["ops", "pager"], "mission m gate g")


def test_notify_config_from_the_daemon_config_checks_sla_channels(tmp_path: Path) -> None:
    raw = {"channels": {"ops": {"type": "file", "path": "n.jsonl"}},
           "notify": {"rules": [{"events": ["quality:*"], "channels": ["ops"]}]},
           "sla": {"warning_channels": ["ops"], "violation_channels": ["ops", "pagerduty"]}}
    cfg = parse_config(raw, tmp_path / "polpo.toml")
    with pytest.raises(NotifyConfigError, match=r"sla\.violation_channels: unknown notification channel"):
        notify_config(cfg)
    raw["sla"] = {"violation_channels": ["ops"]}
    nc = notify_config(parse_config(raw, tmp_path / "polpo.toml"))
    ch = nc.channels["ops"]
    assert ch.type == "file" and ch.path == tmp_path / "n.jsonl"
    assert len(nc.rules) == 1
