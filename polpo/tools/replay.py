"""An assistant message made safe to send back to the provider: every tool call's arguments strict JSON.

Both the LLM agent's loop and a reviewer's repair turn append the model's own tool-call message to the
conversation before asking again. A model's malformed arguments sent back break the next request, whoever sends
it: llama.cpp's server answers HTTP 500 "Failed to parse tool call arguments as JSON", Ollama 400 "invalid tool
call arguments", and some litellm adapters (Anthropic, Gemini…) parse them while building the request.
"""

from __future__ import annotations

import json
from typing import Any

from polpo.tools.output import ToolError
from polpo.tools.registry import decode_arguments

__all__ = ["replayable"]


def replayable(message: dict[str, Any]) -> dict[str, Any]:
    """``message`` with malformed tool arguments replaced by ``{}`` and leniently read ones re-encoded as strict
    JSON (changed in place, and returned). The model learns what was wrong from the answer to its call (an
    ``Error:`` tool result, a rejected submission); the trace and transcript keep the arguments as written."""
    for call in message.get("tool_calls") or []:
        fn = call["function"]
        try:
            parsed = decode_arguments(fn["name"], fn["arguments"])
        except ToolError:
            fn["arguments"] = "{}"
            continue
        if not _strict_object(fn["arguments"]):  # empty, null, encoded twice, or read leniently
            fn["arguments"] = json.dumps(parsed)
    return message


def _strict_object(text: str) -> bool:
    try:
        return isinstance(json.loads(text), dict)
    except ValueError:
        return False
