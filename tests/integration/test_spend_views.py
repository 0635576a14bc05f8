"""A mission's spend inside a real daemon: the LLM agent and the review panel over real HTTP (FakeLLM reporting
usage), priced from ``[prices]``; `polpo status`, `polpo show`, the web view's JSON, `mission:completed`'s report
and ``/metrics`` agree on it to the cent. A judge model with no price is counted in tokens and flagged."""

from __future__ import annotations

import itertools
import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest

from polpo.config import Config, load_config
from tests.support.daemon import mission_json, run_cli, running_daemon, submit, write_config
from tests.support.fake_llm import FakeLLM, text, tool_call
from tests.support.judges import ScriptedJudge

pytestmark = pytest.mark.anyio

AGENT_MODEL, JUDGE_MODEL = "openai/spend-agent", "openai/spend-judge"
USAGE = {"prompt_tokens": 1000, "completion_tokens": 100}


@pytest.fixture
def servers() -> Iterator[tuple[FakeLLM, FakeLLM]]:
    with FakeLLM() as agent, FakeLLM() as judge:
        judge.responder = ScriptedJudge(score=4.5)
        yield agent, judge


def config(tmp_path: Path, agent: FakeLLM, judge: FakeLLM, *, judge_priced: bool) -> Config:
    prices = f'[prices."{JUDGE_MODEL}"]\ninput_per_mtok = 1.0\noutput_per_mtok = 2.0\n' if judge_priced else ""
    return load_config(write_config(tmp_path, agents=f"""
[agents.coder]
type = "llm"
model = "{AGENT_MODEL}"
api_base = "{agent.base_url}"
max_turns = 5

[judge]
model = "{JUDGE_MODEL}"
api_base = "{judge.base_url}"

[llm]
max_retries = 0

[http]
listen = "127.0.0.1:0"
token_env = "POLPO_TEST_NO_TOKEN"

[prices."{AGENT_MODEL}"]
input_per_mtok = 3.0
output_per_mtok = 15.0
{prices}
"""))


MISSION = mission_json({"title": "Greet", "description": "Write out.txt with a greeting.", "assignTo": "coder",
                        "expectations": [{"type": "llm_review", "criteria": "out.txt greets", "threshold": 3.5}]})


def metric_sum(metrics: str, name: str, **labels: str) -> float:
    total = 0.0
    for line in metrics.splitlines():
        m = re.match(rf"{name}\{{([^}}]*)\}} (\S+)$", line)
        if m and all(f'{k}="{v}"' in m.group(1) for k, v in labels.items()):
            total += float(m.group(2))
    return total


async def run_mission(cfg: Config, agent: FakeLLM) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any], str]:
    """The report's spend, the web view's mission JSON and mission list entry, and /metrics once the panel's
    traces are counted."""
    agent.script(tool_call("write_file", {"path": "out.txt", "content": "hello\n"}, usage=USAGE),
                 text("wrote out.txt", usage=USAGE))
    async with running_daemon(cfg) as (daemon, w), httpx.AsyncClient(timeout=20) as client:
        assert daemon.http is not None
        submit(cfg, "greet.json", MISSION)
        done = await w.wait_event("mission:completed")
        assert done.data["outcome"] == "completed"
        mid = done.mission_id
        web = (await client.get(f"{daemon.http.url}/api/missions/{mid}")).json()
        listed = (await client.get(f"{daemon.http.url}/api/missions")).json()
        with anyio.fail_after(10):  # the panel's traces are read after its event, off the writer
            while "polpo_llm_tokens_total" not in (metrics := (await client.get(f"{daemon.http.url}/metrics")).text) \
                    or 'role="reviewer"' not in metrics:
                await anyio.sleep(0.05)
    entry = next(m for m in (listed if isinstance(listed, list) else listed["missions"]) if m["id"] == mid)
    return done.data["report"]["spend"], web, entry, metrics


async def cli_json(cfg: Config, *args: str) -> Any:
    out = await anyio.to_thread.run_sync(lambda: run_cli(*args, "--json", "--config", str(cfg.source)))
    return json.loads(out.stdout)


