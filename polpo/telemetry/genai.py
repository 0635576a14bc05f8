"""OpenTelemetry spans for an LLM agent's model calls and tool calls, by the GenAI semantic conventions.

Made from the attempt's stored transcript once ``agent:finished`` is written (as the reviewer spans are made from
their stored traces): one ``chat {model}`` span per model answer, with ``gen_ai.usage.input_tokens`` /
``output_tokens``, ``gen_ai.provider.name`` and the price (``polpo.cost_usd``, absent when unknown), and one
``execute_tool {name}`` span per tool call, children of the attempt span; an MCP server's tool call (``git.status``)
also carries ``mcp.method.name`` (``tools/call``), ``gen_ai.tool.type`` ``extension`` and the server's name
(``polpo.mcp.server``), and a question to a person its own ``polpo.question`` span. The attribute names come from the
``opentelemetry-semantic-conventions`` package, so they follow the conventions as that package names them.
A transcript entry's ``ts`` is when it was recorded (the call's end); a model call lasts its ``duration``, a tool
call runs from the previous entry to its own.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from opentelemetry import trace
from opentelemetry.semconv._incubating.attributes import gen_ai_attributes as gen_ai
from opentelemetry.semconv._incubating.attributes import mcp_attributes as mcp
from opentelemetry.semconv.attributes import error_attributes
from opentelemetry.trace import Span, Status, StatusCode, Tracer

from polpo.telemetry.follow import ts_seconds

__all__ = ["agent_call_spans", "provider_name"]

CHAT = gen_ai.GenAiOperationNameValues.CHAT.value
EXECUTE_TOOL = gen_ai.GenAiOperationNameValues.EXECUTE_TOOL.value


def provider_name(model: str) -> str:
    """The provider of a litellm model string (``anthropic/claude-…`` → ``anthropic``; no prefix: ``openai``)."""
    head, sep, _ = model.partition("/")
    return head if sep else "openai"


def _ns(ts: str) -> int:
    return int(ts_seconds(ts) * 1e9)


def agent_call_spans(tracer: Tracer, parent: Span, turns: Sequence[Mapping[str, Any]]) -> int:
    """Record the transcript's calls as children of ``parent``; returns how many spans were made."""
    ctx = trace.set_span_in_context(parent)
    made, previous_end = 0, None
    for entry in turns:
        if not isinstance(entry.get("ts"), str):
            continue
        end = _ns(entry["ts"])
        kind = entry.get("type")
        if kind == "assistant":
            model = str(entry.get("model") or "")
            start = end - int(float(entry.get("duration") or 0.0) * 1e9)
            attrs: dict[str, Any] = {
                gen_ai.GEN_AI_OPERATION_NAME: CHAT, gen_ai.GEN_AI_REQUEST_MODEL: model,
                gen_ai.GEN_AI_PROVIDER_NAME: provider_name(model),
                gen_ai.GEN_AI_USAGE_INPUT_TOKENS: int(entry.get("promptTokens") or 0),
                gen_ai.GEN_AI_USAGE_OUTPUT_TOKENS: int(entry.get("completionTokens") or 0)}
            if entry.get("finishReason"):
                attrs[gen_ai.GEN_AI_RESPONSE_FINISH_REASONS] = [str(entry["finishReason"])]
            if isinstance(entry.get("cost"), int | float):
                attrs["polpo.cost_usd"] = float(entry["cost"])
            span = tracer.start_span(f"{CHAT} {model}", context=ctx, start_time=start, attributes=attrs)
        elif kind == "tool":
            name = str(entry.get("name") or "")
            start = previous_end if previous_end is not None and previous_end <= end else end
            span = tracer.start_span(f"{EXECUTE_TOOL} {name}", context=ctx, start_time=start, attributes={
                gen_ai.GEN_AI_OPERATION_NAME: EXECUTE_TOOL, gen_ai.GEN_AI_TOOL_NAME: name,
                gen_ai.GEN_AI_TOOL_CALL_ID: str(entry.get("callId") or "")})
            server = (entry.get("data") or {}).get("server")
            if isinstance(server, str):
                span.set_attributes({mcp.MCP_METHOD_NAME: "tools/call", "polpo.mcp.server": server,
                                     gen_ai.GEN_AI_TOOL_TYPE: "extension"})
            if not entry.get("ok"):
                span.set_attribute(error_attributes.ERROR_TYPE, str(entry.get("error") or "error"))
                span.set_status(Status(StatusCode.ERROR, str(entry.get("error") or "error")[:200]))
        elif kind == "question":
            span = tracer.start_span("polpo.question", context=ctx, start_time=end, attributes={
                "polpo.question.kind": str(entry.get("kind") or ""), "polpo.question.text": str(entry.get("text"))})
        else:
            previous_end = end
            continue
        span.end(end)
        made += 1
        previous_end = end
    return made
