"""An empty reply (no text, no tool call) is re-asked a bounded number of times, then the attempt fails."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from polpo.agents.llm import EMPTY_REPLY_NUDGE
from tests.integration.test_llm_agent import make_agent, make_request, run
from tests.support.fake_llm import FakeLLM, text, tool_call

pytestmark = [pytest.mark.anyio, pytest.mark.usefixtures("fake_llm_key")]


@pytest.fixture
def srv() -> Iterator[FakeLLM]:
    with FakeLLM(strict="llama-cpp") as server:
        yield server


def nudges(srv: FakeLLM) -> int:
    return sum(m["content"] == EMPTY_REPLY_NUDGE for m in srv.requests[-1]["messages"] if m["role"] == "user")


async def test_an_empty_reply_is_re_asked_and_the_session_goes_on(srv: FakeLLM, ws: Path) -> None:
    srv.script(text(""), tool_call("write_file", {"path": "a.txt", "content": "x"}), text("  \n"), text("done"))
    result, _ = await run(make_agent(srv), make_request(ws))
    assert result.ok and result.exit_code == 0 and result.stdout_tail == "done"
    assert (ws / "a.txt").read_text() == "x"
    assert len(srv.requests) == 4 and nudges(srv) == 2
    assert srv.refusals == []
    # the empty turns are not sent back (some providers refuse an empty assistant message): only the tool turn is
    assistant = [m for m in srv.requests[-1]["messages"] if m["role"] == "assistant"]
    assert len(assistant) == 1 and assistant[0]["tool_calls"][0]["function"]["name"] == "write_file"
    assert next(e["text"] for e in result.transcript or [] if e["type"] == "assistant") == ""  # but recorded


async def test_empty_replies_beyond_the_bound_fail_the_attempt_with_its_reason(srv: FakeLLM, ws: Path) -> None:
    srv.script(text(""), text(""), text(""), text("never asked"))
    result, _ = await run(make_agent(srv), make_request(ws))
    assert not result.ok and result.exit_code == 1 and result.error is None and result.provider_error is None
    assert result.stdout_tail == ""
    assert "the model gave no answer" in result.stderr_tail and "3 empty replies" in result.stderr_tail
    assert len(srv.requests) == 3 and srv.pending == 1  # default: two nudges, then it stops asking
    assert nudges(srv) == 2
    errors = [e for e in result.transcript or [] if e["type"] == "error"]
    assert errors and errors[-1]["kind"] == "empty_reply"


async def test_the_number_of_nudges_is_configurable(srv: FakeLLM, ws: Path) -> None:
    srv.script(text(""), text("ok"))
    result, _ = await run(make_agent(srv, empty_reply_nudges=0), make_request(ws))
    assert result.exit_code == 1 and "the model gave no answer" in result.stderr_tail
    assert len(srv.requests) == 1
