"""OpenTelemetry traces from a real daemon: mission → task → attempt → check → reviewer call, with the model,
tokens, cost, score and verdict; checked with the SDK's in-memory exporter, then exported for real over
OTLP/HTTP to a local receiver, configured only through the standard ``OTEL_*`` variables."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import anyio
import pytest
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from polpo.config import load_config
from polpo.store import read
from polpo.telemetry.spans import EventSpans
from tests.support.daemon import (
    daemon_process,
    mission_json,
    running_daemon,
    shell_task,
    submit,
    wait_events,
    write_config,
)
from tests.support.fake_llm import FakeLLM
from tests.support.judges import ScriptedJudge

MODELS = ("judge-a", "judge-b", "judge-c")


@pytest.fixture
def judge() -> Iterator[FakeLLM]:
    with FakeLLM(models=MODELS) as srv:
        srv.responder = ScriptedJudge(score_for=lambda req: 2.0 if req.get("model") == "judge-c" else 4.5)
        yield srv


def judge_config(root: Path, srv: FakeLLM, extra: str = "") -> Path:
    models = ", ".join(f'"openai/{m}"' for m in MODELS)
    return write_config(root, extra=f"""
[judge]
models = [{models}]
api_base = "{srv.base_url}"
api_key_env = "OTEL_TEST_JUDGE_KEY"
correct_expectations = false
{extra}""")


MISSION = mission_json(
    shell_task("write", "echo hello > out.txt", expectations=[
        {"type": "file_exists", "path": "out.txt"},
        {"type": "llm_review", "criteria": "out.txt greets", "threshold": 3.0,
         "dimensions": [{"name": "politeness", "weight": 1, "description": "Is it polite?"}]}]),
    shell_task("fails", "exit 2", maxRetries=0, maxFixAttempts=0), name="traced")


@pytest.mark.anyio
async def test_spans_follow_the_mission_down_to_each_reviewer_call(tmp_path: Path, judge: FakeLLM,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OTEL_TEST_JUDGE_KEY", "sk-otel")
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    cfg = load_config(judge_config(tmp_path, judge))
    async with running_daemon(cfg) as (daemon, waiter), anyio.create_task_group() as tg:
        assert daemon.store is not None

        async def reviews(task_id: str, idx: int) -> list[dict[str, Any]]:
            return await daemon.readers.run(lambda con: read.latest_reviews(con, task_id, idx))

        spans = EventSpans(provider.get_tracer("test"), reviews)
        daemon.store.subscribe(spans.observe)
        tg.start_soon(spans.run)
        submit(cfg, "traced.json", MISSION)
        await waiter.wait_event("mission:completed", timeout=60)
        with anyio.fail_after(10):  # the reviewer spans are made from the stored traces, just after the check
            while len([s for s in exporter.get_finished_spans() if s.name.startswith("reviewer")]) < 3:
                await anyio.sleep(0.02)
        tg.cancel_scope.cancel()

    done = list(exporter.get_finished_spans())
    by_id = {s.context.span_id: s for s in done if s.context is not None}

    def parent(s: ReadableSpan) -> ReadableSpan:
        assert s.parent is not None
        return by_id[s.parent.span_id]

    [mission] = [s for s in done if s.name == "mission traced"]
    assert mission.parent is None and mission.attributes is not None
    assert mission.attributes["polpo.outcome"] == "failed" and mission.status.status_code.name == "ERROR"
    tasks = {s.attributes["polpo.task.id"]: s for s in done if s.name.startswith("task ") and s.attributes}
    assert set(tasks) == {"traced:1", "traced:2"} and all(parent(t) is mission for t in tasks.values())
    assert tasks["traced:1"].attributes is not None and tasks["traced:1"].attributes["polpo.score"] == 4.5
    assert tasks["traced:2"].status.status_code.name == "ERROR"
    [attempt] = [s for s in done if s.name == "attempt 1 (initial)" and parent(s) is tasks["traced:1"]]
    assert attempt.attributes is not None and attempt.attributes["polpo.verdict"] == "passed"
    checks = {s.attributes["polpo.check.type"]: s for s in done if s.name.startswith("check ") and s.attributes}
    assert set(checks) == {"file_exists", "llm_review"} and all(parent(c) is attempt for c in checks.values())
    assert checks["llm_review"].attributes is not None and checks["llm_review"].attributes["polpo.score"] == 4.5
    reviewers = sorted((s for s in done if s.name.startswith("reviewer")), key=lambda s: s.name)
    assert [parent(r) for r in reviewers] == [checks["llm_review"]] * 3
    attrs = [dict(r.attributes or {}) for r in reviewers]
    assert [a["gen_ai.request.model"] for a in attrs] == [f"openai/{m}" for m in MODELS]
    assert [a["polpo.score"] for a in attrs] == [4.5, 4.5, 2.0]
    assert all(a["polpo.tokens"] > 0 and a["polpo.verdict"] == "scored" for a in attrs)
    for s in done:  # every span lies within its parent's time
        if s.parent is not None and s.name.startswith(("task", "attempt", "check")):
            p = parent(s)
            assert p.start_time is not None and s.start_time is not None and p.start_time <= s.start_time


class _Receiver(ThreadingHTTPServer):
    bodies: list[bytes]


class _Handler(BaseHTTPRequestHandler):
    def do_POST(self) -> None:
        assert isinstance(self.server, _Receiver)
        self.server.bodies.append(self.rfile.read(int(self.headers["content-length"])))
        self.send_response(200)
        self.send_header("content-type", "application/x-protobuf")
        self.send_header("content-length", "0")
        self.end_headers()

    def log_message(self, *args: Any) -> None:
        return


def test_otel_variables_alone_export_the_trace_over_otlp_http(tmp_path: Path, judge: FakeLLM) -> None:
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

    receiver = _Receiver(("127.0.0.1", 0), _Handler)
    receiver.bodies = []
    threading.Thread(target=receiver.serve_forever, daemon=True).start()
    env = {"OTEL_TEST_JUDGE_KEY": "sk-otel", "OTEL_TRACES_EXPORTER": "otlp", "OTEL_SERVICE_NAME": "polpo-test",
           "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": f"http://127.0.0.1:{receiver.server_address[1]}/v1/traces",
           "OTEL_BSP_SCHEDULE_DELAY": "100"}
    try:
        config = judge_config(tmp_path, judge)
        (tmp_path / "missions" / "traced.json").write_text(MISSION)
        with daemon_process(config, env=env) as proc:
            wait_events(tmp_path / "state", lambda evs: any(e["event"] == "mission:completed" for e in evs), 60)
            proc.terminate()  # the shutdown flushes what is batched
            assert proc.wait(timeout=30) == 0
    finally:
        receiver.shutdown()
    names, services = [], set()
    for body in receiver.bodies:
        req = ExportTraceServiceRequest.FromString(body)
        for rs in req.resource_spans:
            services |= {a.value.string_value for a in rs.resource.attributes if a.key == "service.name"}
            names += [s.name for ss in rs.scope_spans for s in ss.spans]
    assert services == {"polpo-test"}
    assert "mission traced" in names and "task traced:1" in names and "check llm_review" in names
    assert sum(n.startswith("reviewer") for n in names) == 3
