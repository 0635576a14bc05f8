"""Lenient, safe reading of the JSON a model wrote: its common slips are *normalised*, nothing is ever *completed*.

Small models write almost-JSON: a raw newline inside a string, ``//`` and ``/* */`` comments, single quotes,
trailing commas, the whole object HTML-escaped (``{&#34;path&#34;: …}``), a fenced ```json block. Each reader
here tries the text as strict JSON first, so valid JSON always parses exactly as :func:`json.loads` would; only
when that fails is the text normalised and tried again.

Normalising rewrites, outside strings: comments (dropped) and a comma before ``}``/``]`` (dropped); inside
strings: raw control characters (escaped) and single-quoted strings (re-quoted). When that is not enough and
the text holds HTML entities, they are unescaped and the text is tried again (strict, then normalised).

What it never does is guess: a cut-off value (``{"content": "def f(``), an unclosed bracket or a bare word
stays an error. ``json-repair`` (MIT, well kept) was tried and does all of the above, but it also completes
truncated output and turns bare words into strings, so a model's cut-off ``write_file`` would write a truncated
file and a broken review would parse; a refusal that the model can correct is the safer answer.
"""

from __future__ import annotations

import html
import json
import re
from collections.abc import Iterator
from typing import Any

__all__ = ["decode_value", "loads", "normalise"]

_ENTITY = re.compile(r"&(#[0-9]+|#[xX][0-9a-fA-F]+|quot|apos|amp|lt|gt);")
_FENCE = re.compile(r"^\s*```[a-zA-Z0-9_-]*[ \t]*\n(.*?)\n?```\s*$", re.DOTALL)
_DECODER = json.JSONDecoder()
_CONTROL = {"\n": "\\n", "\r": "\\r", "\t": "\\t", "\b": "\\b", "\f": "\\f"}


def normalise(text: str) -> str:
    """``text`` with comments and trailing commas dropped, single quotes and raw control characters in strings
    fixed. Everything else is copied as is, so the result is valid JSON only if those were the only slips."""
    out: list[str] = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if c in "\"'":
            i = _string(text, i, out)
        elif text.startswith("//", i):
            end = text.find("\n", i)
            i = n if end == -1 else end
        elif text.startswith("/*", i):
            end = text.find("*/", i + 2)
            if end == -1:  # an unclosed comment: left as is, the parse fails as it should
                out.append(text[i:])
                break
            i = end + 2
        elif c in "}]":
            _drop_trailing_comma(out)
            out.append(c)
            i += 1
        else:
            out.append(c)
            i += 1
    return "".join(out)


def _string(text: str, i: int, out: list[str]) -> int:
    """Copy the string starting at ``text[i]`` (either quote) as a double-quoted JSON string; return the index
    after it. An unterminated string is copied to the end (still unterminated: the parse fails)."""
    quote = text[i]
    out.append('"')
    i += 1
    n = len(text)
    while i < n:
        c = text[i]
        if c == "\\" and i + 1 < n:
            nxt = text[i + 1]
            out.append(nxt if quote == "'" and nxt == "'" else c + nxt)  # \' means ' in a single-quoted string
            i += 2
            continue
        if c == quote:
            out.append('"')
            return i + 1
        if c == '"':  # only inside a single-quoted string
            out.append('\\"')
        elif c < " ":
            out.append(_CONTROL.get(c, f"\\u{ord(c):04x}"))
        else:
            out.append(c)
        i += 1
    return n


def _drop_trailing_comma(out: list[str]) -> None:
    j = len(out) - 1
    while j >= 0 and out[j].isspace():
        j -= 1
    if j >= 0 and out[j] == ",":
        del out[j]


def _variants(text: str) -> Iterator[str]:
    """The readings to try after the strict one failed: a fenced block's body first, then the text; each as
    is, normalised, and (when it holds HTML entities) unescaped."""
    fenced = _FENCE.match(text)
    for base in ([fenced.group(1)] if fenced else []) + [text]:
        yield base
        yield normalise(base)
        if _ENTITY.search(base):
            unescaped = html.unescape(base)
            yield unescaped
            yield normalise(unescaped)


def loads(text: str) -> Any:
    """The JSON value ``text`` holds (the whole text, as :func:`json.loads`), leniently; ``ValueError`` (the
    strict parser's own message) when no reading works."""
    try:
        return json.loads(text)
    except ValueError as exc:
        first = exc
    for variant in _variants(text):
        try:
            return json.loads(variant)
        except ValueError:
            continue
    raise first


def decode_value(text: str, start: int) -> Any:
    """The first JSON value starting at ``text[start]`` (prose may follow it), leniently; ``ValueError`` if none.

    Like :meth:`json.JSONDecoder.raw_decode`: strict first, then the normalised and unescaped readings.
    """
    try:
        return _DECODER.raw_decode(text, start)[0]
    except ValueError as exc:
        first = exc
    tail = text[start:]
    readings = [normalise(tail)]
    if _ENTITY.search(tail):
        unescaped = html.unescape(tail)
        readings += [unescaped, normalise(unescaped)]
    for reading in readings:
        try:
            return _DECODER.raw_decode(reading, 0)[0]
        except ValueError:
            continue
    raise first
