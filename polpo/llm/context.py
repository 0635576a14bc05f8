"""Fitting a request to the model's context window before it is sent. Pure functions.

A small local model has a few thousand tokens of context; a file read by a tool, a long task description or a
review timeline can be larger than that, and the server answers HTTP 400. So every request is estimated, and when
it does not fit the window (less the tokens reserved for the answer) the largest message texts are trimmed first
— all the texts longer than one cut-off are cut to it, head and tail kept, with a visible marker in the middle —
until it fits. What cannot be trimmed (tool definitions, tool-call arguments, message overhead) is counted as is;
when the rest cannot be made small enough the request is not sent (:class:`ContextOverflow`).

Tokens are estimated conservatively without a tokenizer (a tokenizer costs milliseconds per call): three
characters per token for ASCII text (real tokenizers give about four), two UTF-8 bytes per token otherwise (a
CJK character, three bytes, counts 1.5 tokens).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

__all__ = ["MARKER", "ContextOverflow", "estimate_tokens", "fit_messages", "text_tokens", "tools_tokens"]

CHARS_PER_TOKEN = 3
MESSAGE_OVERHEAD = 8
"""Tokens a message costs beyond its text (role, template separators)."""
MIN_KEEP_TOKENS = 64
"""A trimmed text keeps at least this much; below it the request is refused rather than sent meaningless."""
MARKER = "\n[... {n} characters trimmed to fit the model's context ...]\n"
"""ASCII on purpose: an ASCII text stays ASCII once trimmed, and so is still counted at three characters a token."""
_MARKER_CHARS = len(MARKER) + 12  # with the count filled in
_tools_cache: dict[int, tuple[object, int]] = {}
_bytes_cache: dict[int, tuple[str, int]] = {}  # long non-ASCII texts: a conversation resends the same ones
_BYTES_CACHE_CHARS = 4_000_000
_bytes_cached = [0]  # characters held by _bytes_cache


class ContextOverflow(Exception):
    """The request cannot fit even after trimming."""

    def __init__(self, needed: int, fixed: int, window: int, reserve: int) -> None:
        super().__init__(f"needs about {needed} tokens of input ({fixed} of them in tool definitions, tool-call "
                         f"arguments and message overhead, which cannot be trimmed) and {reserve} for the answer, "
                         f"but the context window is {window} tokens")
        self.needed, self.fixed, self.window, self.reserve = needed, fixed, window, reserve


def text_tokens(text: str) -> int:
    """A conservative token count of ``text``."""
    if text.isascii():
        return -(-len(text) // CHARS_PER_TOKEN)
    if len(text) < 2048:
        return -(-len(text.encode("utf-8", "surrogatepass")) // 2)
    hit = _bytes_cache.get(id(text))  # encoding 20 000 characters costs ~40 µs; the next turn sends them again
    if hit is not None and hit[0] is text:
        return hit[1]
    n = -(-len(text.encode("utf-8", "surrogatepass")) // 2)
    if _bytes_cached[0] + len(text) > _BYTES_CACHE_CHARS:
        _bytes_cache.clear()
        _bytes_cached[0] = 0
    _bytes_cache[id(text)] = (text, n)
    _bytes_cached[0] += len(text)
    return n


def tools_tokens(tools: Sequence[Mapping[str, Any]] | None) -> int:
    """The tool definitions' tokens; a list is measured once (callers reuse the same list call after call)."""
    if not tools:
        return 0
    hit = _tools_cache.get(id(tools))
    if hit is not None and hit[0] is tools:
        return hit[1]
    n = text_tokens(json.dumps(tools))
    if len(_tools_cache) > 256:
        _tools_cache.clear()
    _tools_cache[id(tools)] = (tools, n)
    return n


def _fixed_tokens(msg: Mapping[str, Any]) -> int:
    """The part of a message that is not its (trimmable) text content."""
    n = MESSAGE_OVERHEAD
    content = msg.get("content")
    if content is not None and not isinstance(content, str):
        n += text_tokens(json.dumps(content, default=str))  # multi-part content: counted, never trimmed
    for call in msg.get("tool_calls") or ():
        fn = call.get("function") or {}
        n += MESSAGE_OVERHEAD + text_tokens(str(fn.get("name") or "")) + text_tokens(str(fn.get("arguments") or ""))
    return n


def estimate_tokens(messages: Sequence[Mapping[str, Any]], tools: Sequence[Mapping[str, Any]] | None = None) -> int:
    """The request's input tokens, over-estimated."""
    total = tools_tokens(tools)
    for m in messages:
        content = m.get("content")
        total += _fixed_tokens(m) + (text_tokens(content) if isinstance(content, str) else 0)
    return total


def _cap(sizes: list[int], room: int) -> int:
    """The largest cut-off ``c`` with ``sum(min(s, c)) <= room`` (water-filling: the largest are cut first)."""
    ordered = sorted(sizes)
    spent = 0
    for k, size in enumerate(ordered):
        left = len(ordered) - k
        if spent + size * left > room:
            return (room - spent) // left
        spent += size
    return ordered[-1] if ordered else 0


def _cut(text: str, keep: int) -> str:
    head = keep * 2 // 3
    tail = keep - head
    cut = len(text) - keep
    return text[:head] + MARKER.format(n=f"{cut:,}".replace(",", " ")) + (text[-tail:] if tail else "")


def _trim(text: str, tokens: int) -> str:
    """``text`` cut to at most ``tokens`` (marker included): two thirds from its head, one third from its tail."""
    per = CHARS_PER_TOKEN if text.isascii() else 2 * len(text) / max(1, len(text.encode("utf-8", "surrogatepass")))
    keep = max(0, int((tokens - 1) * per) - _MARKER_CHARS)
    out = _cut(text, keep)
    for _ in range(8):  # non-ASCII: the kept part may hold more multi-byte characters than the average
        over = text_tokens(out) - tokens
        if over <= 0 or keep == 0:
            break
        keep = max(0, keep - int(over * per) - 8)
        out = _cut(text, keep)
    return out


def fit_messages(messages: list[dict[str, Any]], tools: Sequence[Mapping[str, Any]] | None, window: int,
                 reserve: int) -> tuple[list[dict[str, Any]], int]:
    """``messages`` as they fit ``window - reserve`` tokens, and their estimate: the same list when they already
    fit, else a copy with the largest texts trimmed. Raises :class:`ContextOverflow` when trimming cannot make
    them fit."""
    budget = window - reserve
    needed = estimate_tokens(messages, tools)
    if needed <= budget:
        return messages, needed
    sizes = [text_tokens(m["content"]) if isinstance(m.get("content"), str) else 0 for m in messages]
    fixed = needed - sum(sizes)
    cap = _cap(sizes, budget - fixed)
    if cap < MIN_KEEP_TOKENS:
        raise ContextOverflow(needed, fixed, window, reserve)
    out: list[dict[str, Any]] = []
    for m, size in zip(messages, sizes, strict=True):
        out.append(dict(m, content=_trim(m["content"], cap)) if size > cap else m)
    return out, fixed + sum(min(size, cap) for size in sizes)
