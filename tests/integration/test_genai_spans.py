"""The LLM agent's model calls and tool calls as OpenTelemetry spans by the GenAI semantic conventions, from a real
daemon (FakeLLM reporting usage, [prices] pricing it), checked with the SDK's in-memory exporter."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.semconv._incubating.attributes import gen_ai_attributes as gen_ai

from polpo.config import load_config
from polpo.store import read
from polpo.telemetry.spans import EventSpans
from tests.support.daemon import mission_json, running_daemon, submit, write_config
from tests.support.fake_llm import FakeLLM, text, tool_call

pytestmark = pytest.mark.anyio


async def test_chat_and_execute_tool_spans_carry_the_usage_under_the_attempt(tmp_path: Path) -> None:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    with FakeLLM() as srv:
        srv.script(tool_call("write_file", {"path": "out.txt", "content": "hi\n"},
                             usage={"prompt_tokens": 900, "completion_tokens": 40}),
                   tool_call("read_file", {"path": "missing.txt"}, usage={"prompt_tokens": 950, "completion_tokens": 20}),
                   text("done", usage={"prompt_tokens": 1000, "completion_tokens": 10}))
        cfg = load_config(write_config(tmp_path, agents=f"""
[agents.coder]
type = "llm"
model = "openai/span-model"
api_base = "{srv.base_url}"

[llm]
max_retries = 0

[prices."openai/span-model"]
input_per_mtok = 1.0
output_per_mtok = 10.0
"""))
        async with running_daemon(cfg) as (daemon, waiter), anyio.create_task_group() as tg:
            assert daemon.store is not None

            async def reviews(task_id: str, idx: int) -> list[dict[str, Any]]:
                return await daemon.readers.run(lambda con: read.latest_reviews(con, task_id, idx))

            async def transcripts(task_id: str, n: int) -> list[dict[str, Any]]:
                return await daemon.readers.run(lambda con: read.transcript(con, f"{task_id}/{n}") or [])

            spans = EventSpans(provider.get_tracer("test"), reviews, transcripts)
            daemon.store.subscribe(spans.observe)
            tg.start_soon(spans.run)
            submit(cfg, "spans.json", mission_json({"title": "write", "description": "Write out.txt.",
                                                    "assignTo": "coder",
                                                    "expectations": [{"type": "file_exists", "path": "out.txt"}]}))
            await waiter.wait_event("mission:completed", timeout=60)
            with anyio.fail_after(10):  # made from the stored transcript, just after agent:finished
                while len([s for s in exporter.get_finished_spans() if s.name.startswith(("chat", "execute"))]) < 5:
                    await anyio.sleep(0.02)
            tg.cancel_scope.cancel()
    done = list(exporter.get_finished_spans())
    by_id = {s.context.span_id: s for s in done if s.context is not None}
    [attempt] = [s for s in done if s.name == "attempt 1 (initial)"]
    chats = [s for s in done if s.name == "chat openai/span-model"]
    tools = [s for s in done if s.name.startswith("execute_tool ")]
    assert len(chats) == 3 and [s.name for s in tools] == ["execute_tool write_file", "execute_tool read_file"]
    assert all(s.parent is not None and by_id[s.parent.span_id] is attempt for s in chats + tools)
    usage = [(dict(s.attributes or {})[gen_ai.GEN_AI_USAGE_INPUT_TOKENS],
              dict(s.attributes or {})[gen_ai.GEN_AI_USAGE_OUTPUT_TOKENS]) for s in chats]
    assert sorted(usage) == [(900, 40), (950, 20), (1000, 10)]
    first = dict(min(chats, key=lambda s: s.start_time or 0).attributes or {})
    assert first[gen_ai.GEN_AI_OPERATION_NAME] == "chat" and first[gen_ai.GEN_AI_PROVIDER_NAME] == "openai"
    assert first[gen_ai.GEN_AI_REQUEST_MODEL] == "openai/span-model"
    assert first["polpo.cost_usd"] == pytest.approx((900 * 1.0 + 40 * 10.0) / 1e6)
    write, missing = tools
    assert dict(write.attributes or {})[gen_ai.GEN_AI_TOOL_NAME] == "write_file" and write.status.is_ok
    assert missing.status.status_code.name == "ERROR"
