"""The base of every model read from a mission document: camelCase in JSON, unknown keys rejected.

A superset of Polpo's mission document: Polpo fields polpo does not implement are *tolerated*. Each model lists
them (``TOLERATED``, plus ``TOLERATED_PREFIXES`` for families such as ``enableGit``/``enablePdf``); a validator
takes them out before ``extra="forbid"`` sees them and the loader names each one in a warning, so Polpo
documents load, nothing is dropped silently, and a real typo is still an error.
"""

from __future__ import annotations

from typing import Annotated, Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, StringConstraints, model_validator
from pydantic.alias_generators import to_camel

NonEmpty = Annotated[str, StringConstraints(min_length=1)]
# Titles and names are matched against each other, so all of them are stripped the same way.
Name = Annotated[str, StringConstraints(strip_whitespace=True, min_length=1)]


class Model(BaseModel):
    """Base: camelCase aliases, unknown keys forbidden, listed Polpo-only keys tolerated (popped, remembered)."""

    model_config = ConfigDict(alias_generator=to_camel, validate_by_name=True, validate_by_alias=True,
                              serialize_by_alias=True, extra="forbid", frozen=True)
    TOLERATED: ClassVar[frozenset[str]] = frozenset()
    TOLERATED_PREFIXES: ClassVar[tuple[str, ...]] = ()

    @classmethod
    def is_tolerated(cls, key: str) -> bool:
        """A Polpo key this model accepts and ignores (the loader warns about each one)."""
        return key in cls.TOLERATED or any(
            key.startswith(p) and key[len(p):][:1].isupper() for p in cls.TOLERATED_PREFIXES)

    @model_validator(mode="wrap")
    @classmethod
    def _pop_tolerated(cls, data: Any, handler: Any) -> Any:
        """Drop the tolerated keys before validation; the loader names each one in a warning."""
        if isinstance(data, dict) and (cls.TOLERATED or cls.TOLERATED_PREFIXES):
            ignored = [k for k in data if isinstance(k, str) and cls.is_tolerated(k)]
            if ignored:
                data = {k: v for k, v in data.items() if k not in ignored}
        return handler(data)


Confidence = Literal["firm", "estimated"]
