"""One door to the model providers: litellm, imported lazily once, with bounded retries and per-model limits.

Both the LLM agent and the reviewers call :meth:`LLMClient.chat`. It hides three things the callers should
not each get right on their own:

* ``import litellm`` costs ~4 s; it happens once, in a thread of its own (:mod:`polpo.llm.importer`), so the
  event loop keeps serving events and quick CLI commands never pay it.
* Rate limits (429), timeouts, connection errors and 5xx answers are retried with exponential backoff and full
  jitter (:mod:`polpo.jitter`) a bounded number of times; other errors (bad request, auth) fail at once.
* At most ``per_model`` calls run at once against one model, whoever makes them, and ``[limits]``' requests and
  tokens per minute hold for all of them (:mod:`polpo.llm.ratelimit`; a 429's ``Retry-After`` holds the key).
* A failure that the evidence blames on the request (the same error twice for the same request, a timeout while
  the server answers others, a context overflow: :mod:`polpo.llm.failures`) is not retried and not an outage.
* With a context window (``ModelSettings.context_window``, else litellm's model info), every request is fitted to
  it before it is sent (:mod:`polpo.llm.context`); one that cannot fit is not sent.
* A reply is priced from its tokens by one price book (:mod:`polpo.llm.prices`: ``[prices]``, then litellm's
  map); ``cost`` None means the price is unknown, never free.
* Inside a task's turn, every call is admitted by the turn's budgets before it is sent and counted after it
  (:mod:`polpo.llm.spend`); one that cannot fit is not sent.

API keys come only from the environment (see :mod:`polpo.llm.secrets`); every error message that leaves
this module is passed through :func:`polpo.llm.secrets.redact`. A call to an ``api_base`` always carries an
explicit key (the named variable's, else :data:`NO_KEY`): litellm's fallback to the provider's variable
(``OPENAI_API_KEY``…) would hand that provider's key to whatever endpoint was named.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import anyio

from polpo.jitter import backoff as jittered
from polpo.llm import failures
from polpo.llm.context import ContextOverflow, estimate_tokens, fit_messages
from polpo.llm.failures import classify
from polpo.llm.importer import load_litellm
from polpo.llm.logprobs import refuses_logprobs
from polpo.llm.prices import PriceBook, default_book
from polpo.llm.ratelimit import RateLimiter
from polpo.llm.reply import ChatReply, ToolCallOut, parse_reply
from polpo.llm.secrets import redact
from polpo.llm.spend import CURRENT_METER, DEFAULT_MAX_OUTPUT, BudgetRefused

__all__ = ["NO_KEY", "OUTAGE_KINDS", "ChatClient", "ChatReply", "LLMClient", "LLMError", "ModelSettings",
           "ToolCallOut", "effective_max_tokens", "load_litellm"]

#: What an ``api_base`` without an ``api_key_env`` is sent instead of a key (keyless local servers accept it).
NO_KEY = "no-key"

@dataclass(frozen=True)
class ModelSettings:
    """Where and how to call one model."""

    model: str
    """A litellm model string, e.g. ``openai/gpt-4o-mini`` or ``anthropic/claude-sonnet-4-5``."""
    api_base: str | None = None
    api_key_env: str | None = None
    """Name of the environment variable holding the key; None: litellm's provider default for the provider's
    own endpoint, no key (:data:`NO_KEY`) for an ``api_base``."""
    temperature: float | None = None
    timeout: float = 120.0
    """Seconds per request."""
    max_tokens: int | None = None
    """The most tokens one reply may generate (``[agents.X]`` / ``[judge] max_tokens``): a model that loops
    holds a single-slot local server until this bound, not until the request times out."""
    context_window: int | None = None
    """The model's context in tokens (``[agents.X]`` / ``[judge] context_window``); None: litellm's model info
    when it knows the model, else no fitting."""
    seed: int | None = None
    """Sent as the request's ``seed`` (the panel gives each seat its own, so sampled seats differ on purpose)."""


