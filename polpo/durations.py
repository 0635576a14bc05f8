"""Durations and deadlines as mission files and the config write them.

A duration is seconds (a number) or an ISO-8601 duration (``PT30S``, ``P1DT2H``); a deadline is an aware
ISO-8601 instant or a duration counted from the mission's start. Shared by the mission schema, the config and
the SLA code, so every place accepts exactly the same forms.
"""

from __future__ import annotations

import re
from datetime import datetime, timedelta
from typing import Annotated

from pydantic import BeforeValidator, PlainSerializer, WithJsonSchema

_NUM = r"(\d+(?:[.,]\d+)?)"
_ISO_DURATION = re.compile(
    rf"P(?:{_NUM}Y)?(?:{_NUM}M)?(?:{_NUM}W)?(?:{_NUM}D)?(?:T(?:{_NUM}H)?(?:{_NUM}M)?(?:{_NUM}S)?)?",
    re.IGNORECASE,
)
_UNIT_SECONDS = (365 * 86400, 30 * 86400, 7 * 86400, 86400, 3600, 60, 1)
_DURATION_HINT = "a number of seconds or an ISO-8601 duration such as PT30S, PT1H30M or P1D"


def parse_iso_duration(text: str) -> timedelta:
    """``P[nY][nM][nW][nD][T[nH][nM][nS]]`` → timedelta; a year is 365 days, a month 30. Raises ValueError.

    Our own parser (not pydantic's) so the accepted forms are exactly the documented ones.
    """
    s = text.strip()
    m = _ISO_DURATION.fullmatch(s)
    if m is None or not any(m.groups()) or s.upper().endswith("T"):
        raise ValueError(f"{text!r} is not {_DURATION_HINT}")
    seconds = sum(float(v.replace(",", ".")) * unit for v, unit in zip(m.groups(), _UNIT_SECONDS, strict=True) if v)
    return _seconds(seconds)


def _seconds(seconds: float) -> timedelta:
    try:
        return timedelta(seconds=seconds)
    except (OverflowError, ValueError):
        raise ValueError("the duration is out of range") from None


def format_duration(td: timedelta) -> str:
    """The ISO-8601 form a duration is stored in; ``parse_iso_duration`` reads it back exactly."""
    days, rest = td.days, td - timedelta(days=td.days)
    secs = rest.total_seconds()
    h, secs = divmod(secs, 3600)
    mi, secs = divmod(secs, 60)
    out = "P" + (f"{days}D" if days else "")
    time = (f"{int(h)}H" if h else "") + (f"{int(mi)}M" if mi else "")
    if secs:
        time += f"{secs:.6f}".rstrip("0").rstrip(".") + "S"
    return out + ("T" + time if time else "") if (days or time) else "PT0S"


def _to_duration(v: object) -> timedelta:
    if isinstance(v, timedelta):
        td = v
    elif isinstance(v, bool) or not isinstance(v, int | float | str):
        raise ValueError(f"a duration is {_DURATION_HINT}")
    elif isinstance(v, str):
        td = parse_iso_duration(v)
    else:
        td = _seconds(v)
    if td <= timedelta(0):
        raise ValueError("a duration must be greater than zero")
    return td


Duration = Annotated[
    timedelta,
    BeforeValidator(_to_duration),
    PlainSerializer(format_duration, return_type=str),
    WithJsonSchema({"anyOf": [{"type": "number", "exclusiveMinimum": 0}, {"type": "string", "format": "duration"}],
                    "description": "seconds, or an ISO-8601 duration (PT30S, P1DT2H)"}),
]


def _to_deadline(v: object) -> datetime | timedelta:
    """An aware instant, or a duration counted from the mission's start. A naive instant is ambiguous."""
    if isinstance(v, datetime):
        dt = v
    elif isinstance(v, timedelta):
        return _to_duration(v)
    elif not isinstance(v, str):
        raise ValueError("a deadline is a string: an ISO-8601 instant (2026-12-01T18:00:00Z) or duration (PT2H)")
    else:
        text = v.strip()
        if text[:1] in ("P", "p"):
            return _to_duration(text)
        try:
            dt = datetime.fromisoformat(text)
        except ValueError:
            raise ValueError(f"{v!r} is neither an ISO-8601 instant (2026-12-01T18:00:00Z) "
                             "nor an ISO-8601 duration (PT2H)") from None
    if dt.tzinfo is None or dt.utcoffset() is None:
        raise ValueError("add a timezone, e.g. Z or +01:00")
    return dt


def _format_deadline(v: datetime | timedelta) -> str:
    return format_duration(v) if isinstance(v, timedelta) else v.isoformat()


Deadline = Annotated[
    datetime | timedelta,
    BeforeValidator(_to_deadline),
    PlainSerializer(_format_deadline, return_type=str),
    WithJsonSchema({"type": "string",
                    "description": "an ISO-8601 instant with a timezone, or a duration from the mission's start"}),
]
