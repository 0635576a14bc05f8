"""Outage or the request's fault: the pure decisions of polpo.llm.failures."""

from __future__ import annotations

import pytest

from polpo.llm.failures import (
    REQUEST_FAULTS,
    failure_signature,
    is_context_overflow,
    is_runaway,
    outran,
    request_fault_hint,
    request_fingerprint,
)


@pytest.mark.parametrize("message", [
    "OpenAIException - This model's maximum context length is 8192 tokens. However, your messages resulted in 9500",
    '{"error": {"code": "context_length_exceeded"}}',  # OpenAI
    "the request exceeds the available context size, try increasing it",  # llama.cpp server
    "Requested tokens (3000) exceed context window of 2048",  # llama-cpp-python
    "the input length exceeds the context length",  # Ollama
    "prompt is too long: 210000 tokens > 200000 maximum",  # Anthropic
    "ContextWindowExceededError: litellm.BadRequestError: something",  # litellm's own mapping
])
def test_the_servers_context_overflow_messages_are_recognised(message: str) -> None:
    assert is_context_overflow("bad_request", message)


def test_other_refusals_and_outages_are_not_overflows() -> None:
    assert not is_context_overflow("bad_request", "invalid tool call arguments")
    assert not is_context_overflow("timeout", "maximum context length")  # a timeout says nothing about the prompt
    assert not is_context_overflow("auth", "prompt is too long")


def test_only_a_non_gateway_server_error_has_a_signature() -> None:
    assert failure_signature("server", 500, "template error") == "500\ntemplate error"
    assert failure_signature("server", 500, "a") != failure_signature("server", 500, "b")
    assert failure_signature("server", 500, "a") != failure_signature("server", 501, "a")
    for status in (502, 503, 504, 529):  # "unavailable" is the same every time during a real outage
        assert failure_signature("server", status, "overloaded") is None
    assert failure_signature("server", None, "no status") is None
    assert failure_signature("connection", 500, "refused") is None
    assert failure_signature("rate_limit", 429, "slow down") is None


def test_a_timeout_is_runaway_only_when_the_server_answered_another_request_meanwhile() -> None:
    assert is_runaway("timeout", sent_at=10.0, answered_at=12.0)
    assert not is_runaway("timeout", sent_at=10.0, answered_at=9.0)  # answered before: no evidence it is up now
    assert not is_runaway("timeout", sent_at=10.0, answered_at=None)
    assert not is_runaway("server", sent_at=10.0, answered_at=12.0)


def test_the_fingerprint_is_the_request_not_the_key() -> None:
    req = {"model": "m", "messages": [{"role": "user", "content": "hi"}], "api_key": "sk-1"}
    assert request_fingerprint(req) == request_fingerprint({**req, "api_key": "sk-2", "timeout": 5})
    assert request_fingerprint(req) != request_fingerprint({**req, "messages": [{"role": "user", "content": "ho"}]})
    assert request_fingerprint(req) != request_fingerprint({**req, "model": "n"})


def test_every_request_fault_tells_what_to_do() -> None:
    for kind in REQUEST_FAULTS:
        assert "not" in request_fault_hint(kind) or "lower" in request_fault_hint(kind)
    assert request_fault_hint("server") == ""


def test_a_timeout_is_runaway_only_if_it_outran_a_whole_reply_at_the_servers_speed() -> None:
    # 0.01 s a token: 512 tokens take 5.12 s; a call in flight for 600 s outran that, one for 3 s did not
    assert is_runaway("timeout", 10.0, 12.0, in_flight=600.0, max_tokens=512, seconds_per_token=0.01)
    assert not is_runaway("timeout", 10.0, 12.0, in_flight=3.0, max_tokens=512, seconds_per_token=0.01)
    # a loaded machine at 1.1 s a token (0.9 tokens a second): 600 s is not even a whole reply of 4096
    assert not is_runaway("timeout", 10.0, 12.0, in_flight=600.0, max_tokens=4096, seconds_per_token=1.1)
    assert outran(5.0, None, 0.01) and outran(5.0, 512, None)  # nothing to weigh: the other answers decide
    assert not is_runaway("timeout", 10.0, 9.0, in_flight=600.0, max_tokens=8, seconds_per_token=0.01)