def effective_max_tokens(settings: ModelSettings, asked: int | None) -> int | None:
    """The bound sent: the call's own (``asked``) and the configured one, the smaller when both are set."""
    bounds = [b for b in (asked, settings.max_tokens) if b is not None]
    return min(bounds) if bounds else None


class LLMError(Exception):
    """A call that failed for good. ``kind`` is one of rate_limit, timeout, connection, server, auth,
    bad_request, other, or a request fault (repeated_error, runaway, context_overflow, bad_output:
    :data:`polpo.llm.failures.REQUEST_FAULTS`); ``message`` is already redacted."""

    def __init__(self, kind: str, message: str, *, attempts: int = 1) -> None:
        super().__init__(message)
        self.kind = kind
        self.message = message
        self.attempts = attempts


_RETRYABLE = {"rate_limit", "timeout", "connection", "server"}
#: Error kinds that mean the provider could not serve the call (not that the request or the work was wrong):
#: the judge is down, or the agent's own model is. ``auth`` is among them but waiting does not fix it.
OUTAGE_KINDS = frozenset({*_RETRYABLE, "auth"})


class ChatClient(Protocol):
    """What callers of a model need: :class:`LLMClient`, or a wrapper of it (the judge-call cache)."""

    async def chat(self, settings: ModelSettings, messages: Sequence[dict[str, Any]], *,
                   tools: list[dict[str, Any]] | None = None, tool_choice: str | dict[str, Any] | None = None,
                   response_format: dict[str, Any] | None = None, max_tokens: int | None = None,
                   logprobs: int | None = None) -> ChatReply: ...


