"""The base of every model read from a mission document: camelCase in JSON, unknown keys rejected.

A superset of Polpo's mission document: Polpo fields polpo does not implement are *tolerated*. Each model lists
them (``TOLERATED``, plus ``TOLERATED_PREFIXES`` for families such as ``enableGit``/``enablePdf``); a validator
takes them out before ``extra="forbid"`` sees them and the loader names each one in a warning, so Polpo
documents load, nothing is dropped silently, and a real typo is still an error.
"""

from __future__ import annotations

from typing import Annotated, Any, ClassVar, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, StringConstraints, model_validator
from pydantic.alias_generators import to_camel

MAX_NAME = 1000
"""Characters a title, a name or a model may have. Each is written into every event and log line about it and
onto agents' command lines (``{title}``) and environments, where Linux refuses an argument over 128 KiB: a long
one is refused when the file is read, with its JSON path, not taken in and failed at its first run."""
MAX_MESSAGE = 10_000
"""Characters of a message a person is shown (a checkpoint's, a delay's): it is in their events too."""


def _at_most(limit: int, what: str) -> AfterValidator:
    def check(v: str) -> str:
        if len(v) > limit:
            raise ValueError(f"too long: {len(v)} characters, at most {limit} ({what})")
        return v
    return AfterValidator(check)


_SHORT = _at_most(MAX_NAME, "titles, names and models go into every event about them and onto agents' command "
                            "lines")
NonEmpty = Annotated[str, StringConstraints(min_length=1)]
# Titles and names are matched against each other, so all of them are stripped the same way.
Name = Annotated[str, StringConstraints(strip_whitespace=True, min_length=1), _SHORT]
Short = Annotated[str, _SHORT]
"""A string that ends up in events or on command lines (a mission's name, a model)."""
ShortNonEmpty = Annotated[str, StringConstraints(min_length=1), _SHORT]
Message = Annotated[str, _at_most(MAX_MESSAGE, "a message is shown in full in its events and notifications")]


class Model(BaseModel):
    """Base: camelCase aliases, unknown keys forbidden, listed Polpo-only keys tolerated (popped, remembered)."""

    model_config = ConfigDict(alias_generator=to_camel, validate_by_name=True, validate_by_alias=True,
                              serialize_by_alias=True, extra="forbid", frozen=True, defer_build=True)
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
