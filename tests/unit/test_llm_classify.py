"""Which provider errors are retried: by exception class name, status code, and litellm's missing-key 500."""

from __future__ import annotations

import pytest

from polpo.llm.client import classify


def _exc(name: str, message: str = "boom", status: int | None = None) -> Exception:
    cls = type(name, (Exception,), {})
    e = cls(message)
    if status is not None:
        e.status_code = status  # type: ignore[attr-defined]
    return e


@pytest.mark.parametrize(("exc", "kind"), [
    (_exc("RateLimitError"), "rate_limit"),
    (_exc("Timeout"), "timeout"),
    (_exc("AuthenticationError"), "auth"),
    (_exc("BadRequestError"), "bad_request"),
    (_exc("ContextWindowExceededError"), "bad_request"),
    (_exc("InternalServerError"), "server"),
    (_exc("APIConnectionError"), "connection"),
    (_exc("InternalServerError", "OpenAIException - Connection error."), "connection"),  # litellm, dead port
    (_exc("SomethingElse", status=429), "rate_limit"),
    (_exc("SomethingElse", status=503), "server"),
    (_exc("SomethingElse", status=404), "bad_request"),
    (_exc("SomethingElse"), "other"),
    (_exc("InternalServerError", "OpenAIException - Missing credentials. Please pass an `api_key`"), "auth"),
])
def test_classify(exc: Exception, kind: str) -> None:
    assert classify(exc) == kind
