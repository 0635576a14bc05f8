"""Budgets and what happens at the limit: the real engine on the memory store, the judge a real OpenAI-compatible
HTTP server (tests/support/fake_llm.py) that reports ``usage``; the price is litellm's for the model name.

A review that keeps failing would fix and retry until the counters ran out; a budget stops it before the next
call would not fit, with ``budget:exceeded`` once and the best attempt's score on the failed task.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest

from polpo.agents.base import AgentRequest
from polpo.command_args import encode
from polpo.model.status import TaskStatus
from tests.support.engine import EngineRun, ScriptAgent, config, engine_on_memory
from tests.support.fake_llm import FakeLLM, RecordedRequest, Reply, text, tool_call
from tests.support.judges import ScriptedJudge

pytestmark = pytest.mark.anyio

KEY_ENV = "POLPO_BUDGET_TEST_KEY"
MODEL = "openai/gpt-4o"  # priced in litellm's map: $2.50 / M input tokens, $10 / M output tokens


@pytest.fixture(autouse=True)
def _key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(KEY_ENV, "sk-budget-test")


@pytest.fixture
def srv() -> Iterator[FakeLLM]:
    with FakeLLM() as s:
        yield s


def cfg(root: Path, srv: FakeLLM, extra: str = "", *, retries: int = 5, fixes: int = 20) -> Any:
    return config(root, f"""
