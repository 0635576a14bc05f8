"""Questions and tool approvals through the real engine on the in-memory store: asked, answered (by a person or by
the timeout's policy), received once by the next attempt — across a crash too — and the rules that decide it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import pytest

from polpo.agents.base import AgentRequest, AgentResult
from polpo.cli.questions_view import question_lines
from polpo.clock import FakeClock
from polpo.command_args import encode
from polpo.model.questions import Ask, Question, QuestionKind, QuestionStatus, looks_like_question, resumes
from polpo.store.memory import MemoryStore
from tests.support.engine import EngineRun, ScriptAgent, config, engine_on_memory, result

pytestmark = pytest.mark.anyio

SNAPSHOT = {"messages": [{"role": "user", "content": "go"}], "pending": [], "turn": 1, "outcomes": []}


def task(title: str, **fields: Any) -> dict[str, Any]:
    return {"title": title, "description": f"do {title}", "assignTo": "fake", **fields}


def asks(ask: Ask, then: int = 0) -> ScriptAgent:
    """An agent whose first attempt stops to ask; a later one records what it received and exits ``then``."""
    def act(r: AgentRequest) -> AgentResult | int:
        if r.attempt_number == 1:
            return AgentResult(**{**result(0).__dict__, "asks": ask})
        return then
    return ScriptAgent(act)


QUESTION = Ask(QuestionKind.QUESTION, "ask_human", "Which port?", snapshot=SNAPSHOT)
TOOL = Ask(QuestionKind.TOOL, "tool", "git.git_commit", arguments={"message": "v1"}, snapshot=SNAPSHOT)


def cfg(tmp_path: Path, extra: str = "") -> Any:
    return config(tmp_path, extra)


async def test_an_answered_question_reaches_the_next_attempt_once(tmp_path: Path) -> None:
    agent = asks(QUESTION)
    async with engine_on_memory(cfg(tmp_path), agents={"fake": agent}) as run:
        m = await run.accept({"tasks": [task("a")]})
        asked = await run.wait_event("question:asked")
        tid = f"{m.id}:1"
        assert run.engine.board.tasks[tid].status == "awaiting_answer"
        assert asked.data["question"] == "Which port?" and asked.data["answer"] == f'polpo answer {tid} "…"'
        status, said = await run.engine.commands.apply("answer", encode(tid, answer="8080", by="alice"))
        assert status == "done", said
        done = await run.wait_event("mission:completed", mission_id=m.id)
    assert done.data["outcome"] == "completed"
    second = agent.requests[1]
    assert second.resume is not None and second.resume.answer == "8080" and second.resume.answered_by == "alice"
    assert second.resume.snapshot == SNAPSHOT
    [row] = run.store.rows("questions", lambda r: True)
    assert row["status"] == "answered"  # the script agent never calls deliver: a real LLM agent does (below)
    answered = run.of("question:answered")[0].data
    assert (answered["by"], answered["source"], answered["answer"]) == ("alice", "person", "8080")


async def test_a_question_waits_across_a_crash_and_its_answer_is_delivered_once(tmp_path: Path) -> None:
    store = MemoryStore(FakeClock())
    agent = asks(QUESTION)
    async with engine_on_memory(cfg(tmp_path), agents={"fake": agent}, store=store, stop=False) as run:
        m = await run.accept({"tasks": [task("a")]})
        await run.wait_event("question:asked")
        await store.flush()
    tid = f"{m.id}:1"

    async def deliver_then(r: AgentRequest) -> int:
        if r.resume is not None and r.deliver is not None:
            await r.deliver(None)  # as the LLM agent does before its conversation goes on
        return 0
    again = ScriptAgent(deliver_then)
    async with engine_on_memory(cfg(tmp_path), agents={"fake": again}, store=store, clock=run.clock) as run2:
        assert run2.engine.board.tasks[tid].status == "awaiting_answer"  # still waiting after the crash
        await run2.engine.commands.apply("answer", encode(tid, answer="8080"))
        await run2.wait_event("mission:completed", mission_id=m.id)
    [first] = again.requests
    assert first.resume is not None and first.resume.answer == "8080"
    [row] = store.rows("questions", lambda r: True)
    assert row["status"] == "delivered" and row["delivered_in"] == first.attempt_id


class SlowDisk(MemoryStore):
    """A store whose writes take their time once ``slow`` is set (a loaded disk, CI's): what was submitted is not
    yet readable while the engine goes on."""

    slow = False

    async def _apply(self, rows: Any, events: Any) -> Any:
        if self.slow:
            await anyio.sleep(0.3)
        return await super()._apply(rows, events)


@pytest.mark.parametrize(("command", "ask"), [("answer", QUESTION), ("approve", TOOL)])
async def test_the_next_attempt_receives_an_answer_the_store_has_not_written_yet(tmp_path: Path, command: str,
                                                                                 ask: Ask) -> None:
    """CI's seed: after a restart the answer was applied and the attempt started before the answer's row was
    written; the attempt read the question as still asked and began a new conversation without it."""
    store, agent = SlowDisk(FakeClock()), asks(ask)
    async with engine_on_memory(cfg(tmp_path), agents={"fake": agent}, store=store) as run:
        m = await run.accept({"tasks": [task("a")]})
        await run.wait_event("question:asked" if ask.kind is QuestionKind.QUESTION else "approval:requested")
        store.slow = True
        fields = {"answer": "8080"} if command == "answer" else {}
        status, said = await run.engine.commands.apply(command, encode(f"{m.id}:1", by="alice", **fields))
        assert status == "done", said
        await run.wait_event("mission:completed", mission_id=m.id)
    resumed = agent.requests[1].resume
    assert resumed is not None and resumed.answered_by == "alice", agent.requests[1]


async def test_a_tool_call_is_approved_or_refused_through_approve_and_reject(tmp_path: Path) -> None:
    agent = asks(TOOL)
    async with engine_on_memory(cfg(tmp_path), agents={"fake": agent}) as run:
        m = await run.accept({"tasks": [task("a")]})
        requested = await run.wait_event("approval:requested")
        tid = f"{m.id}:1"
        assert requested.data["tool"] == "git.git_commit" and requested.data["arguments"] == {"message": "v1"}
        assert run.engine.board.tasks[tid].status == "awaiting_approval"
        status, said = await run.engine.commands.apply("reject", encode(tid, reason="not yet", by="bob"))
        assert status == "done" and said.startswith("refused git.git_commit"), said
        await run.wait_event("mission:completed", mission_id=m.id)
    resumed = agent.requests[1].resume
    assert resumed is not None and resumed.approved is False and resumed.answer == "not yet"
    resolved = run.of("approval:resolved")[0].data
    assert (resolved["status"], resolved["tool"], resolved["by"]) == ("rejected", "git.git_commit", "bob")


async def timed_out(tmp_path: Path, ask: Ask, settings: str, waited: int) -> tuple[ScriptAgent, EngineRun, str]:
    """A task whose first attempt asks, left unanswered past its time; the agent, the run and the outcome."""
    agent = asks(ask)
    async with engine_on_memory(cfg(tmp_path, f"[questions]\n{settings}\n"), agents={"fake": agent}) as run:
        m = await run.accept({"tasks": [task("a", maxRetries=0)]})
        await run.wait_event("question:asked" if ask.kind is QuestionKind.QUESTION else "approval:requested")
        run.clock.advance(waited)
        async with anyio.create_task_group() as tg:
            run.engine.questions._last_tick = -1e9
            assert await run.engine.questions.tick(tg) == 1
        done = await run.wait_event("mission:completed", mission_id=m.id)
    return agent, run, done.data["outcome"]


@pytest.mark.parametrize(("policy", "outcome", "delivered"), [
    ("continue", "completed", "Nobody answered within 60 s."),
    ("fail", "failed", None),
    ("answer", "completed", "Nobody answered within 60 s."),  # no model to answer: it goes on with the note
])
async def test_a_question_nobody_answers_follows_on_timeout(tmp_path: Path, policy: str, outcome: str,
                                                            delivered: str | None) -> None:
    agent, run, ended = await timed_out(tmp_path, QUESTION, f'timeout = 60\non_timeout = "{policy}"', 61)
    assert ended == outcome
    if delivered is not None:
        resumed = agent.requests[1].resume
        assert resumed is not None and resumed.answered_by == "timeout" and resumed.answer == delivered
    else:
        assert len(agent.requests) == 1
        reason = run.of("task:transition", to="failed")[0].data["reason"]
        assert "nobody answered its question in time" in reason


@pytest.mark.parametrize(("policy", "approved", "outcome"), [("refuse", False, "completed"),
                                                             ("approve", True, "completed"),
                                                             ("fail", None, "failed")])
async def test_a_tool_call_nobody_approves_follows_on_approval_timeout(tmp_path: Path, policy: str,
                                                                       approved: bool | None, outcome: str) -> None:
    agent, run, ended = await timed_out(tmp_path, TOOL, f'approval_timeout = 30\non_approval_timeout = "{policy}"',
                                        31)
    assert ended == outcome
    assert run.of("approval:resolved")[0].data["status"] == "timeout"
    if approved is not None:
        resumed = agent.requests[1].resume
        assert resumed is not None and resumed.approved is approved and resumed.answered_by == "timeout"


async def test_answering_what_is_not_asked_is_refused_with_the_reason(tmp_path: Path) -> None:
    async with engine_on_memory(cfg(tmp_path), agents={"fake": ScriptAgent()}) as run:
        m = await run.accept({"tasks": [task("a")]})
        await run.wait_event("mission:completed", mission_id=m.id)
        status, said = await run.engine.commands.apply("answer", encode(f"{m.id}:1", answer="x"))
    assert status == "refused" and said == f"no running task '{m.id}:1'; see `polpo status --all`"


def q(status: QuestionStatus, delivered_in: str | None = None, snapshot: bool = True) -> Question:
    from datetime import UTC, datetime

    return Question("t/1/q", "t", "m", "t/1", QuestionKind.QUESTION, "ask_human", "?", datetime.now(UTC),
                    status=status, delivered_in=delivered_in, snapshot=SNAPSHOT if snapshot else None)


def test_the_next_attempt_goes_on_from_a_question_only_until_an_attempt_that_received_it_ended() -> None:
    assert resumes(q(QuestionStatus.ANSWERED), "t/1", False)
    assert not resumes(q(QuestionStatus.ASKED), "t/1", False)
    assert not resumes(q(QuestionStatus.ANSWERED, snapshot=False), "t/1", False)  # a command agent's: a re-run
    assert resumes(q(QuestionStatus.DELIVERED, "t/2"), "t/2", True)  # received, then a crash: again
    assert not resumes(q(QuestionStatus.DELIVERED, "t/2"), "t/2", False)  # received and the attempt ended
    assert not resumes(q(QuestionStatus.DELIVERED, "t/2"), "t/3", True)  # a later attempt: a fresh start
    assert not resumes(None, None, False)


@pytest.mark.parametrize(("output", "files", "asks_"), [
    ("Which database should I use?", 0, True),
    ("I looked around.\nShould I use PostgreSQL or SQLite?\n\n", 0, True),
    ("Done. Any questions?", 2, False),  # it changed files: its work is done, the question is a courtesy
    ("Is this a question?\nline\nline\nline", 0, False),  # not in the last three lines
    ("", 0, False),
    ("?" + "x" * 2000, 0, False),  # a report, not a question
])
def test_a_command_agents_output_looks_like_a_question_by_polpos_heuristic(output: str, files: int,
                                                                           asks_: bool) -> None:
    assert looks_like_question(output, files) is asks_


async def test_a_question_whose_mission_was_cancelled_is_withdrawn_when_its_time_is_up(tmp_path: Path) -> None:
    async with engine_on_memory(cfg(tmp_path, "[questions]\ntimeout = 60\n"), agents={"fake": asks(QUESTION)}) as run:
        m = await run.accept({"tasks": [task("a")]})
        await run.wait_event("question:asked")
        await run.engine.commands.cancel(m.id, by="test")
        await run.wait_event("mission:completed", mission_id=m.id)
        run.clock.advance(61)
        async with anyio.create_task_group() as tg:
            run.engine.questions._last_tick = -1e9
            await run.engine.questions.tick(tg)
        await run.store.flush()
        [row] = run.store.rows("questions", lambda r: True)
        assert row["status"] == "withdrawn"
        run.engine.questions._last_tick = -1e9
        async with anyio.create_task_group() as tg:
            assert await run.engine.questions.tick(tg) == 0  # it never falls due again
    assert not run.of("question:answered")


async def test_an_answer_not_yet_written_when_its_time_is_up_is_not_withdrawn(tmp_path: Path) -> None:
    """The timer read the question as still asked (its answer submitted, not yet written) and its task as no
    longer waiting: it must not withdraw the answered question."""
    store, held = SlowDisk(FakeClock()), anyio.Event()

    async def act(r: AgentRequest) -> AgentResult | int:
        if r.attempt_number == 1:
            return AgentResult(**{**result(0).__dict__, "asks": QUESTION})
        await held.wait()
        return 0
    async with engine_on_memory(cfg(tmp_path, "[questions]\ntimeout = 60\n"), agents={"fake": ScriptAgent(act)},
                                store=store) as run:
        m = await run.accept({"tasks": [task("a")]})
        await run.wait_event("question:asked")
        store.slow = True
        await run.engine.commands.apply("answer", encode(f"{m.id}:1", answer="8080", by="alice"))
        run.clock.advance(61)
        async with anyio.create_task_group() as tg:
            run.engine.questions._last_tick = -1e9
            await run.engine.questions.tick(tg)
        held.set()
        await run.wait_event("mission:completed", mission_id=m.id)
        [row] = run.store.rows("questions", lambda r: True)
    assert row["status"] == "answered" and row["answered_by"] == "alice"


@pytest.mark.parametrize(("status", "task_status", "said"), [
    ("withdrawn", "cancelled", "    withdrawn: its task stopped waiting for it"),
    ("asked", "cancelled", "    withdrawn: its task stopped waiting for it"),  # before the timer records it
    ("asked", "awaiting_approval", "    waiting for a person until t1: polpo approve m:1  or  polpo reject m:1 "
                                   "--reason TEXT"),
])
def test_polpo_show_says_a_question_its_task_no_longer_waits_for_is_withdrawn(status: str, task_status: str,
                                                                               said: str) -> None:
    row = {"kind": "tool", "source": "tool", "attempt_id": "m:1/1", "task_id": "m:1", "asked_at": "t0",
           "expires_at": "t1", "text": "git.git_commit", "arguments": {"message": "v1"}, "status": status}
    assert question_lines([row], task_status)[1] == said


async def test_a_question_of_blanks_is_still_asked(tmp_path: Path) -> None:
    blank = Ask(QuestionKind.QUESTION, "output", " \n ")
    async with engine_on_memory(cfg(tmp_path), agents={"fake": asks(blank)}) as run:
        await run.accept({"tasks": [task("a")]})
        await run.wait_event("question:asked")
        [moved] = run.of("task:transition", to="awaiting_answer")
    assert moved.data["reason"] == "asks a person: (an empty question)"
