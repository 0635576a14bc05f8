"""A model that repeats the same tool call with the same result is nudged once, then the conversation ends and
the checks decide (a 0.5B model rewrote the same file every turn until max_turns: the task failed although the
file was right)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from polpo.agents.repetition import REPEAT_NUDGE, Repeat, RepeatWatch, signature
from tests.integration.test_llm_agent import make_agent, make_request, run
from tests.support.fake_llm import FakeLLM, text, tool_call

pytestmark = [pytest.mark.anyio, pytest.mark.usefixtures("fake_llm_key")]

WRITE = {"path": "haiku.md", "content": "eight arms\n"}


@pytest.fixture
def srv() -> Iterator[FakeLLM]:
    with FakeLLM(strict="llama-cpp") as server:
        yield server


def nudged(srv: FakeLLM, request: int) -> bool:
    return any(m["role"] == "user" and m["content"] == REPEAT_NUDGE for m in srv.requests[request]["messages"])


async def test_the_same_call_with_the_same_result_is_nudged_then_ends_the_conversation(srv: FakeLLM, ws: Path,
                                                                                         ) -> None:
    srv.script(*[tool_call("write_file", WRITE) for _ in range(6)], text("never asked"))
    result, _ = await run(make_agent(srv, max_turns=10), make_request(ws))
    assert (ws / "haiku.md").read_text() == "eight arms\n"
    # the first write creates the file, the next ones overwrite it with the same bytes: those are the repeats; the
    # third identical turn ends the conversation, long before max_turns
    assert len(srv.requests) == 4
    assert not nudged(srv, 2) and nudged(srv, 3)  # the nudge follows the second identical turn
    assert result.exit_code == 0 and "same write_file call 3 times" in result.stdout_tail
    assert [e["kind"] for e in result.transcript or [] if e["type"] == "error"] == ["repeated"]


async def test_a_model_that_heeds_the_nudge_answers_and_a_changing_call_is_not_a_repeat(srv: FakeLLM, ws: Path,
                                                                                        ) -> None:
    srv.script(*[tool_call("write_file", WRITE) for _ in range(3)], text("done: haiku.md"))
    result, _ = await run(make_agent(srv, max_turns=10), make_request(ws))
    assert result.exit_code == 0 and result.stdout_tail == "done: haiku.md" and nudged(srv, 3)
    srv.reset()
    srv.script(*[tool_call("write_file", {"path": "n.txt", "content": str(i)}) for i in range(4)], text("done"))
    result, _ = await run(make_agent(srv, max_turns=10), make_request(ws))
    assert result.exit_code == 0 and result.stdout_tail == "done" and len(srv.requests) == 5
    assert not any(nudged(srv, i) for i in range(5))


def test_the_rule_counts_identical_turns_in_a_row_and_reads_arguments_as_json() -> None:
    watch = RepeatWatch()
    same = signature([("write_file", '{"path": "a", "content": "x"}', "wrote 1 byte")])
    reordered = signature([("write_file", '{"content": "x",  "path": "a"}', "wrote 1 byte")])
    assert same == reordered
    assert [watch.see(same), watch.see(reordered), watch.see(same)] == [Repeat.NEW, Repeat.NUDGE, Repeat.END]
    other = signature([("write_file", '{"path": "a", "content": "x"}', "Error: disk full")])
    assert watch.see(other) is Repeat.NEW  # a different result: the model may be working around it