async def test_status_show_web_report_and_metrics_agree_on_a_missions_spend(tmp_path: Path,
                                                                          servers: tuple[FakeLLM, FakeLLM]) -> None:
    agent, judge = servers
    cfg = config(tmp_path, agent, judge, judge_priced=True)
    report, web, entry, metrics = await run_mission(cfg, agent)
    mid = web["id"]
    shown = (await cli_json(cfg, "show", mid))["spend"]
    status = next(m for m in (await cli_json(cfg, "status"))["missions"] if m["id"] == mid)["spend"]
    # the agent's two calls, priced from [prices] by the tokens FakeLLM reported
    assert report["byPhase"]["agent"] == {"tokensIn": 2000, "tokensOut": 200, "usd": round(2 * (3000 + 1500) / 1e6, 6)}
    review = report["byPhase"]["review"]
    assert review["tokensIn"] > 0 and review["usd"] == pytest.approx(
        (review["tokensIn"] * 1.0 + review["tokensOut"] * 2.0) / 1e6, abs=1e-6)
    total = report["total"]
    assert total["usd"] == pytest.approx(report["byPhase"]["agent"]["usd"] + review["usd"], abs=1e-6)
    assert "costUnknown" not in total
    assert shown == report and status == report and web["spend"] == report and entry["spend"] == total
    over = report["overTime"]  # the spend over time: cumulative, in time order, ending at the total
    assert len(over) >= 2 and [p["at"] for p in over] == sorted(p["at"] for p in over)
    assert all(a["usd"] <= b["usd"] and a["tokens"] <= b["tokens"] for a, b in itertools.pairwise(over))
    assert over[-1]["usd"] == pytest.approx(total["usd"], abs=1e-6)
    assert over[-1]["tokens"] == total["tokensIn"] + total["tokensOut"]
    cents = round(total["usd"], 2)
    assert round(metric_sum(metrics, "polpo_llm_cost_usd_total"), 2) == cents
    assert metric_sum(metrics, "polpo_llm_cost_usd_total", role="agent") == pytest.approx(
        report["byPhase"]["agent"]["usd"], abs=1e-9)
    assert metric_sum(metrics, "polpo_llm_tokens_total", kind="input") == total["tokensIn"]
    assert metric_sum(metrics, "polpo_llm_tokens_total", kind="output") == total["tokensOut"]
    assert metric_sum(metrics, "polpo_llm_tokens_total", kind="input", role="reviewer") == review["tokensIn"]
    [quality] = (await cli_json(cfg, "metrics"))["missions"]
    assert quality["spendUsd"] == total["usd"] and quality["passedTasks"] == 1
    assert quality["costPerPassedTask"] == round(total["usd"], 4)
    text_out = await anyio.to_thread.run_sync(lambda: run_cli("show", mid, "--config", str(cfg.source)))
    assert f"spend ${total['usd']:.4f}" in text_out.stdout and "phase: agent" in text_out.stdout
    task_out = await anyio.to_thread.run_sync(lambda: run_cli("show", f"{mid}:1", "--config", str(cfg.source)))
    assert "$0.0090, 2000 in / 200 out tokens" in task_out.stdout  # the attempt's own calls


async def test_a_judge_model_without_a_price_is_counted_in_tokens_and_flagged_cost_unknown(
        tmp_path: Path, servers: tuple[FakeLLM, FakeLLM]) -> None:
    agent, judge = servers
    cfg = config(tmp_path, agent, judge, judge_priced=False)
    report, web, _, metrics = await run_mission(cfg, agent)
    review = report["byPhase"]["review"]
    assert review["tokensIn"] > 0 and review["usd"] == 0 and review["costUnknown"] == [JUDGE_MODEL]
    assert report["total"]["costUnknown"] == [JUDGE_MODEL] and web["spend"] == report
    assert report["total"]["usd"] == report["byPhase"]["agent"]["usd"] > 0
    assert metric_sum(metrics, "polpo_llm_cost_usd_total", role="reviewer") == 0
    assert metric_sum(metrics, "polpo_llm_tokens_total", role="reviewer") == review["tokensIn"] + review["tokensOut"]
    status = await anyio.to_thread.run_sync(lambda: run_cli("status", "--config", str(cfg.source)))
    assert f"cost unknown for {JUDGE_MODEL}" in status.stdout
