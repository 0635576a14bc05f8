"""The judge-call cache: an identical second review is answered from the SQLite file (no request reaches the
judge), ``samples`` 2 never uses it, errors are never stored, entries expire; the daemon side records hits and
misses in the review's summary and ``polpo metrics`` shows them."""

from __future__ import annotations

import json
import sqlite3
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from polpo.assessment.judge_cache import CACHE_FILE, JudgeCache, cacheable
from polpo.clock import FakeClock
from polpo.config import load_config
from polpo.llm.client import ChatReply, LLMClient, ModelSettings
from polpo.review.dimensions import Dim
from polpo.review.panel import PanelOptions, PanelResult, ReviewContext, run_panel
from tests.support.daemon import mission_json, run_cli, running_daemon, shell_task, submit, write_config
from tests.support.fake_llm import FakeLLM, RecordedRequest, Reply, error
from tests.support.judges import ScriptedJudge

pytestmark = pytest.mark.anyio
KEY_ENV = "POLPO_CACHE_TEST_KEY"
MODELS = ("fake-a", "fake-b", "fake-c")
DIMS = [Dim("works", 0.6, "It works"), Dim("clear", 0.4, "It reads well")]


@pytest.fixture
def srv(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeLLM]:
    monkeypatch.setenv(KEY_ENV, "sk-cache")
    with FakeLLM(models=MODELS) as server:
        server.responder = ScriptedJudge(score=4.0)
        yield server


def models(srv: FakeLLM) -> list[ModelSettings]:
    return [ModelSettings(f"openai/{m}", api_base=srv.base_url, api_key_env=KEY_ENV, timeout=20) for m in MODELS]


def ctx(tmp_path: Path) -> ReviewContext:
    return ReviewContext(title="Greet", description="Say hello.", criteria="It greets.", workspace=tmp_path,
                         files_changed=[], timeline="agent printed hello; exit 0")


async def review(srv: FakeLLM, tmp_path: Path, cache: JudgeCache, samples: int = 1) -> PanelResult:
    client = LLMClient(max_retries=0)
    return await run_panel(client, models(srv), ctx(tmp_path), DIMS, 3.0, options=PanelOptions(samples=samples),
                           client_for=cache.client_for(client))


async def test_an_identical_second_review_is_served_from_the_cache(srv: FakeLLM, tmp_path: Path) -> None:
    cache = JudgeCache(tmp_path / "state" / CACHE_FILE, ttl=3600, clock=FakeClock())
    first = await review(srv, tmp_path, cache)
    sent = len(srv.requests)
    assert sent == 6 and first.cache_hits == 0 and first.cache_misses == 6  # 3 reviewers × (analysis, scoring)
    second = await review(srv, tmp_path, cache)
    assert len(srv.requests) == sent  # nothing reached the judge
    assert second.cache_hits == 6 and second.cache_misses == 0
    assert all(t.cache_hits == 2 for t in second.reviewers)
    assert second.global_score == first.global_score == 4.0 and second.passed
    assert second.cost is None and second.tokens == 0  # a cached answer costs nothing now
    assert second.review_json()["cache"] == {"hits": 6, "misses": 0}
    # one entry per seat and call: the three reviewers never share an answer
    assert cache.file.count() == 6


async def test_samples_2_never_use_the_cache(srv: FakeLLM, tmp_path: Path) -> None:
    cache = JudgeCache(tmp_path / CACHE_FILE, ttl=3600, clock=FakeClock())
    await review(srv, tmp_path, cache)
    sent = len(srv.requests)
    sampled = await review(srv, tmp_path, cache, samples=2)
    assert sampled.cache_hits == 0 and sampled.cache_misses == 0
    assert len(srv.requests) == sent + 12  # 6 runs × 2 calls, all fresh


async def test_errors_are_never_stored_and_entries_expire(srv: FakeLLM, tmp_path: Path) -> None:
    clock = FakeClock()
    cache = JudgeCache(tmp_path / CACHE_FILE, ttl=600, clock=clock)
    good = ScriptedJudge(score=4.0)
    lock = threading.Lock()
    failing = {"fake-c"}

    def answer(req: RecordedRequest) -> Reply:
        with lock:
            down = str(req["model"]) in failing
        return error(503) if down else good(req)
    srv.responder = answer
    first = await review(srv, tmp_path, cache)
    assert [t.ok for t in first.reviewers] == [True, True, False]
    assert cache.file.count() == 4  # the failing seat stored nothing
    with lock:
        failing.clear()
    sent = len(srv.requests)
    again = await review(srv, tmp_path, cache)
    assert [t.cache_hits for t in again.reviewers] == [2, 2, 0] and len(srv.requests) == sent + 2
    clock.advance(601)
    sent = len(srv.requests)
    expired = await review(srv, tmp_path, cache)
    assert expired.cache_hits == 0 and len(srv.requests) == sent + 6


def test_refusals_truncations_and_empty_answers_are_not_cacheable() -> None:
    def reply(content: str | None, finish: str = "stop") -> ChatReply:
        return ChatReply(content=content, tool_calls=[], finish_reason=finish, model="m")
    assert cacheable(reply("fine"))
    assert not cacheable(reply("I can't help with that", "content_filter"))
    assert not cacheable(reply('{"scores": [', "length"))
    assert not cacheable(reply("   "))


async def test_the_daemon_records_hits_and_metrics_show_them(srv: FakeLLM, tmp_path: Path) -> None:
    cfg = load_config(write_config(tmp_path, extra=f"""
[judge]
model = "openai/fake-a"
api_base = "{srv.base_url}"
api_key_env = "{KEY_ENV}"
cache = true
uncertain_band = 0
[llm]
max_retries = 0
"""))
    task = shell_task("greet", "echo hello", expectations=[
        {"type": "llm_review", "criteria": "It greets.", "dimensions": [
            {"name": "works", "weight": 0.6}, {"name": "clear", "weight": 0.4}]}])
    async with running_daemon(cfg) as (_, w):
        submit(cfg, "a.json", mission_json(task, name="first"))
        await w.wait_event("mission:completed")
        sent = len(srv.requests)
        submit(cfg, "b.json", mission_json(task, name="second"))
        await w.wait_event("mission:completed", mission_id="b")
    assert len(srv.requests) == sent  # the second, identical review was answered from the cache
    assert (cfg.state_dir / CACHE_FILE).is_file()
    con = sqlite3.connect(cfg.db_path)
    summaries = [json.loads(r[0])["review"]["cache"] for r in con.execute("SELECT scores FROM checks ORDER BY task_id")]
    assert [(c["hits"], c["misses"]) for c in summaries] == [(0, 6), (6, 0)]
    shown = json.loads(run_cli("metrics", "--json", "--config", str(cfg.source)).stdout)
    assert [m["judgeCache"] for m in shown["missions"]] == [{"hits": 0, "misses": 6}, {"hits": 6, "misses": 0}]
    table = run_cli("metrics", "--config", str(cfg.source)).stdout
    assert "judge cache: 6 hit(s), 0 miss(es)" in table