class LLMClient:
    """Shared by every LLM caller of one daemon (agents and reviewers)."""

    def __init__(
        self,
        *,
        per_model: int = 4,
        max_retries: int = 3,
        backoff: float = 1.0,
        max_backoff: float = 30.0,
        sleep: Callable[[float], Awaitable[None]] = anyio.sleep,
        limiter: RateLimiter | None = None,
        prices: PriceBook | None = None,
    ) -> None:
        self.per_model = per_model
        self.max_retries = max_retries
        self.backoff = backoff
        self.max_backoff = max_backoff
        self._sleep = sleep
        self._limits: dict[str, anyio.Semaphore] = {}
        self.limiter = limiter
        self._prices = prices
        self._windows: dict[str, int | None] = {}  # model → litellm's context window for it (None: unknown)
        self._answered: dict[str, float] = {}  # server (api_base, else model) → when it last answered a call
        self._pace: dict[str, float] = {}  # server → seconds per generated token of its last answered call
        self._failures: dict[str, str] = {}  # request fingerprint → signature of its last server error
        self.calls = 0  # requests sent, retries included (for metrics and tests)
        self._no_logprobs: set[tuple[str | None, str]] = set()  # (server, model) that refused log-probabilities

    def _limit(self, model: str) -> anyio.Semaphore:
        sem = self._limits.get(model)
        if sem is None:
            sem = self._limits[model] = anyio.Semaphore(self.per_model)
        return sem

    async def chat(
        self,
        settings: ModelSettings,
        messages: Sequence[dict[str, Any]],
        *,
        tools: list[dict[str, Any]] | None = None,
        tool_choice: str | dict[str, Any] | None = None,
        response_format: dict[str, Any] | None = None,
        max_tokens: int | None = None,
        logprobs: int | None = None,
    ) -> ChatReply:
        """One completion, retried on transient errors; raises :class:`LLMError` when it fails for good.

        ``logprobs``: ask for each generated token's log-probability and that many alternatives; a server that
        refuses them is asked again without, and not asked again for them (the reply's ``logprobs`` is None)."""
        if logprobs and (settings.api_base, settings.model) not in self._no_logprobs:
            try:
                return await self._chat(settings, messages, tools, tool_choice, response_format, max_tokens,
                                        logprobs)
            except LLMError as exc:
                if exc.kind != "bad_request" or not refuses_logprobs(exc.message):
                    raise
                self._no_logprobs.add((settings.api_base, settings.model))
        return await self._chat(settings, messages, tools, tool_choice, response_format, max_tokens, None)

    async def _chat(self, settings: ModelSettings, messages: Sequence[dict[str, Any]],
                    tools: list[dict[str, Any]] | None, tool_choice: str | dict[str, Any] | None,
                    response_format: dict[str, Any] | None, max_tokens: int | None, logprobs: int | None,
                    ) -> ChatReply:
        litellm = await load_litellm()
        kwargs: dict[str, Any] = {"model": settings.model, "messages": list(messages),
                                  "timeout": settings.timeout, "num_retries": 0}
        if settings.api_base:
            kwargs["api_base"] = settings.api_base
        if settings.api_key_env:
            key = os.environ.get(settings.api_key_env)
            if not key:
                raise LLMError("auth", f"environment variable {settings.api_key_env} is not set "
                                       f"(model {settings.model} needs its API key there)")
            kwargs["api_key"] = key
        elif settings.api_base:
            kwargs["api_key"] = NO_KEY  # never litellm's fallback to the provider's variable: see the module doc
        if settings.temperature is not None:
            kwargs["temperature"] = settings.temperature
        if settings.seed is not None:
            kwargs["seed"] = settings.seed
        if logprobs:
            kwargs["logprobs"] = True
            kwargs["top_logprobs"] = logprobs
        if tools:
            kwargs["tools"] = tools
            if tool_choice is not None:
                kwargs["tool_choice"] = tool_choice
        if response_format is not None:
            kwargs["response_format"] = response_format
        bound = effective_max_tokens(settings, max_tokens)
        if bound is not None:
            kwargs["max_tokens"] = bound
        window = settings.context_window or self._window(litellm, settings.model)
        if window:  # the answer gets max_tokens, or what is left when that is more than half the window
            try:
                kwargs["messages"], used = fit_messages(kwargs["messages"], tools, window,
                                                        min(bound or window // 4, window // 2))
                if bound is not None:
                    kwargs["max_tokens"] = min(bound, window - used)
            except ContextOverflow as exc:
                raise LLMError("context_overflow", f"not sent: the request to {settings.model} {exc}; set "
                                                   "context_window to the model's real size if it is larger, lower "
                                                   "max_tokens, or use a model with a larger context") from None
        meter = CURRENT_METER.get()
        if meter is None:
            return await self._send(litellm, settings, kwargs, bound)
        try:  # the turn's budgets: a call that cannot fit is never sent (polpo.llm.spend)
            ticket = await meter.admit(settings.model, lambda: (estimate_tokens(kwargs["messages"], tools),
                                                                kwargs.get("max_tokens") or DEFAULT_MAX_OUTPUT))
        except BudgetRefused as e:
            raise LLMError("budget", str(e)) from None
        reply: ChatReply | None = None
        try:
            reply = await self._send(litellm, settings, kwargs, bound)
            return reply
        finally:  # a failed call reports no usage: its reservation goes, nothing is counted
            meter.record(ticket, settings.model, *((reply.prompt_tokens, reply.completion_tokens, reply.cost)
                                                   if reply is not None else (0, 0, 0.0)))

    async def _send(self, litellm: Any, settings: ModelSettings, kwargs: dict[str, Any], bound: int | None,
                    ) -> ChatReply:
        """The request as fitted, sent with the limits, the blame and the retries."""
        server = settings.api_base or settings.model
        errors: list[str] = []
        attempt = 0
        limiter = self.limiter
        key = limiter.key(settings.model, settings.api_base) if limiter is not None else None
        while True:
            attempt += 1
            start = sent = time.monotonic()
            try:
                if key is not None and limiter is not None:
                    await limiter.acquire(key, _estimate(kwargs, bound))
                async with self._limit(settings.model):
                    self.calls += 1
                    sent = time.monotonic()
                    with anyio.fail_after(settings.timeout):  # litellm's timeout bounds each read, not the call
                        resp = await litellm.acompletion(**kwargs)
            except Exception as exc:
                kind = classify(exc)
                text = str(exc) or f"no complete answer within {settings.timeout:g} s"
                message = redact(f"{type(exc).__name__}: {text}")[:2000]
                kind = self._blame(kind, exc, message, kwargs, sent, self._answered.get(server),
                                   settings.temperature, kwargs.get("max_tokens"), self._pace.get(server))
                if kind not in _RETRYABLE or attempt > self.max_retries:
                    suffix = f" (after {attempt} attempts)" if attempt > 1 else ""
                    if kind == "auth" and kwargs.get("api_key") == NO_KEY:
                        suffix += (f" (no key was sent to {settings.api_base}: set api_key_env to the variable "
                                   "holding its key)")
                    if kind in failures.REQUEST_FAULTS:
                        suffix += f": {failures.request_fault_hint(kind)}"
                    raise LLMError(kind, message + suffix, attempts=attempt) from None
                errors.append(message)
                retry_after = _retry_after(exc)
                if key is not None and limiter is not None and kind == "rate_limit":
                    limiter.hold(key, min(retry_after or 0.0, self.max_backoff))  # the limiter paces the rest
                    retry_after = None
                await self._sleep(self._delay(attempt, retry_after))
                continue
            self._answered[server] = answered = time.monotonic()
            reply = parse_reply(resp, settings.model, answered - start, attempt - 1, errors,
                                self._prices or default_book())
            self._pace[server] = failures.pace(answered - sent, reply.completion_tokens)
            return reply

    def _window(self, litellm: Any, model: str) -> int | None:
        """litellm's input context of ``model``, looked up once (None when litellm does not know the model)."""
        if model not in self._windows:
            try:
                info = litellm.get_model_info(model)
                size = info.get("max_input_tokens")  # not max_tokens: for some models that is the output bound
                self._windows[model] = int(size) if size else None
            except Exception:
                self._windows[model] = None
        return self._windows[model]

    def _blame(self, kind: str, exc: BaseException, message: str, request: dict[str, Any], sent: float,
               answered: float | None, temperature: float | None, max_tokens: int | None = None,
               pace: float | None = None) -> str:
        """``kind``, or the request fault the evidence shows (see :mod:`polpo.llm.failures`)."""
        if failures.is_context_overflow(kind, message):
            return "context_overflow"
        if failures.is_bad_output(kind, message, temperature):
            return "bad_output"
        if failures.is_runaway(kind, sent, answered, in_flight=time.monotonic() - sent, max_tokens=max_tokens,
                               seconds_per_token=pace):
            return "runaway"
        status = getattr(exc, "status_code", None)
        signature = failures.failure_signature(kind, status if isinstance(status, int) else None, message)
        if signature is None:
            return kind
        fingerprint = failures.request_fingerprint(request)
        if self._failures.get(fingerprint) == signature:
            return "repeated_error"
        if len(self._failures) >= 1024:
            self._failures.clear()
        self._failures[fingerprint] = signature
        return kind

    def _delay(self, attempt: int, retry_after: float | None) -> float:
        """Full jitter over the capped exponential delay, never before the provider's ``Retry-After``."""
        wait = jittered(attempt, self.backoff, self.max_backoff)
        return max(wait, min(retry_after, self.max_backoff)) if retry_after is not None else wait


def _estimate(kwargs: dict[str, Any], bound: int | None) -> int:
    """Tokens a call may use, for a tokens-per-minute limit: the prompt at ~4 characters a token, plus the reply's
    bound (or as much again as the prompt when unbounded)."""
    prompt = len(json.dumps(kwargs["messages"], default=str)) // 4
    return prompt + (bound if bound is not None else prompt)


def _retry_after(exc: BaseException) -> float | None:
    response = getattr(exc, "response", None)
    headers = getattr(response, "headers", None)
    if headers is None:
        return None
    try:
        value = headers.get("retry-after")
        return float(value) if value is not None else None
    except (TypeError, ValueError):
        return None
