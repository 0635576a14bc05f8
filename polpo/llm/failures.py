"""Outage or the request's own fault? Decided by evidence, not by the HTTP status alone. Pure functions.

A provider failure used to be an outage whenever its kind was retryable (5xx, timeouts), and an outage is waited
out with doubling backoff (``agent:interrupted``, ``assessment:deferred``). Three kinds of failure look like
outages but are caused by the request, and waiting only repeats them:

* **A repeated error** (``repeated_error``): the same request answered twice with the same status and body — a
  chat template that cannot render the conversation answers a 500 every time. Gateway statuses (502, 503, 504,
  529) are left out: they say the server is unavailable, and an unavailable server answers the same each time.
* **Runaway generation** (``runaway``): the request timed out while the same server answered other requests, so
  the server is up and it is this generation that does not end — unless, at the speed the server has shown,
  even a whole reply of ``max_tokens`` would still be generating (:func:`outran`): then the server is slow (a
  loaded machine, slots shared with other requests), and waiting may help. Measured on Qwen2.5-Coder-1.5B on
  two shared cores, a review that ran out of its 900 s at 0.9 tokens a second was called runaway and lost.
* **Output the server could not parse** (``bad_output``), at temperature 0: llama.cpp's server answers HTTP 500
  when the model's reply does not match the tool-call format its template expects ("does not match the expected
  … format") or a history's tool-call arguments are not JSON ("Failed to parse tool call arguments"). A model
  sampled at temperature 0 writes the same reply to the same request, so sending it again only repeats the
  generation; sampled above 0 it may not, and the usual retries apply.
* **Context overflow** (``context_overflow``): an HTTP 400 (some servers: 500) saying the prompt does not fit the
  model's context; the same request can never fit, so it is never sent again unchanged.

The coarse kind the evidence starts from is :func:`classify`'s (by the exception's class names: no import).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from typing import Any

__all__ = ["GATEWAY_STATUSES", "REQUEST_FAULTS", "classify", "failure_signature", "is_bad_output", "is_context_overflow",
           "is_runaway", "outran", "pace", "request_fault_hint", "request_fingerprint", "says_unparsed"]

#: Error kinds that blame the request: never an outage, never retried unchanged.
REQUEST_FAULTS = frozenset({"repeated_error", "runaway", "context_overflow", "bad_output"})
#: Statuses that mean "unavailable": identical each time during a real outage, so repeating proves nothing.
GATEWAY_STATUSES = frozenset({502, 503, 504, 529})

#: What the servers say when the prompt does not fit (lower case): OpenAI, llama.cpp's server, vLLM,
#: llama-cpp-python, Ollama, Anthropic, litellm's own mapping.
_OVERFLOW_MARKERS = (
    "context_length_exceeded",  # OpenAI's error code
    "exceeds the available context size",  # llama.cpp server
    "maximum context length",  # vLLM, OpenAI's message
    "exceed context window",  # llama-cpp-python: "Requested tokens (N) exceed context window of M"
    "exceeds the context length", "context length exceeded", "input length exceeds",  # Ollama
    "prompt is too long",  # Anthropic
    "contextwindowexceedederror",  # litellm's class, when it mapped the error itself
)


def classify(exc: BaseException) -> str:
    """Map a litellm (or httpx/openai) exception to a coarse kind, by class name so no import is needed."""
    names = {c.__name__ for c in type(exc).__mro__}
    text = str(exc).lower()
    if "missing credentials" in text or "api_key client option must be set" in text:
        return "auth"  # litellm reports a missing key as a 500; retrying cannot help
    if "RateLimitError" in names:
        return "rate_limit"
    if "Timeout" in names or "APITimeoutError" in names or isinstance(exc, TimeoutError):
        return "timeout"
    if "AuthenticationError" in names or "PermissionDeniedError" in names:
        return "auth"
    if names & {"BadRequestError", "ContextWindowExceededError", "NotFoundError",
                "UnprocessableEntityError", "UnsupportedParamsError", "ContentPolicyViolationError"}:
        return "bad_request"
    if names & {"InternalServerError", "ServiceUnavailableError", "BadGatewayError"}:
        # litellm reports a refused connection (a dead port) as a 500 "Connection error."
        return "connection" if "connection error" in text or "connection refused" in text else "server"
    if "APIConnectionError" in names or isinstance(exc, ConnectionError):
        return "connection"
    status = getattr(exc, "status_code", None)
    if isinstance(status, int):
        if status == 429:
            return "rate_limit"
        if status >= 500:
            return "server"
        if status in (401, 403):
            return "auth"
        if 400 <= status < 500:
            return "bad_request"
    return "other"


#: What llama.cpp's server says when it cannot parse the model's output or the tool calls sent to it (lower case).
_UNPARSED_MARKERS = (
    "does not match the expected",  # "The model produced output that does not match the expected peg-native format"
    "failed to parse tool call",  # "Failed to parse tool call arguments as JSON"
    "failed to parse input",
)


def is_bad_output(kind: str, text: str, temperature: float | None) -> bool:
    """Whether a server error says the model's output (or a replayed tool call) did not parse, for a request
    sampled at temperature 0: the same request would get the same output again."""
    return kind == "server" and temperature == 0 and says_unparsed(text)


def says_unparsed(text: str) -> bool:
    """Whether a server's error says it could not parse the model's output (or a replayed tool call)."""
    low = text.lower()
    return any(m in low for m in _UNPARSED_MARKERS)


def is_context_overflow(kind: str, text: str) -> bool:
    """Whether a refused (``bad_request``) or failed (``server``) call says the prompt exceeds the context."""
    if kind not in ("bad_request", "server", "other"):
        return False
    low = text.lower()
    return any(m in low for m in _OVERFLOW_MARKERS)


def failure_signature(kind: str, status: int | None, message: str) -> str | None:
    """What must be identical for two failures to be "the same error": status and body. None when a repeat of
    this failure proves nothing (not a server error, no status, or a gateway status)."""
    if kind != "server" or status is None or status in GATEWAY_STATUSES:
        return None
    return f"{status}\n{message}"


def is_runaway(kind: str, sent_at: float, answered_at: float | None, *, in_flight: float = 0.0,
               max_tokens: int | None = None, seconds_per_token: float | None = None) -> bool:
    """A timeout is runaway generation when the same server completed another request after this one was sent,
    and the request had run longer than a whole reply takes at the server's speed (:func:`outran`)."""
    return (kind == "timeout" and answered_at is not None and answered_at > sent_at
            and outran(in_flight, max_tokens, seconds_per_token))


