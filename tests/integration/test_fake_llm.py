"""tests.support.fake_llm driven through litellm over real HTTP: tool calls, text, errors, delays, recording."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import threading
import urllib.error
import urllib.request
from collections.abc import Iterator
from typing import Any

import pytest

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

import litellm  # imported after the env var: no network request at import

from tests.support.fake_llm import FakeLLM, delay, error, raw, text, tool_call, tool_calls

pytestmark = pytest.mark.anyio

MODEL = "openai/fake-model"
TOOLS: list[dict[str, Any]] = [
    {
        "type": "function",
        "function": {
            "name": "read_file",
            "description": "Read a file.",
            "parameters": {
                "type": "object",
                "properties": {"path": {"type": "string"}},
                "required": ["path"],
            },
        },
    }
]


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def srv() -> Iterator[FakeLLM]:
    with FakeLLM() as server:
        yield server


async def _complete(srv: FakeLLM, **kwargs: Any) -> Any:
    params: dict[str, Any] = {
        "model": MODEL,
        "api_base": srv.base_url,
        "api_key": "sk-test",
        "messages": [{"role": "user", "content": "hello"}],
        "num_retries": 0,
        "max_retries": 0,
    }
    params.update(kwargs)
    return await litellm.acompletion(**params)


def _http(method: str, url: str, body: bytes | None = None) -> tuple[int, dict[str, Any]]:
    req = urllib.request.Request(url, data=body, method=method, headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=5) as resp:
            return resp.status, json.loads(resp.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


def test_base_url_and_models(srv: FakeLLM) -> None:
    assert srv.base_url == f"http://127.0.0.1:{srv.port}/v1"
    status, body = _http("GET", srv.base_url + "/models")
    assert status == 200
    assert [m["id"] for m in body["data"]] == ["fake-model"]


async def test_tool_call_through_litellm(srv: FakeLLM) -> None:
    srv.script(tool_call("read_file", {"path": "src/main.py"}, id="call_1"))
    resp = await _complete(srv, tools=TOOLS, tool_choice="auto")
    choice = resp.choices[0]
    assert choice.finish_reason == "tool_calls"
    (call,) = choice.message.tool_calls
    assert call.id == "call_1"
    assert call.function.name == "read_file"
    assert json.loads(call.function.arguments) == {"path": "src/main.py"}
    assert resp.usage.prompt_tokens > 0 and resp.usage.completion_tokens > 0
    assert resp.usage.total_tokens == resp.usage.prompt_tokens + resp.usage.completion_tokens

    (req,) = srv.requests
    assert req["model"] == "fake-model"
    assert req["messages"] == [{"role": "user", "content": "hello"}]
    assert req["tools"][0]["function"]["name"] == "read_file"
    assert req["tool_choice"] == "auto"
    assert req.headers["authorization"] == "Bearer sk-test"


async def test_several_tool_calls_and_raw_malformed_arguments(srv: FakeLLM) -> None:
    srv.script(
        tool_calls(
            [tool_call("read_file", {"path": "a"}), ("read_file", '{"path": "b"'), ("glob", None, "g1")]
        )
    )
    resp = await _complete(srv, tools=TOOLS)
    calls = resp.choices[0].message.tool_calls
    assert [c.function.name for c in calls] == ["read_file", "read_file", "glob"]
    assert calls[1].function.arguments == '{"path": "b"'  # verbatim, so agents can be tested on bad JSON
    assert calls[2].id == "g1" and calls[2].function.arguments == "{}"
    assert len({c.id for c in calls}) == 3


async def test_text_replies_and_requests_recorded_in_order(srv: FakeLLM) -> None:
    srv.script(text("first answer"), "second answer")
    one = await _complete(srv, messages=[{"role": "user", "content": "one"}])
    two = await _complete(srv, messages=[{"role": "user", "content": "two"}], temperature=0.2)
    assert one.choices[0].message.content == "first answer"
    assert one.choices[0].finish_reason == "stop"
    assert two.choices[0].message.content == "second answer"
    assert [r["messages"][0]["content"] for r in srv.requests] == ["one", "two"]
    assert srv.requests[1]["temperature"] == 0.2
    assert srv.pending == 0


async def test_rate_limit_surfaces_as_litellm_error_then_success(srv: FakeLLM) -> None:
    srv.script(error(429), text("ok now"))
    with pytest.raises(litellm.RateLimitError):
        await _complete(srv)
    resp = await _complete(srv)
    assert resp.choices[0].message.content == "ok now"
    assert len(srv.requests) == 2


async def test_other_errors_map_to_litellm_exceptions(srv: FakeLLM) -> None:
    srv.script(error(401), error(404), error(400), error(500, body="boom"), error(503))
    with pytest.raises(litellm.AuthenticationError):
        await _complete(srv)
    with pytest.raises(litellm.NotFoundError):
        await _complete(srv)
    with pytest.raises(litellm.BadRequestError):
        await _complete(srv)
    with pytest.raises(litellm.InternalServerError):
        await _complete(srv)
    with pytest.raises(litellm.ServiceUnavailableError):
        await _complete(srv)


async def test_explicit_usage(srv: FakeLLM) -> None:
    srv.script(text("x", usage={"prompt_tokens": 11, "completion_tokens": 7}))
    resp = await _complete(srv)
    assert (resp.usage.prompt_tokens, resp.usage.completion_tokens, resp.usage.total_tokens) == (11, 7, 18)


async def test_slow_reply_times_out(srv: FakeLLM) -> None:
    srv.script(delay(3, text("too late")), text("fast"))
    with pytest.raises(litellm.Timeout):  # the client gave up; the 3 s reply never arrived
        await _complete(srv, timeout=0.3)
    resp = await _complete(srv)
    assert resp.choices[0].message.content == "fast"


async def test_responder_computes_replies_from_the_request(srv: FakeLLM) -> None:
    def score(req: dict[str, Any]) -> Any:
        prompt = req["messages"][-1]["content"]
        return tool_call("submit_review", {"score": 5 if "good" in prompt else 2})

    srv.responder = score
    srv.script(text("scripted first"))
    first = await _complete(srv)
    good = await _complete(srv, messages=[{"role": "user", "content": "good work"}])
    bad = await _complete(srv, messages=[{"role": "user", "content": "meh"}])
    assert first.choices[0].message.content == "scripted first"
    assert json.loads(good.choices[0].message.tool_calls[0].function.arguments) == {"score": 5}
    assert json.loads(bad.choices[0].message.tool_calls[0].function.arguments) == {"score": 2}


async def test_no_scripted_reply_left_is_a_clear_500(srv: FakeLLM) -> None:
    with pytest.raises(litellm.InternalServerError, match="no scripted reply left"):
        await _complete(srv)
    assert srv.unscripted == 1
    status, body = _http("POST", srv.base_url + "/chat/completions", b'{"messages": []}')
    assert status == 500 and body["error"]["message"] == "FakeLLM: no scripted reply left"


async def test_streaming_request_gets_one_chunk_and_done(srv: FakeLLM) -> None:
    srv.script(text("streamed"), tool_call("read_file", {"path": "x"}))
    resp = await _complete(srv, stream=True)
    chunks = [chunk async for chunk in resp]
    content = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert content == "streamed"
    resp = await _complete(srv, stream=True, tools=TOOLS)
    chunks = [chunk async for chunk in resp]
    calls = [tc for c in chunks if c.choices for tc in (c.choices[0].delta.tool_calls or [])]
    assert calls[0].function.name == "read_file"
    assert srv.requests[0]["stream"] is True


async def test_malformed_completion_body(srv: FakeLLM) -> None:
    srv.script(raw("this is not json"))
    with pytest.raises((litellm.APIError, litellm.InternalServerError)):
        await _complete(srv)


def test_reachable_from_another_process(srv: FakeLLM) -> None:
    srv.script(text("hi from the parent"))
    code = (
        "import json, sys, urllib.request\n"
        "req = urllib.request.Request(sys.argv[1] + '/chat/completions', method='POST',\n"
        "    data=json.dumps({'model': 'm', 'messages': [{'role': 'user', 'content': 'x'}]}).encode(),\n"
        "    headers={'Content-Type': 'application/json', 'Authorization': 'Bearer sk-child'})\n"
        "print(json.load(urllib.request.urlopen(req, timeout=5))['choices'][0]['message']['content'])\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code, srv.base_url], capture_output=True, text=True, timeout=30
    )
    assert out.stdout.strip() == "hi from the parent", out.stderr
    assert srv.wait_for_requests(1)[0].headers["authorization"] == "Bearer sk-child"


def test_close_is_prompt_with_a_pending_delay() -> None:
    srv = FakeLLM().start()
    srv.script(delay(30, "never"))
    t = threading.Thread(target=lambda: _http_quiet(srv.base_url + "/chat/completions"), daemon=True)
    t.start()
    srv.wait_for_requests(1)
    srv.close()  # returns although a 30 s reply is pending: the handler thread is woken, not awaited
    t.join(5)
    assert not t.is_alive()


def _http_quiet(url: str) -> None:
    with contextlib.suppress(Exception):
        _http("POST", url, b'{"messages": []}')
