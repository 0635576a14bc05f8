"""A budget survives crashes (issue 28, break 4): a real daemon, an LLM agent on the scripted provider that bills
25 000 output tokens a call (its ``max_tokens``) and ``kill -9``s the daemon right after each reply, and a task
budget of 60 000 tokens. The daemon is started again after each kill, as its service manager would.

Each call's estimate is in the store before the call is sent, so a kill between the reply and the write of its
spend leaves the estimate counted: spend counted >= spend served, and the budget is never passed (the third call
does not fit). Before, each kill lost that call's spend and the task went on calling."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from tests.support.daemon import daemon_process, mission_json, read_events, wait_events, write_config
from tests.support.fake_llm import FakeLLM, RecordedRequest, Reply, text

pytestmark = pytest.mark.slow

KEY_ENV = "POLPO_BUDGET_CRASH_KEY"
LIMIT = 60_000
OUT = 25_000  # each reply's output tokens: the agent's max_tokens, all of it
KILLS = 3  # the first replies are each followed by a kill -9 of the daemon
LIVES = 6


def _completed(evs: list[dict[str, Any]]) -> bool:
    return any(e["event"] == "mission:completed" for e in evs)


def test_a_call_served_right_before_a_kill_9_still_counts_against_its_task_budget(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(KEY_ENV, "sk-budget-crash")
    served: list[int] = []
    pid = [0]
    with FakeLLM() as srv:
        def reply(req: RecordedRequest) -> Reply:
            prompt = len(json.dumps(req["messages"])) // 4  # fewer than polpo's estimate counts (chars / 3)
            served.append(prompt + int(req["max_tokens"]))
            return text("done", usage={"prompt_tokens": prompt, "completion_tokens": int(req["max_tokens"])})

        def kill(_req: RecordedRequest) -> None:
            if len(served) <= KILLS:
                os.kill(pid[0], signal.SIGKILL)

        srv.responder = reply
        srv.after_reply = kill
        config = write_config(tmp_path, agents=f"""
[agents.bot]
type = "llm"
model = "openai/fake-model"
api_base = "{srv.base_url}"
api_key_env = "{KEY_ENV}"
max_tokens = {OUT}

[llm]
max_retries = 0
""", extra="")
        config.write_text(config.read_text().replace("max_retries = 1", "max_retries = 10"))
        (tmp_path / "missions" / "spend.json").write_text(mission_json(
            {"title": "T", "description": "answer", "assignTo": "bot", "budget": {"tokens": LIMIT}}, name="spend"))
        state = tmp_path / "state"
        for _ in range(LIVES):
            with daemon_process(config) as proc:
                pid[0] = proc.pid
                # the harness's bounded wait: until the provider's kill ended this life, or the mission ended
                wait_events(state, lambda evs, proc=proc: proc.poll() is not None or _completed(evs), 120)
            if _completed(read_events(state)):
                break
    with sqlite3.connect(state / "polpo.db") as db:
        [(counted,)] = db.execute("SELECT tokens_in + tokens_out FROM spend WHERE scope = 'task'").fetchall()
    assert len(served) >= 2  # calls were served and the daemon was killed after them
    assert counted >= sum(served), (counted, served)  # no kill made the budget forget a call
    assert sum(served) <= LIMIT, served  # and the budget was never passed
    evs = read_events(state)
    done = next(e for e in evs if e["event"] == "mission:completed")
    assert done["data"]["outcome"] == "failed"
    failed = [e for e in evs if e["event"] == "task:transition" and e["data"]["to"] == "failed"]
    assert failed and "budget" in failed[-1]["data"]["reason"], failed
