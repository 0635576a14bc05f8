"""The messages polpo sends pass the strict modes of the tests' server, which refuse what real servers refuse.

FakeLLM's ``strict="llama-cpp"`` and ``strict="ollama"`` reproduce llama-cpp-python's and Ollama's refusals of
``"content": null`` (see tests/support/fake_llm.py); the LLM agent's tool loop must pass its second turn.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.integration.test_llm_agent import make_agent, make_request, run
from tests.support.fake_llm import STRICT_MODES, FakeLLM, text, tool_call

pytestmark = [pytest.mark.anyio, pytest.mark.usefixtures("fake_llm_key")]


MESSAGE_SHAPE_MODES = ["llama-cpp", "ollama"]  # the modes that refuse a message's shape (not a server setting)


@pytest.fixture(params=MESSAGE_SHAPE_MODES)
def strict_srv(request: pytest.FixtureRequest) -> Iterator[FakeLLM]:
    with FakeLLM(strict=request.param) as server:
        yield server


async def test_the_tool_loop_passes_its_second_turn_against_a_strict_server(strict_srv: FakeLLM, ws: Path) -> None:
    strict_srv.script(
        tool_call("write_file", {"path": "hello.txt", "content": "hi"}),  # no text: the server sends content null
        tool_call("read_file", {"path": "hello.txt"}),
        text("wrote hello.txt"),
    )
    result, _ = await run(make_agent(strict_srv), make_request(ws))
    assert strict_srv.refusals == []
    assert result.ok and result.stdout_tail == "wrote hello.txt", result.stderr_tail
    assert (ws / "hello.txt").read_text() == "hi"
    sent = [m for req in strict_srv.requests for m in req["messages"] if m["role"] == "assistant"]
    assert sent and all(isinstance(m.get("content"), str) for m in sent)


def post(srv: FakeLLM, messages: list[Any]) -> httpx.Response:
    """The request sent as written (litellm drops a null content before sending, so it cannot show a 422)."""
    return httpx.post(srv.base_url + "/chat/completions", json={"model": "fake-model", "messages": messages},
                      timeout=10)


CALL = [{"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}]


def test_strict_modes_refuse_what_the_real_servers_refuse() -> None:
    """The refusals themselves, so a passing tool loop above means polpo's messages changed, not the fake."""
    user = {"role": "user", "content": "hi"}
    null = [user, {"role": "assistant", "content": None, "tool_calls": CALL}, {"role": "tool", "tool_call_id": "c1", "content": "ok"}]
    missing = [user, {"role": "assistant", "tool_calls": CALL}, {"role": "tool", "tool_call_id": "c1", "content": "ok"}]
    plain_null = [user, {"role": "assistant", "content": None}, user]
    bad_args = [user, {"role": "assistant", "content": "",
                       "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{x"}}]},
                {"role": "tool", "tool_call_id": "c1", "content": "ok"}]
    fine = [user, {"role": "assistant", "content": "", "tool_calls": CALL}, {"role": "tool", "tool_call_id": "c1", "content": "ok"}]
    with FakeLLM(strict="llama-cpp") as srv:
        srv.responder = lambda req: "ok"
        assert post(srv, null).status_code == 422
        assert post(srv, missing).status_code == 500
        assert post(srv, fine).status_code == 200
        assert [s for s, _ in srv.refusals] == [422, 500]
    with FakeLLM(strict="ollama") as srv:
        srv.responder = lambda req: "ok"
        refused = post(srv, plain_null)
        assert refused.status_code == 400
        assert refused.json()["error"]["message"] == "invalid message content type: <nil>"
        assert post(srv, null).status_code == 200  # Ollama takes null content when the message has tool calls
        assert post(srv, bad_args).json()["error"]["message"] == "invalid tool call arguments"
        assert post(srv, fine).status_code == 200
    with FakeLLM() as srv:  # not strict: anything goes
        srv.responder = lambda req: "ok"
        assert post(srv, null).status_code == 200 and post(srv, missing).status_code == 200


async def test_a_vllm_without_tool_parser_fails_the_attempt_at_once_with_its_reason(ws: Path) -> None:
    """Not an outage to wait out (the server answers, and refuses every tool request): one call, the reason."""
    assert "vllm-no-tool-parser" in STRICT_MODES
    with FakeLLM(strict="vllm-no-tool-parser") as srv:
        result, _ = await run(make_agent(srv), make_request(ws))
        assert len(srv.requests) == 1 and [s for s, _ in srv.refusals] == [400]
    assert not result.ok and result.provider_error is None
    assert result.error is not None and "--enable-auto-tool-choice" in result.error
    assert "bad_request" in result.error
