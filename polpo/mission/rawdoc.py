"""Reading a mission document as raw JSON, defensively: keys in camelCase or snake_case, wrong shapes skipped.

The loader's whole-document checks and its warnings run on the raw JSON next to pydantic's field errors, so
one run reports everything a person has to fix; these helpers never raise on a part with the wrong shape.
"""

from __future__ import annotations

import functools
from typing import Any

from pydantic.alias_generators import to_snake

from polpo.docmodel import MAX_NAME
from polpo.suggest import Suggester

__all__ = ["Loc", "Suggester", "as_list", "get", "name_of", "sort_key"]

Loc = tuple[str | int, ...]




@functools.lru_cache(maxsize=256)
def _snake(camel: str) -> str:
    return to_snake(camel)


def get(obj: Any, camel: str) -> tuple[str, Any]:
    """The key used (camelCase, or snake_case which is accepted too) and its value; value None if absent."""
    if not isinstance(obj, dict):
        return camel, None
    if camel in obj:
        return camel, obj[camel]
    snake = _snake(camel)
    return (snake, obj[snake]) if snake in obj else (camel, None)


def name_of(v: Any) -> str | None:
    """A reference as the schema stores it (stripped); None for anything the field validation reports (not a
    string, empty, longer than :data:`~polpo.docmodel.MAX_NAME`)."""
    if not isinstance(v, str):
        return None
    v = v.strip()
    return v if 0 < len(v) <= MAX_NAME else None


def as_list(v: Any) -> list[Any]:
    return v if isinstance(v, list) else []


def sort_key(loc: Loc) -> tuple[tuple[int, int, str], ...]:
    """Locations in document order (indexes numerically, before keys)."""
    return tuple((0, s, "") if isinstance(s, int) else (1, 0, s) for s in loc)