[judge]
model = "{MODEL}"
api_base = "{srv.base_url}"
api_key_env = "{KEY_ENV}"
seats = 2
max_tokens = 1024
outage_retries = 0
[llm]
max_retries = 0
{extra}
""", retries=retries, fixes=fixes)


def writes(text: str = "hello\n") -> ScriptAgent:
    def act(r: AgentRequest) -> int:
        (r.workspace / f"out-{r.task_id.replace(':', '_')}.txt").write_text(text)
        return 0
    return ScriptAgent(act)


def task(title: str, **extra: Any) -> dict[str, Any]:
    return {"title": title, "description": "write the file", "assignTo": "fake", "expectations": [
        {"type": "llm_review", "criteria": "the file greets the user", "threshold": 4.5}], **extra}


def flat_judge(scores: list[float] | None = None, seats: int = 2) -> ScriptedJudge:
    """Fails every review (threshold 4.5). The score of attempt n is ``scores[n-1]`` (the last one after them),
    else 2.0: attempts are sequential, and each of the ``seats`` reviewers submits once per attempt (its reasoning
    cites a line of the work's one file, so it is not asked again for the evidence of an uncited score)."""
    submitted = [0]

    def score(_req: RecordedRequest) -> float:
        submitted[0] += 1
        if not scores:
            return 2.0
        return scores[min((submitted[0] - 1) // seats, len(scores) - 1)]
    return ScriptedJudge(score_for=score, cite="line 1")


def llm_bot(srv: FakeLLM, setting: str) -> str:
    """An LLM agent ``bot`` on the fake server, with one more ``[agents.bot]`` setting."""
    return f"""
[agents.bot]
type = "llm"
model = "{MODEL}"
api_base = "{srv.base_url}"
api_key_env = "{KEY_ENV}"
max_tokens = 512
{setting}
"""


def spend_rows(run: EngineRun, scope: str) -> list[dict[str, Any]]:
    return run.store.rows("spend", lambda r: r["scope"] == scope)


def exceeded(run: EngineRun, scope: str) -> list[Any]:
    return [e for e in run.of("budget:exceeded") if e.data["scope"] == scope]


async def test_a_usd_task_budget_stops_a_failing_review_loop_before_it_is_exceeded(tmp_path: Path,
                                                                                   srv: FakeLLM) -> None:
    srv.responder = flat_judge()
    agent = writes()
    async with engine_on_memory(cfg(tmp_path, srv, "[budget]\nwarn_at = 0.3"), agents={"fake": agent}) as run:
        m = await run.accept({"tasks": [task("greet", budget={"usd": 0.10})]})
        done = await run.wait_event("mission:completed", mission_id=m.id, timeout=60)
    assert done.data["outcome"] == "failed"
    [t] = run.store.rows("tasks")
    assert t["status"] == TaskStatus.FAILED and t["reason"].startswith("budget: task ")
    assert "cannot fit the next call" in t["reason"] and "best score 2 " in t["reason"]
    assert t["score"] == 2.0  # its best attempt's score
    [acct] = spend_rows(run, "task")
    assert 0.04 < acct["usd"] <= 0.10  # it spent most of the budget (two reviewers' calls in flight), never more
    assert acct["calls"] == len(srv.requests) - srv.unscripted  # every call the judge answered was counted
    [mission] = spend_rows(run, "mission")
    assert mission["usd"] == acct["usd"] and mission["tokens_in"] == acct["tokens_in"]
    [ev] = exceeded(run, "task")
    assert ev.data["measure"] == "usd" and ev.data["limit"] == 0.10 and ev.data["spent"] <= 0.10
    assert ev.data["spent"] + ev.data["inFlight"] + ev.data["needed"] > 0.10  # the refused call would not fit
    [warning] = run.of("budget:warning")  # at [budget] warn_at, once
    assert warning.data["scope"] == "task" and 0.03 <= warning.data["spent"] < 0.10
    # it stopped for the budget, long before the counters: no max-retries event, fewer runs than allowed
    assert not run.of("task:maxRetries") and 1 < len(agent.requests) < 20
    assert [e.data["to"] for e in run.of("task:transition")][-1] == "failed"
    assert run.of("task:transition")[-1].data["trigger"] == "budget"


async def test_a_usd_budget_counts_at_the_prices_the_config_sets(tmp_path: Path, srv: FakeLLM) -> None:
    """One price book: ``[prices]`` over litellm's map prices what a budget counts, as it prices what ``polpo
    status`` shows (a budget priced by litellm's map alone would count gpt-4o at $2.50 / $10 per M)."""
    srv.responder = flat_judge()
    prices = f'[prices."{MODEL}"]\ninput_per_mtok = 100\noutput_per_mtok = 400'
    async with engine_on_memory(cfg(tmp_path, srv, prices), agents={"fake": writes()}) as run:
        m = await run.accept({"tasks": [task("greet", budget={"usd": 3.0})]})
        await run.wait_event("mission:completed", mission_id=m.id, timeout=60)
    [t] = run.store.rows("tasks")
    assert t["status"] == TaskStatus.FAILED and t["reason"].startswith("budget: task ")
    [acct] = spend_rows(run, "task")
    assert acct["usd"] == pytest.approx((acct["tokens_in"] * 100 + acct["tokens_out"] * 400) / 1e6)
    assert acct["usd_known"] == 1 and 0.5 < acct["usd"] <= 3.0
    reviews = run.store.rows("reviews", lambda r: r["tokens_in"] > 0)  # not the reviewers a refusal stopped
    assert reviews and all(r["cost"] == pytest.approx((r["tokens_in"] * 100 + r["tokens_out"] * 400) / 1e6)
                           for r in reviews)


async def test_a_token_budget_counts_input_and_output_tokens(tmp_path: Path, srv: FakeLLM) -> None:
    srv.responder = flat_judge()
    async with engine_on_memory(cfg(tmp_path, srv), agents={"fake": writes()}) as run:
        m = await run.accept({"tasks": [task("greet", budget={"tokens": 20000})]})
        await run.wait_event("mission:completed", mission_id=m.id, timeout=60)
    [t] = run.store.rows("tasks")
    assert t["status"] == TaskStatus.FAILED and t["reason"].startswith("budget: ") and t["score"] == 2.0
    [acct] = spend_rows(run, "task")
    assert 10000 < acct["tokens_in"] + acct["tokens_out"] <= 20000
    [ev] = exceeded(run, "task")
    assert ev.data["measure"] == "tokens" and ev.data["limit"] == 20000


async def test_a_mission_budget_across_three_tasks_stops_starting_tasks(tmp_path: Path, srv: FakeLLM) -> None:
    srv.responder = flat_judge()
    agent = writes()
    async with engine_on_memory(cfg(tmp_path, srv), agents={"fake": agent}) as run:
        m = await run.accept({"settings": {"budget": {"usd": 0.10}},
                              "tasks": [task("one"), task("two"), task("three")]})
        await run.wait_event("mission:completed", mission_id=m.id, timeout=60)
    tasks = run.store.rows("tasks")
    assert [t["status"] for t in tasks] == [TaskStatus.FAILED] * 3
    assert all(t["reason"].startswith("budget: mission ") for t in tasks), [t["reason"] for t in tasks]
    [mission] = spend_rows(run, "mission")
    assert 0 < mission["usd"] <= 0.10
    [ev] = exceeded(run, "mission")  # three tasks' calls in flight reserve at once: the refusal counted them
    assert ev.data["spent"] + ev.data["inFlight"] + ev.data["needed"] > 0.10
    per_task = spend_rows(run, "task")
    assert abs(sum(r["usd"] for r in per_task) - mission["usd"]) < 1e-9  # the mission is the sum of its tasks
    assert not exceeded(run, "task")


async def test_a_flat_fix_loop_stops_at_the_plateau_before_max_fix_attempts(tmp_path: Path, srv: FakeLLM) -> None:
    srv.responder = flat_judge([2.0, 3.0, 2.9, 2.95])  # attempt 2 is the best; 3 and 4 do not beat it by 0.1
    agent = writes()
    async with engine_on_memory(cfg(tmp_path, srv, retries=0, fixes=10).model_copy(update={"judge": cfg(
            tmp_path, srv).judge.model_copy(update={"correct_expectations": False})}), agents={"fake": agent}) as run:
        m = await run.accept({"settings": {"plateau": {"attempts": 2, "margin": 0.1}}, "tasks": [task("greet")]})
        await run.wait_event("mission:completed", mission_id=m.id, timeout=60)
    [t] = run.store.rows("tasks")
    assert t["status"] == TaskStatus.FAILED and "the fixes stopped improving the score" in t["reason"]
    assert len(agent.requests) == 4 and t["fix_attempts"] == 3  # of 10 allowed
    assert t["score"] == 3.0  # the best attempt's (2), not the last one's (2.95)


async def test_a_daemon_daily_budget_pauses_new_work_and_resumes_the_next_day(tmp_path: Path, srv: FakeLLM) -> None:
    srv.responder = ScriptedJudge(score=5.0)  # every review passes: only the budget holds work back
    agent = writes()
    new_day = anyio.Event()
    slept: list[float] = []
    async with engine_on_memory(cfg(tmp_path, srv, "[budget]\ndaily_tokens = 5000"), agents={"fake": agent}) as run:
        async def sleep(seconds: float) -> None:  # the keeper's wait for the day's end, on the fake clock
            slept.append(seconds)
            await new_day.wait()
            run.clock.advance(seconds)
        run.engine.spend.sleep = sleep
        one = await run.accept({"tasks": [task("one")]}, source="/missions/one.json")
        ev = await run.wait_event("budget:exceeded", timeout=60)
        assert (ev.data["scope"], ev.data["measure"], ev.data["period"]) == ("daemon", "tokens", "2026-01-01")
        two = await run.accept({"tasks": [task("two")]}, source="/missions/two.json")
        with anyio.move_on_after(0.5):  # give the dispatcher every chance to start it
            await run.wait_event("task:transition", task_id=f"{two.id}:1", to="assigned")
        assert [r.task_id for r in agent.requests] == [f"{one.id}:1"]  # the new work waits for the next day
        assert run.store.rows("tasks", lambda r: r["id"] == f"{two.id}:1")[0]["status"] == TaskStatus.PENDING
        assert slept == [86400.0]  # 2026-01-01T00:00Z to midnight
        new_day.set()
        for m in (one, two):
            done = await run.wait_event("mission:completed", mission_id=m.id, timeout=60)
            assert done.data["outcome"] == "completed"
    days = {r["period"]: r for r in spend_rows(run, "daemon")}
    assert "2026-01-01" in days and "2026-01-02" in days
    assert all(r["tokens_in"] + r["tokens_out"] <= 5000 for r in days.values())
    assert len([e for e in exceeded(run, "daemon") if e.data["period"] == "2026-01-01"]) == 1
    assert sorted(r.task_id for r in agent.requests) == sorted([f"{one.id}:1", f"{two.id}:1"])  # no re-run


async def test_an_llm_agents_tool_loop_stops_at_a_turn_boundary_when_the_next_call_would_not_fit(
        tmp_path: Path, srv: FakeLLM) -> None:
    """The agent keeps writing files, one tool call a turn; the task's token budget refuses the call after the
    last one that fits: every tool call made was answered, the file it wrote is whole, nothing runs after."""
    turns = [0]

    def agent_model(req: RecordedRequest) -> Reply:
        turns[0] += 1
        return tool_call("write_file", {"path": f"part{turns[0]}.txt", "content": f"part {turns[0]}\n" * 50})
    srv.responder = agent_model
    async with engine_on_memory(cfg(tmp_path, srv, llm_bot(srv, "max_turns = 40"))) as run:
        m = await run.accept({"tasks": [{"title": "t", "description": "write the parts", "assignTo": "bot",
                                         "budget": {"tokens": 12000},
                                         "expectations": [{"type": "file_exists", "path": "part1.txt"}]}]})
        await run.wait_event("mission:completed", mission_id=m.id, timeout=60)
    [t] = run.store.rows("tasks")
    assert t["status"] == TaskStatus.FAILED and t["reason"].startswith("budget: ")
    assert "cannot fit the next call" in t["reason"]
    [acct] = spend_rows(run, "task")
    assert acct["tokens_in"] + acct["tokens_out"] <= 12000 and acct["calls"] == turns[0] == len(srv.requests)
    assert 1 < turns[0] < 40  # stopped by the budget, not by max_turns
    ws = Path(run.store.rows("missions")[0]["workspace"])
    assert sorted(p.name for p in ws.glob("part*.txt")) == sorted(f"part{n}.txt" for n in range(1, turns[0] + 1))
    assert all(p.read_text() == f"part {p.stem[4:]}\n" * 50 for p in ws.glob("part*.txt"))  # each write whole
    [attempt] = run.store.rows("attempts")
    assert "budget" in attempt["error"] and not run.of("assessment:started")  # no checks after a budget stop


async def test_an_agents_daily_budget_interrupts_its_attempt_which_runs_again_the_next_day(
        tmp_path: Path, srv: FakeLLM) -> None:
    calls = [0]

    def agent_model(req: RecordedRequest) -> Reply:
        calls[0] += 1
        if calls[0] <= 3:
            return tool_call("write_file", {"path": f"part{calls[0]}.txt", "content": "x\n" * 200})
        return text("done: the parts are written")
    srv.responder = agent_model
    extra = llm_bot(srv, "daily_tokens = 5000")
    slept: list[float] = []
    async with engine_on_memory(cfg(tmp_path, srv, extra)) as run:
        async def sleep(seconds: float) -> None:
            slept.append(seconds)
            run.clock.advance(seconds)
        run.engine.spend.sleep = sleep
        m = await run.accept({"tasks": [{"title": "t", "description": "write the parts", "assignTo": "bot",
                                         "expectations": [{"type": "file_exists", "path": "part1.txt"}]}]})
        done = await run.wait_event("mission:completed", mission_id=m.id, timeout=60)
    assert done.data["outcome"] == "completed"
    attempts = sorted(run.store.rows("attempts"), key=lambda a: a["number"])
    assert [a["status"] for a in attempts] == ["interrupted", "finished"]
    assert [a["kind"] for a in attempts] == ["initial", "initial"]  # the same attempt again: no retry used
    assert "agent bot's daily budget cannot fit the next call" in attempts[0]["error"]
    [t] = run.store.rows("tasks")
    assert (t["status"], t["retries"], t["fix_attempts"]) == (TaskStatus.DONE, 0, 0)
    assert slept == [86400.0]
    [ev] = exceeded(run, "agent")
    assert (ev.data["key"], ev.data["period"], ev.data["measure"]) == ("bot", "2026-01-01", "tokens")
    days = {r["period"]: r["tokens_in"] + r["tokens_out"] for r in spend_rows(run, "agent")}
    assert set(days) == {"2026-01-01", "2026-01-02"} and all(v <= 5000 for v in days.values())


async def test_on_budget_hold_waits_on_hold_until_retry_raises_the_budget(tmp_path: Path, srv: FakeLLM) -> None:
    srv.responder = flat_judge()
    agent = writes()
    async with engine_on_memory(cfg(tmp_path, srv), agents={"fake": agent}) as run:
        m = await run.accept({"settings": {"onBudget": "hold"}, "tasks": [task("greet", budget={"usd": 0.05})]})
        tid = f"{m.id}:1"
        await run.wait_event("task:transition", task_id=tid, to="on_hold", timeout=60)
        [t] = run.store.rows("tasks")
        assert t["reason"].startswith("budget: ") and f"polpo retry {tid} --budget USD" in t["reason"]
        assert not run.of("mission:completed") and len(exceeded(run, "task")) == 1
        held = spend_rows(run, "task")[0]["usd"]
        assert await run.engine.commands.apply("retry", encode(tid, usd="lots")) == (
            "refused", f"retry {tid}: usd='lots' is not usd=AMOUNT or tokens=COUNT (positive)")
        srv.responder = ScriptedJudge(score=5.0)
        assert (await run.engine.commands.apply("retry", encode(tid, usd=1.0)))[0] == "done"
        done = await run.wait_event("mission:completed", mission_id=m.id, timeout=60)
    assert done.data["outcome"] == "completed"
    [acct] = spend_rows(run, "task")
    assert acct["limit_usd"] == 1.0 and held < acct["usd"] <= 1.0  # its calls went on under the raised budget
    transitions = [(e.data["from"], e.data["to"]) for e in run.of("task:transition", task_id=tid)]
    assert ("review", "on_hold") in transitions and transitions[-1] == ("review", "done")
