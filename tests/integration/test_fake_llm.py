"""tests.support.fake_llm driven through litellm over real HTTP: tool calls, text, errors, delays, recording."""

from __future__ import annotations

import contextlib
import json
import math
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

from tests.support.fake_llm import (
    FakeLLM,
    answer_logprobs,
    delay,
    error,
    raw,
    score_logprobs,
    text,
    tool_call,
    tool_calls,
)

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


# ------------------------------------------------------------------------------------------------ logprobs


async def test_token_logprobs_are_served_only_when_asked(srv: FakeLLM) -> None:
    content = '{"scores": [{"dimension": "a", "score": 4}]}'
    tokens = score_logprobs(content, [{4: 0.6, 2: 0.3, 5: 0.1}])
    srv.script(text(content, logprobs=tokens), text(content, logprobs=tokens))
    asked = await _complete(srv, logprobs=True, top_logprobs=2)
    plain = await _complete(srv)
    assert srv.requests[0]["logprobs"] is True and srv.requests[0]["top_logprobs"] == 2
    served = asked.choices[0].logprobs.content  # litellm's objects, as polpo.llm.logprobs reads them
    assert "".join(t.token for t in served) == content
    digit = next(t for t in served if t.token == "4")
    assert digit.logprob == pytest.approx(math.log(0.6)) and digit.bytes == [ord("4")]
    assert [(a.token, round(math.exp(a.logprob), 6)) for a in digit.top_logprobs] == [("4", 0.6), ("2", 0.3)]
    assert getattr(plain.choices[0], "logprobs", None) is None  # not asked: not served


def test_the_logprob_builders_place_each_distribution_on_its_own_token() -> None:
    content = '{"answers": [{"question": 1, "answer": "yes"}, {"question": 2, "answer": "no"}]}'
    tokens = answer_logprobs(content, [0.9, 0.2])
    assert "".join(t.token for t in tokens) == content
    yes, no = (t for t in tokens if t.token in ("yes", "no"))
    assert dict(yes.top) == pytest.approx({"yes": math.log(0.9), "no": math.log(0.1)})
    assert no.logprob == pytest.approx(math.log(0.8)) and no.top[0][0] == "no"
    with pytest.raises(ValueError, match="2 places in the content, 1 distributions"):
        answer_logprobs(content, [0.5])


async def test_no_logprobs_mode_refuses_a_request_that_asks_for_them() -> None:
    with FakeLLM(strict="no-logprobs") as srv:
        srv.script(text("fine"))
        with pytest.raises(litellm.BadRequestError, match="logprobs are not supported"):
            await _complete(srv, logprobs=True, top_logprobs=5)
        assert (await _complete(srv)).choices[0].message.content == "fine"
        assert [status for status, _ in srv.refusals] == [400]


# ------------------------------------------------------------------------------------------------ llama-server


async def test_llama_server_mode_refuses_what_llama_server_ignores_or_cannot_render() -> None:
    named = {"type": "function", "function": {"name": "read_file"}}
    replay = [{"role": "user", "content": "read it"},
              {"role": "assistant", "content": None,
               "tool_calls": [{"id": "c1", "type": "function",
                               "function": {"name": "read_file", "arguments": '{"path": "a.py",'}}]},
              {"role": "tool", "tool_call_id": "c1", "content": "Error: bad arguments"}]
    with FakeLLM(strict="llama-server") as srv:
        srv.script(tool_call("read_file", {"path": "a.py"}), tool_call("read_file", {"path": "b.py"}))
        with pytest.raises(litellm.BadRequestError, match="Wrong type supplied for parameter 'tool_choice'"):
            await _complete(srv, tools=TOOLS, tool_choice=named)
        with pytest.raises(litellm.InternalServerError, match="Failed to parse tool call arguments as JSON"):
            await _complete(srv, messages=replay, tools=TOOLS)
        forced = await _complete(srv, tools=TOOLS, tool_choice="required")  # the strings are taken
        fixed = [*replay[:1], {**replay[1], "tool_calls": [{**replay[1]["tool_calls"][0], "function": {
            "name": "read_file", "arguments": "{}"}}]}, replay[2]]
        again = await _complete(srv, messages=fixed, tools=TOOLS, tool_choice="auto")
    assert forced.choices[0].message.tool_calls[0].function.name == "read_file"
    assert json.loads(again.choices[0].message.tool_calls[0].function.arguments) == {"path": "b.py"}
    assert [status for status, _ in srv.refusals] == [400, 500] and srv.pending == 0
