"""An MCP server's tool call and a question to a person as OpenTelemetry spans (polpo.telemetry.genai), from a
transcript as the LLM agent records them."""

from __future__ import annotations

from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from polpo.telemetry.genai import agent_call_spans

TURNS = [
    {"turn": 1, "ts": "2026-01-01T00:00:01.000Z", "type": "assistant", "model": "openai/m", "duration": 0.5,
     "promptTokens": 10, "completionTokens": 2, "toolCalls": [{"id": "c1", "name": "git__git_log", "arguments": "{}"}]},
    {"turn": 1, "ts": "2026-01-01T00:00:01.250Z", "type": "tool", "callId": "c1", "name": "git.git_log", "ok": True,
     "result": "Commit history", "data": {"server": "git", "seconds": 0.25}},
    {"turn": 1, "ts": "2026-01-01T00:00:01.300Z", "type": "tool", "callId": "c2", "name": "read_file", "ok": True,
     "result": "x"},
    {"turn": 2, "ts": "2026-01-01T00:00:02.000Z", "type": "question", "kind": "question", "text": "Which port?"},
]


def test_an_mcp_call_names_its_server_and_a_question_is_a_span_of_its_own() -> None:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = provider.get_tracer("test")
    parent = tracer.start_span("attempt")
    assert agent_call_spans(tracer, parent, TURNS) == 4
    parent.end()
    spans = {s.name: s for s in exporter.get_finished_spans()}
    mcp = spans["execute_tool git.git_log"].attributes or {}
    assert mcp["gen_ai.tool.name"] == "git.git_log" and mcp["polpo.mcp.server"] == "git"
    assert mcp["mcp.method.name"] == "tools/call" and mcp["gen_ai.tool.type"] == "extension"
    assert "polpo.mcp.server" not in (spans["execute_tool read_file"].attributes or {})  # a built-in tool
    asked = spans["polpo.question"].attributes or {}
    assert asked["polpo.question.kind"] == "question" and asked["polpo.question.text"] == "Which port?"
