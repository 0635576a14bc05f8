"""Lenient extraction of a JSON value from model text (code fences, prose around it, a model's JSON slips).

Models asked for "JSON only" still wrap it in ```json fences or a sentence. We look for the first position where
a complete JSON object (or array) decodes, using :meth:`json.JSONDecoder.raw_decode`, so braces inside strings
and text after the value do not confuse it. Each position is read strictly first, then leniently
(:mod:`polpo.llm.lenient_json`: comments, single quotes, trailing commas, raw newlines in strings, HTML
entities), so valid JSON is never rewritten, and an outer object with a slip wins over a valid object nested in
it. Nothing is evaluated; the result is plain JSON data.
"""

from __future__ import annotations

import json
import re
from typing import Any, Literal

from polpo.llm.lenient_json import decode_value

__all__ = ["JSONNotFound", "complete_items", "extract_json", "json_number"]

_FENCE = re.compile(r"```[a-zA-Z0-9_-]*\s*\n?(.*?)```", re.DOTALL)
LENIENT_STARTS = 20
"""Positions the lenient pass tries (each costs a pass over the rest of the text)."""
_DECODER = json.JSONDecoder()


class JSONNotFound(ValueError):
    """No JSON value of the wanted kind could be decoded from the text."""


def _candidates(text: str) -> list[str]:
    """Fenced blocks first (the model's own framing of its answer), then the whole text."""
    return [m.group(1) for m in _FENCE.finditer(text)] + [text]


def _first_value(text: str, opener: str) -> Any:
    start = text.find(opener)
    tries = 0
    while start != -1:
        tries += 1
        try:
            return decode_value(text, start) if tries <= LENIENT_STARTS else _DECODER.raw_decode(text, start)[0]
        except (ValueError, RecursionError):
            start = text.find(opener, start + 1)
    raise JSONNotFound


def extract_json(text: str | None, *, kind: Literal["object", "array"] = "object") -> Any:
    """The first JSON object (``kind="object"``, a dict) or array (``kind="array"``, a list) found in ``text``.

    Raises :class:`JSONNotFound` with a short reason. Each position is read strictly, then leniently (see the
    module doc), so valid JSON is never rewritten.
    """
    if not text or not text.strip():
        raise JSONNotFound("the reply is empty")
    opener, wanted = ("{", dict) if kind == "object" else ("[", list)
    for candidate in _candidates(text):
        try:
            value = _first_value(candidate, opener)
        except JSONNotFound:
            continue
        if isinstance(value, wanted):
            return value
    raise JSONNotFound(f"no JSON {kind} found in the reply ({len(text)} characters)")


def json_number(v: object) -> object:
    """JSON numbers (and numeric strings) only: pydantic's lax float would take ``true`` as 1.0."""
    if isinstance(v, bool):
        raise ValueError("must be a number, not a boolean")
    if isinstance(v, str):
        try:
            return float(v.strip())
        except ValueError:
            raise ValueError(f"must be a number, got {v!r}") from None
    return v


def complete_items(text: str | None, key: str) -> list[Any]:
    """The objects that were complete in an array under ``"key":`` cut off inside it (a model whose last
    reasoning ran into ``max_tokens``), in order; [] when none was. Nothing is completed.

    Two readings, the longer wins: strictly, object after object (linear, however long the reply); and leniently
    (a model's slips), the array closed after one of its last ``}`` (:data:`CUT_TRIES` of them): a ``}`` inside a
    string or a nested object cannot end it, as the text up to there does not decode."""
    if not text:
        return []
    for m in re.finditer(rf'"{re.escape(key)}"\s*:\s*\[', text):
        start = m.end() - 1
        best = _strict_items(text, m.end())
        for end in _closing_braces(text, start)[:CUT_TRIES]:
            try:
                value = decode_value(text[:end + 1] + "]", start)
            except (ValueError, RecursionError):
                continue
            if isinstance(value, list) and all(isinstance(v, dict) for v in value) and len(value) > len(best):
                best = value
            break
        if best:
            return best
    return []


CUT_TRIES = 16
"""How many ``}`` from the end the lenient reading of a cut-off array tries (each costs a pass over the text)."""
_SPACE_COMMA = re.compile(r"[\s,]*")


def _strict_items(text: str, pos: int) -> list[Any]:
    items: list[Any] = []
    while True:
        gap = _SPACE_COMMA.match(text, pos)
        pos = gap.end() if gap else pos
        try:
            value, pos = _DECODER.raw_decode(text, pos)
        except (ValueError, RecursionError):
            return items
        if not isinstance(value, dict):
            return items
        items.append(value)


def _closing_braces(text: str, start: int) -> list[int]:
    """Positions of ``}`` after ``start``, last first (the longest prefix that decodes wins)."""
    return [i for i in range(len(text) - 1, start, -1) if text[i] == "}"]
