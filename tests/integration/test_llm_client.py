"""LLMClient over real HTTP: at most `per_model` calls in flight per model, and a key that is not set is a clear
auth error before any request is sent."""

from __future__ import annotations

import threading
import time

import anyio
import pytest

from polpo.llm.client import NO_KEY, LLMClient, LLMError, ModelSettings
from tests.support.fake_llm import FakeLLM, RecordedRequest, Reply, error, text

pytestmark = pytest.mark.anyio


class InFlight:
    """A responder that holds each request briefly and records the most requests it saw at once."""

    def __init__(self) -> None:
        self.now = 0
        self.peak = 0
        self.lock = threading.Lock()

    def __call__(self, req: RecordedRequest) -> Reply:
        with self.lock:
            self.now += 1
            self.peak = max(self.peak, self.now)
        time.sleep(0.15)  # this handler thread is "busy" answering; others may arrive meanwhile
        with self.lock:
            self.now -= 1
        return text("ok")


@pytest.mark.parametrize("per_model", [1, 2])
async def test_per_model_limit(per_model: int, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("POLPO_CLIENT_TEST_KEY", "sk-client-test")
    with FakeLLM() as srv:
        counter = InFlight()
        srv.responder = counter
        client = LLMClient(per_model=per_model, max_retries=0)
        settings = ModelSettings("openai/fake-model", api_base=srv.base_url, api_key_env="POLPO_CLIENT_TEST_KEY")
        async with anyio.create_task_group() as tg:
            for _ in range(5):
                tg.start_soon(client.chat, settings, [{"role": "user", "content": "hi"}])
        assert len(srv.requests) == 5
        assert 1 <= counter.peak <= per_model  # never more in flight than the limit


async def test_a_missing_key_fails_before_any_request(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("POLPO_CLIENT_MISSING_KEY", raising=False)
    with FakeLLM() as srv:
        client = LLMClient(max_retries=3)
        settings = ModelSettings("openai/fake-model", api_base=srv.base_url, api_key_env="POLPO_CLIENT_MISSING_KEY")
        with pytest.raises(LLMError) as err:
            await client.chat(settings, [{"role": "user", "content": "hi"}])
        assert err.value.kind == "auth" and "POLPO_CLIENT_MISSING_KEY" in err.value.message
        assert srv.requests == []


async def test_an_api_base_without_a_key_env_never_gets_the_providers_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-provider-default-5e6f7a8b")
    with FakeLLM() as srv:
        srv.script(text("ok"), error(401, "bad key"))
        client = LLMClient(max_retries=0)
        settings = ModelSettings("openai/fake-model", api_base=srv.base_url)
        reply = await client.chat(settings, [{"role": "user", "content": "hi"}])
        assert reply.content == "ok"
        # litellm would fall back to OPENAI_API_KEY; the client sends an explicit placeholder instead
        assert srv.requests[0].headers["authorization"] == f"Bearer {NO_KEY}"
        with pytest.raises(LLMError) as err:
            await client.chat(settings, [{"role": "user", "content": "hi"}])
        assert err.value.kind == "auth"
        assert f"no key was sent to {srv.base_url}: set api_key_env" in err.value.message
