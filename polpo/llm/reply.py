"""A provider's answer as polpo's callers see it (:class:`ChatReply`), read from litellm's response object."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from polpo.llm.logprobs import TokenLogprob, from_response
from polpo.llm.prices import PriceBook

__all__ = ["ChatReply", "ToolCallOut", "parse_reply"]


@dataclass(frozen=True)
class ToolCallOut:
    id: str
    name: str
    arguments: str
    """Raw JSON text as the model produced it (it may be malformed: the caller decides)."""


@dataclass(frozen=True)
class ChatReply:
    content: str | None
    tool_calls: list[ToolCallOut]
    finish_reason: str | None
    model: str
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost: float | None = None
    duration: float = 0.0
    retries: int = 0
    retry_errors: list[str] = field(default_factory=list)
    cached: bool | None = None
    """Through the judge-call cache (``[judge] cache``): True a hit, False a miss; None when no cache was asked."""
    logprobs: list[TokenLogprob] | None = None
    """The generated tokens with their log-probabilities, when they were asked for and the provider gave them."""

    def as_message(self) -> dict[str, Any]:
        """The assistant message to append to the conversation.

        Its content is ``""`` when the model wrote none (a tool-call turn): llama-cpp-python's server refuses
        ``"content": null`` (422) and a missing key (500), and Ollama refuses null content without tool calls.
        """
        msg: dict[str, Any] = {"role": "assistant", "content": self.content or ""}
        if self.tool_calls:
            msg["tool_calls"] = [
                {"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}}
                for c in self.tool_calls
            ]
        return msg


def parse_reply(resp: Any, model: str, duration: float, retries: int, errors: list[str], prices: PriceBook) -> ChatReply:
    choice = resp.choices[0]
    msg = choice.message
    calls: list[ToolCallOut] = []
    for i, tc in enumerate(getattr(msg, "tool_calls", None) or []):
        fn = tc.function
        args = fn.arguments
        if not isinstance(args, str):
            args = json.dumps(args)
        calls.append(ToolCallOut(id=tc.id or f"call_{i}", name=fn.name or "", arguments=args or ""))
    usage = getattr(resp, "usage", None)
    prompt_tokens = int(getattr(usage, "prompt_tokens", 0) or 0)
    completion_tokens = int(getattr(usage, "completion_tokens", 0) or 0)
    return ChatReply(content=msg.content, tool_calls=calls, finish_reason=choice.finish_reason, model=model,
                     prompt_tokens=prompt_tokens, completion_tokens=completion_tokens,
                     cost=prices.price(model, prompt_tokens, completion_tokens),
                     duration=duration, retries=retries, retry_errors=errors,
                     logprobs=from_response(getattr(choice, "logprobs", None)))
