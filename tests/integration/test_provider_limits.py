"""Provider limits and prices through the real LLMClient, litellm and HTTP (FakeLLM reports usage).

Time is a FakeClock moved by the sleeps of the limiter and of the client's backoff; the server stamps each
request with that clock, so "never more than 10 in any minute" is read on the provider's side. A sleep moves the
clock only once every request let through has reached the server, so each is stamped at the time it was let
through."""

from __future__ import annotations

import itertools
import threading
from collections.abc import Awaitable, Callable

import anyio
import anyio.lowlevel
import pytest

from polpo.clock import FakeClock
from polpo.llm.client import LLMClient, ModelSettings
from polpo.llm.prices import PriceBook, Rate
from polpo.llm.ratelimit import Limit, RateLimiter
from tests.support.fake_llm import FakeLLM, RecordedRequest, Reply, error, text

pytestmark = pytest.mark.anyio

MODEL = "openai/fake-model"


class Provider:
    """Answers 429 (``Retry-After: 2``) to the first ``burst`` requests, then text with usage; stamps each
    request with the fake clock."""

    def __init__(self, clock: FakeClock, burst: int) -> None:
        self.clock, self.burst = clock, burst
        self.stamps: list[tuple[float, bool]] = []  # (fake time, answered 429)
        self.lock = threading.Lock()

    def __call__(self, req: RecordedRequest) -> Reply:
        with self.lock:
            refused = len(self.stamps) < self.burst
            self.stamps.append((self.clock.monotonic(), refused))
        if refused:
            return error(429, headers={"retry-after": "2"})
        return text("ok", usage={"prompt_tokens": 1000, "completion_tokens": 200})


def fake_time(clock: FakeClock, provider: Provider, granted: Callable[[], int]) -> Callable[[float], Awaitable[None]]:
    async def sleep(seconds: float) -> None:
        with anyio.fail_after(10):
            while len(provider.stamps) < granted():  # a request let through is still on its way
                await anyio.sleep(0.002)
        clock.advance(max(seconds, 0.0))
        await anyio.lowlevel.checkpoint()
    return sleep


async def test_thirty_reviewer_calls_keep_ten_per_minute_and_spread_their_retries_after_a_429_burst() -> None:
    clock = FakeClock()
    provider = Provider(clock, burst=10)
    sleep = fake_time(clock, provider, lambda: limiter.granted)
    limiter = RateLimiter({MODEL: Limit(rpm=10)}, clock=clock, sleep=sleep)
    client = LLMClient(per_model=30, max_retries=5, sleep=sleep, limiter=limiter)
    with FakeLLM() as srv:
        srv.responder = provider
        settings = ModelSettings(MODEL, api_base=srv.base_url)
        replies = []

        async def review() -> None:
            replies.append(await client.chat(settings, [{"role": "user", "content": "review this"}]))

        with anyio.fail_after(60):
            async with anyio.create_task_group() as tg:
                for _ in range(30):
                    tg.start_soon(review)
    assert len(replies) == 30 and sum(r.retries for r in replies) == 10
    times = sorted(t for t, _ in provider.stamps)
    assert len(times) == 40
    # never an 11th request within a minute of the 10 before it
    assert all(times[i + 10] - times[i] >= 60.0 for i in range(len(times) - 10))
    # after the burst of 429s, the requests (the retries first) come one by one, never two within 50 ms
    burst_end = max(t for t, refused in provider.stamps if refused)
    after = [t for t in times if t > burst_end]
    assert len(after) == 30 and all(b - a >= 0.05 for a, b in itertools.pairwise(after))


async def test_a_tokens_per_minute_limit_holds_calls_until_their_tokens_fit() -> None:
    clock = FakeClock()
    provider = Provider(clock, burst=0)
    sleep = fake_time(clock, provider, lambda: limiter.granted)
    limiter = RateLimiter({MODEL: Limit(tpm=1000)}, clock=clock, sleep=sleep)
    client = LLMClient(max_retries=0, sleep=sleep, limiter=limiter)
    with FakeLLM() as srv:
        srv.responder = provider
        settings = ModelSettings(MODEL, api_base=srv.base_url, max_tokens=400)  # ~400 tokens a call at most
        for _ in range(5):
            await client.chat(settings, [{"role": "user", "content": "x"}])
    times = [t for t, _ in provider.stamps]
    # two calls of ~400 tokens fit a minute's 1000; the third waits for the first to leave the window
    assert times[2] - times[0] >= 60.0 and times[4] - times[2] >= 60.0 and times[1] == times[0]


async def test_a_local_model_is_counted_in_tokens_with_cost_unknown_or_priced_from_prices() -> None:
    with FakeLLM() as srv:
        srv.responder = lambda req: text("ok", usage={"prompt_tokens": 1000, "completion_tokens": 500})
        settings = ModelSettings(MODEL, api_base=srv.base_url)
        unknown = PriceBook()
        reply = await LLMClient(prices=unknown).chat(settings, [{"role": "user", "content": "hi"}])
        assert (reply.prompt_tokens, reply.completion_tokens, reply.cost) == (1000, 500, None)
        assert unknown.unknown == {MODEL}  # flagged (and logged) once
        priced = PriceBook({MODEL: Rate(input_per_mtok=2.0, output_per_mtok=8.0)})
        reply = await LLMClient(prices=priced).chat(settings, [{"role": "user", "content": "hi"}])
        assert reply.cost == pytest.approx(1000 * 2e-6 + 500 * 8e-6) and not priced.unknown
