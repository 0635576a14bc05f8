"""From a typed payload to the ``data`` object that is stored, logged and routed — in one place.

Every event goes through :func:`event_data` exactly once, when the store stamps it: field names become
camelCase, optional fields that are ``None`` are left out, every string (nested ones included) has secret
values masked, text that JSON cannot carry (lone surrogates from a malformed file) is escaped, and the event
is bounded: a string keeps at most :data:`MAX_TEXT` characters, a list or object :data:`MAX_ITEMS` entries,
and the whole event about :data:`MAX_EVENT` characters of content; what is cut is replaced by a visible
``… (N more)`` marker, so the event stays valid JSON and says that it was shortened. Whole numbers outside
64 bits (which orjson cannot write) become their decimal text. Call sites build payloads with plain values
and never redact, rename or trim by hand.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from pydantic.alias_generators import to_camel

from polpo.events.catalog import Payload
from polpo.llm.secrets import mask, secret_values

__all__ = ["MAX_EVENT", "MAX_ITEMS", "MAX_TEXT", "event_data", "json_safe_text", "safe_value"]

MAX_TEXT = 16 * 1024  # characters of one string
MAX_ITEMS = 1000  # entries of one list or object
MAX_EVENT = 256 * 1024  # characters of content in one event (strings, keys, numbers), roughly its JSON size
MORE_KEY = "…"  # the key that marks an object whose remaining entries were cut
_INT_RANGE = (-(2**63), 2**64 - 1)  # what orjson writes as a number

_Spec = tuple[tuple[str, str, bool], ...]  # (attribute, JSON key, omitted when None)
_SPECS: dict[type[Payload], _Spec] = {}


def _spec(cls: type[Payload]) -> _Spec:
    spec = _SPECS.get(cls)
    if spec is None:
        spec = tuple((f.name, to_camel(f.name.rstrip("_")), f.default is None)
                     for f in dataclasses.fields(cls))  # type: ignore[arg-type]
        _SPECS[cls] = spec
    return spec


class _Budget:
    """Characters the rest of one event may still use."""

    __slots__ = ("left",)

    def __init__(self, left: int) -> None:
        self.left = left


def event_data(payload: Payload, secrets: list[str] | None = None) -> dict[str, Any]:
    """The payload as the event's ``data``: camelCase keys, secrets masked, JSON-safe, bounded.

    ``secrets``: the values to mask, default the environment's (a writer stamping a batch reads them once)."""
    if secrets is None:
        secrets = secret_values()
    budget = _Budget(MAX_EVENT)
    out: dict[str, Any] = {}
    for attr, key, optional in _spec(type(payload)):
        value = getattr(payload, attr)
        if value is None and optional:
            continue
        out[key] = _bounded(value, secrets, budget)
    return out


def safe_value(value: Any, secrets: list[str] | None = None) -> Any:
    """``value`` with every string masked (``secrets``, default: the environment's), JSON-safe and bounded."""
    return _bounded(value, secret_values() if secrets is None else secrets, _Budget(MAX_EVENT))


_PLAIN = frozenset({float, bool, type(None)})  # kept as they are (the common scalars, tested first)


def _bounded(value: Any, secrets: list[str], budget: _Budget) -> Any:
    kind = type(value)
    if kind in _PLAIN or (kind is int and _INT_RANGE[0] <= value <= _INT_RANGE[1]):
        budget.left -= 8
        return value
    if isinstance(value, str):
        return _text(_safe_str(value, secrets), budget)
    if isinstance(value, dict):
        out: dict[str, Any] = {}
        for i, (k, v) in enumerate(value.items()):
            if i >= MAX_ITEMS or budget.left <= 0:
                out[MORE_KEY] = f"({len(value) - i} more)"
                break
            key = _safe_str(str(k), secrets)[:MAX_TEXT]
            budget.left -= len(key) + 4
            out[key] = _bounded(v, secrets, budget)
        return out
    if isinstance(value, list | tuple):
        items: list[Any] = []
        for i, v in enumerate(value):
            if i >= MAX_ITEMS or budget.left <= 0:
                items.append(f"… ({len(value) - i} more)")
                break
            budget.left -= 1
            items.append(_bounded(v, secrets, budget))
        return items
    if isinstance(value, int) and not isinstance(value, bool) and not _INT_RANGE[0] <= value <= _INT_RANGE[1]:
        return _text(_digits(value), budget)
    budget.left -= 8
    return value


def _digits(n: int) -> str:
    """A huge whole number as text without converting all of it (Python refuses more than 4300 digits)."""
    size = n.bit_length() * 30103 // 100000 + 1  # ≈ its number of decimal digits
    return str(n) if size <= 1000 else f"{'-' if n < 0 else ''}(a whole number of about {size} digits)"


def _text(text: str, budget: _Budget) -> str:
    keep = max(0, min(len(text), MAX_TEXT, budget.left))
    budget.left -= keep + 2
    if keep == len(text):
        return text
    return f"{text[:keep]}… ({len(text) - keep} more characters)"


def _safe_str(text: str, secrets: list[str]) -> str:
    text = mask(text, secrets)
    return text if text.isascii() else json_safe_text(text)


def json_safe_text(text: str) -> str:
    """``text`` that encodes as UTF-8: lone surrogates become ``\\udXXX`` escapes instead of breaking JSON."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return text.encode("utf-8", "backslashreplace").decode("utf-8")
    return text