def pace(seconds: float, completion_tokens: int) -> float:
    """Seconds per generated token of an answered call (its prompt's reading included): what :func:`outran`
    weighs a call in flight against."""
    return seconds / max(1, completion_tokens)


def outran(in_flight: float, max_tokens: int | None, seconds_per_token: float | None) -> bool:
    """Has a call been generating (``in_flight`` seconds) longer than a reply of ``max_tokens`` takes at
    ``seconds_per_token`` (what the server's answered calls took, prompt included, per token generated)? With no
    bound or no speed known there is nothing to weigh, and the server's other answers decide alone (True)."""
    if max_tokens is None or seconds_per_token is None:
        return True
    return in_flight > max_tokens * seconds_per_token


def request_fingerprint(request: Mapping[str, Any]) -> str:
    """A digest of what was asked (model, endpoint, messages, tools…), to recognise the same request again.
    Computed only when a call fails, so a successful call never pays for it."""
    keys = ("model", "api_base", "messages", "tools", "tool_choice", "response_format", "max_tokens")
    body = json.dumps({k: request.get(k) for k in keys}, sort_keys=True, default=str)
    return hashlib.sha256(body.encode("utf-8", "surrogatepass")).hexdigest()


def request_fault_hint(kind: str) -> str:
    """What the user reads after the error: why it is not an outage, and what to do."""
    if kind == "repeated_error":
        return ("the server answered this same request twice with the same error, so the request (for example "
                "a chat template that cannot render it) is at fault, not an outage: waiting would not change it")
    if kind == "runaway":
        return ("the server answered other requests meanwhile, so it is up and this generation did not end "
                "(runaway output): set a lower max_tokens, or use a model that follows instructions better")
    if kind == "bad_output":
        return ("the server could not parse the model's output (or a tool call sent back to it), and at "
                "temperature 0 the model answers the same request the same way, so it is not sent again")
    if kind == "context_overflow":
        return ("the request does not fit the model's context window; it is not sent again unchanged: set "
                "context_window to the model's size so polpo trims what it sends, or use a model with a larger "
                "context")
    return ""
