"""From a typed payload to the ``data`` object that is stored, logged and routed — in one place.

Every event goes through :func:`event_data` exactly once, when the store stamps it: field names become
camelCase, optional fields that are ``None`` are left out, every string (nested ones included) has secret
values masked, and text that JSON cannot carry (lone surrogates from a malformed file) is escaped. Call sites
build payloads with plain values and never redact or rename by hand.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from pydantic.alias_generators import to_camel

from polpo.events.catalog import Payload
from polpo.llm.secrets import mask, secret_values

__all__ = ["event_data", "json_safe_text", "safe_value"]

_Spec = tuple[tuple[str, str, bool], ...]  # (attribute, JSON key, omitted when None)
_SPECS: dict[type[Payload], _Spec] = {}


def _spec(cls: type[Payload]) -> _Spec:
    spec = _SPECS.get(cls)
    if spec is None:
        spec = tuple((f.name, to_camel(f.name.rstrip("_")), f.default is None)
                     for f in dataclasses.fields(cls))  # type: ignore[arg-type]
        _SPECS[cls] = spec
    return spec


def event_data(payload: Payload) -> dict[str, Any]:
    """The payload as the event's ``data``: camelCase keys, secrets masked, JSON-safe."""
    secrets = secret_values()
    out: dict[str, Any] = {}
    for attr, key, optional in _spec(type(payload)):
        value = getattr(payload, attr)
        if value is None and optional:
            continue
        out[key] = safe_value(value, secrets)
    return out


def safe_value(value: Any, secrets: list[str] | None = None) -> Any:
    """``value`` with every string masked (``secrets``, default: the environment's) and JSON-safe."""
    if secrets is None:
        secrets = secret_values()
    if isinstance(value, str):
        return _safe_str(value, secrets)
    if isinstance(value, dict):
        return {_safe_str(str(k), secrets): safe_value(v, secrets) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [safe_value(v, secrets) for v in value]
    return value


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
