"""Prices, the spend summary, the rate limiter's window and full jitter: the pure parts of issue 20's points 3–5."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest

from polpo.clock import FakeClock
from polpo.jitter import backoff, full_jitter
from polpo.llm.client import LLMClient
from polpo.llm.prices import PriceBook, Rate, litellm_rate
from polpo.llm.ratelimit import Limit, RateLimiter
from polpo.metrics import QualityMetrics, with_spend
from polpo.model.spend import AttemptSpend, ReviewSpend, mission_spend, usd_text
from polpo.store.read import TaskRow


def test_prices_come_from_the_config_first_then_litellms_map_and_unknown_is_none_not_zero() -> None:
    looked: list[str] = []

    def lookup(model: str) -> Rate | None:
        looked.append(model)
        return Rate(1.0, 2.0) if model == "known" else None

    book = PriceBook({"openai/qwen": Rate(0.0, 0.0), "known": Rate(5.0, 5.0)}, lookup=lookup)
    assert book.price("openai/qwen", 1000, 1000) == 0.0  # a local model priced at 0 is priced, not unknown
    assert book.price("known", 1_000_000, 0) == 5.0  # the override wins over the map
    assert book.price("other", 10, 10) is None and book.price("other", 10, 10) is None
    assert looked == ["other"] and book.unknown == {"other"}  # looked up once, flagged once


def test_litellms_map_prices_a_provider_model_but_not_the_same_name_at_another_provider() -> None:
    rate = litellm_rate("openai/gpt-4o-mini")
    assert rate is not None and rate.input_per_mtok > 0 and rate.output_per_mtok > rate.input_per_mtok
    assert litellm_rate("ollama/gpt-4o-mini") is None and litellm_rate("openai/no-such-model") is None


def test_the_spend_summary_splits_phases_and_names_models_without_a_price() -> None:
    attempts = [AttemptSpend("m:1", "initial", "coder", "a", 1000, 100, 0.01),
                AttemptSpend("m:1", "fix", "coder", "a", 2000, 200, 0.02),
                AttemptSpend("m:2", "retry", "other", "a", 10, 1, 0.001),
                AttemptSpend("m:3", "initial", "shell", None, 0, 0, None)]  # a command agent: no calls
    reviews = [ReviewSpend("m:1", "reviewer", "j", 500, 50, 0.005), ReviewSpend("m:1", "judge", "local", 70, 7, None)]
    s = mission_spend(attempts, reviews)
    assert s["total"] == {"tokensIn": 3580, "tokensOut": 358, "usd": 0.036, "costUnknown": ["local"]}
    assert {p: t["usd"] for p, t in s["byPhase"].items()} == {"agent": 0.01, "review": 0.005, "fixes": 0.02,
                                                              "retries": 0.001}
    assert set(s["byAgent"]) == {"coder", "other"} and s["byTask"]["m:1"]["usd"] == 0.035
    assert "cost unknown for local" in usd_text(s["total"])


def test_cost_per_passed_task_counts_every_tasks_spend_over_the_passed_ones() -> None:
    tasks = [TaskRow("m:1", "m", "a", "coder", 0, 0, "done"), TaskRow("m:2", "m", "b", "coder", 0, 0, "failed")]
    row = with_spend(QualityMetrics("m", "mission"), tasks, {"m:1": {"usd": 0.25}, "m:2": {"usd": 0.75}})
    assert row.spend_usd == 1.0 and row.passed_tasks == 1 and row.cost_per_passed_task == 1.0
    none = with_spend(QualityMetrics("m", "mission"), tasks[1:], {"m:2": {"usd": 0.75}})
    assert none.cost_per_passed_task is None and none.to_json()["costPerPassedTask"] is None


def test_full_jitter_draws_below_the_capped_exponential_delay() -> None:
    assert full_jitter(10.0, lambda: 0.5) == 5.0
    assert backoff(1, 1.0, 30.0, lambda: 0.999) < 1.0 and backoff(10, 1.0, 30.0, lambda: 0.5) == 15.0
    client = LLMClient(backoff=1.0, max_backoff=30.0)
    assert all(0 <= client._delay(3, None) < 4.0 for _ in range(50))
    assert client._delay(1, 7.0) >= 7.0  # never before the provider's Retry-After


@pytest.mark.anyio
async def test_the_limiter_waits_for_the_oldest_call_to_leave_the_window_then_paces() -> None:
    clock = FakeClock()
    waits: list[float] = []

    async def sleep(seconds: float) -> None:
        waits.append(seconds)
        clock.advance(seconds)
        await anyio.lowlevel.checkpoint()

    limiter = RateLimiter({"m": Limit(rpm=2)}, clock=clock, sleep=sleep)
    assert limiter.key("m", None) == "m" and limiter.key("x", "m") == "m" and limiter.key("x", None) is None
    for _ in range(4):
        await limiter.acquire("m")
    assert waits == [60.0, 30.0]  # the third waits for the first to leave; after a wait calls are paced
    limiter.hold("m", 5.0)  # a 429 with Retry-After: 5
    await limiter.acquire("m")
    assert waits[-1] >= 5.0 and limiter.granted == 5


def test_prices_and_limits_from_the_config_reach_the_one_client(tmp_path: Path) -> None:
    from polpo.agents.client_setup import client_from_config
    from polpo.config import ConfigError, parse_config
    from polpo.llm import prices

    raw = {"prices": {"openai/qwen": {"input_per_mtok": 0, "output_per_mtok": 0}},
           "limits": {"openai/gpt-4o-mini": {"rpm": 10, "tpm": 100000}, "http://127.0.0.1:8000/v1": {"rpm": 5}}}
    cfg = parse_config(raw, tmp_path / "polpo.toml")
    try:
        client = client_from_config(cfg)
        assert client.limiter is not None
        assert client.limiter.key("openai/gpt-4o-mini", None) == "openai/gpt-4o-mini"
        assert client.limiter.key("openai/local", "http://127.0.0.1:8000/v1") == "http://127.0.0.1:8000/v1"
        assert prices.price("openai/qwen", 10_000, 10_000) == 0.0  # the process's book is the config's
    finally:
        prices.configure({})
    with pytest.raises(ConfigError, match=r"limits\.m\.rpm"):
        parse_config({"limits": {"m": {"rpm": 0}}}, tmp_path / "polpo.toml")
