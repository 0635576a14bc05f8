"""The two expectation-judge calls Polpo's rules say should not happen, in a real daemon: after a failed
expectation marked firm, and on clearly bad work (a review score below 2.5). The call is not made, and the
``assessment:judged`` event says why."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from polpo.assessment.judge import CLEARLY_BAD_SCORE, skip_reason
from polpo.config import load_config
from tests.support.daemon import mission_json, running_daemon, shell_task, submit, write_config
from tests.support.fake_llm import FakeLLM
from tests.support.judges import ScriptedJudge

pytestmark = pytest.mark.anyio


@pytest.fixture
def srv() -> Iterator[FakeLLM]:
    with FakeLLM() as server:
        yield server


async def run_mission(tmp_path: Path, srv: FakeLLM, judge: ScriptedJudge, task: dict[str, Any]) -> Any:
    srv.responder = judge
    cfg = load_config(write_config(tmp_path, extra=f"""
[judge]
model = "openai/fake-model"
api_base = "{srv.base_url}"

[llm]
max_retries = 0
"""))
    async with running_daemon(cfg) as (_, w):
        submit(cfg, "m.json", mission_json(task))
        await w.wait_event("mission:completed", timeout=60)
    return w


async def test_no_judge_call_after_a_failed_firm_expectation(tmp_path: Path, srv: FakeLLM) -> None:
    judge = ScriptedJudge(judge_reply='{"corrections": [{"index": 0, "verdict": "expectation_wrong", '
                                      '"reason": "typo", "fix": {"command": "test -f result.txt"}}]}')
    task = shell_task("write", "echo 42 > result.txt", expectations=[
        {"type": "test", "command": "test -f results.txt", "confidence": "firm"}])
    w = await run_mission(tmp_path, srv, judge, task)
    assert "judge" not in judge.calls and srv.requests == []
    judged = w.of("assessment:judged")
    assert len(judged) == 1 and judged[0].data["changed"] is False
    assert "marked firm" in judged[0].data["skipped"]
    assert not w.of("assessment:corrected")
    assert w.of("task:fix")  # the work is what gets another try, with the failure as feedback


async def test_no_judge_call_on_clearly_bad_work(tmp_path: Path, srv: FakeLLM) -> None:
    judge = ScriptedJudge(score=2.0, judge_reply='{"corrections": [{"index": 0, "verdict": "expectation_wrong", '
                                                 '"reason": "too strict", "fix": {"threshold": 2.5}}]}')
    task = shell_task("greet", "echo hello > out.txt", expectations=[
        {"type": "llm_review", "criteria": "out.txt greets the user politely", "threshold": 3.5}])
    w = await run_mission(tmp_path, srv, judge, task)
    assert judge.calls.get("json", 0) >= 3  # the panel did review
    assert "judge" not in judge.calls
    judged = w.of("assessment:judged")
    assert judged and all("clearly bad" in j.data["skipped"] for j in judged)
    assert not w.of("assessment:corrected")


EXPS = [{"type": "test", "command": "pytest", "confidence": "firm"}, {"type": "file_exists", "path": "a"},
        {"type": "llm_review", "criteria": "c", "threshold": 4}]


@pytest.mark.parametrize(("failed", "score", "skipped"), [
    ([0], None, "marked firm"),
    ([1, 0], 4.0, "marked firm"),  # one firm failure is enough: the task cannot pass after corrections
    ([2], CLEARLY_BAD_SCORE - 0.01, "clearly bad"),
    ([1], 1.0, "clearly bad"),
    ([1], None, None),  # a plain failure: the judge may help
    ([2], CLEARLY_BAD_SCORE, None),  # exactly 2.5 is not below it
    ([1, 2], 3.9, None),
])
def test_skip_reason(failed: list[int], score: float | None, skipped: str | None) -> None:
    reason = skip_reason([{"index": i} for i in failed], EXPS, score)
    assert (reason is None) if skipped is None else (reason is not None and skipped in reason)
