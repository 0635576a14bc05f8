"""The judge-call cache (``[judge] cache = true``): an identical judge request is answered from disk.

Explicit and off by default (promptfoo caches by default and users then mistake a cached score for a fresh
one; agentv deferred caching because it hides variance). The key is a SHA-256 of the model, the endpoint, the
messages, the tools and every parameter, plus the reviewer's seat, so the three reviewers of a panel never
share an answer. Only complete answers are stored: an error raises before anything is written, and a refusal
(``content_filter``), a truncated answer (``length``) or an empty one is never stored. Entries live
``[judge] cache_ttl`` (default 7 days). ``samples > 1`` and the uncertain-band round never use it (variance must
stay visible). Each hit and miss is counted in the reviewer's trace and in ``polpo metrics``.
"""

from __future__ import annotations

import dataclasses
import hashlib
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import anyio
import orjson

from polpo.clock import Clock
from polpo.llm.client import ChatClient, ChatReply, ModelSettings, ToolCallOut, effective_max_tokens
from polpo.llm.logprobs import TokenLogprob
from polpo.store.judge_cache import JudgeCacheFile

__all__ = ["CACHE_FILE", "CachedClient", "JudgeCache", "cache_key", "cacheable"]

CACHE_FILE = "judge-cache.db"


def cache_key(salt: str, settings: ModelSettings, messages: Sequence[dict[str, Any]], params: dict[str, Any]) -> str:
    """SHA-256 of everything that shapes the answer (never the API key)."""
    body = {"salt": salt, "model": settings.model, "apiBase": settings.api_base,
            "temperature": settings.temperature, "messages": list(messages), "params": params}
    return hashlib.sha256(orjson.dumps(body, option=orjson.OPT_SORT_KEYS, default=str)).hexdigest()


def cacheable(reply: ChatReply) -> bool:
    """A complete answer: not a refusal, not cut by max_tokens, not empty."""
    if reply.finish_reason in ("content_filter", "length"):
        return False
    return bool((reply.content or "").strip() or reply.tool_calls)


def _dump(reply: ChatReply) -> str:
    return orjson.dumps(dataclasses.asdict(reply)).decode()


def _load(text: str) -> ChatReply:
    d = orjson.loads(text)
    calls = [ToolCallOut(**c) for c in d.pop("tool_calls", [])]
    tokens = d.pop("logprobs", None)
    logprobs = [TokenLogprob(t["token"], t["logprob"], tuple((a, b) for a, b in t["top"])) for t in tokens] \
        if tokens else None
    return ChatReply(**{**d, "tool_calls": calls, "cached": True, "retries": 0, "retry_errors": [],
                        "duration": 0.0, "logprobs": logprobs})


class JudgeCache:
    """The cache file of one daemon (``<state_dir>/judge-cache.db``) and its hit/miss counters."""

    def __init__(self, path: Path, ttl: float, clock: Clock) -> None:
        self.file = JudgeCacheFile(path)
        self.ttl = ttl
        self.clock = clock
        self.hits = 0
        self.misses = 0

    def now(self) -> float:
        return self.clock.now().timestamp()

    def client_for(self, inner: ChatClient) -> Callable[[int], ChatClient]:
        """The cached client of each seat of a panel."""
        return lambda seat: CachedClient(inner, self, f"seat{seat}")

    def close(self) -> None:
        self.file.close()


class CachedClient:
    """A :class:`~polpo.llm.client.ChatClient` that asks the cache first and stores complete answers."""

    def __init__(self, inner: ChatClient, cache: JudgeCache, salt: str) -> None:
        self.inner = inner
        self.cache = cache
        self.salt = salt

    async def chat(self, settings: ModelSettings, messages: Sequence[dict[str, Any]], *,
                   tools: list[dict[str, Any]] | None = None, tool_choice: str | dict[str, Any] | None = None,
                   response_format: dict[str, Any] | None = None, max_tokens: int | None = None,
                   logprobs: int | None = None) -> ChatReply:
        params = {"tools": tools, "toolChoice": tool_choice, "responseFormat": response_format,
                  "maxTokens": effective_max_tokens(settings, max_tokens), "logprobs": logprobs,
                  "seed": settings.seed}
        key = cache_key(self.salt, settings, messages, params)
        cache = self.cache
        found = await anyio.to_thread.run_sync(cache.file.get, key, cache.now(), cache.ttl)
        if found is not None:
            cache.hits += 1
            return _load(found)
        cache.misses += 1
        reply = await self.inner.chat(settings, messages, tools=tools, tool_choice=tool_choice,
                                      response_format=response_format, max_tokens=max_tokens, logprobs=logprobs)
        if cacheable(reply):
            await anyio.to_thread.run_sync(cache.file.put, key, _dump(reply), cache.now())
        return dataclasses.replace(reply, cached=False)
