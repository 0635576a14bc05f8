"""A mission's ``schedule`` string as an APScheduler trigger: a cron expression, an ISO instant, or an interval.

The triggers are APScheduler's (``CronTrigger.from_crontab``, ``OrTrigger``, ``DateTrigger``,
``IntervalTrigger``); what this module adds is the two places where APScheduler 3.x differs from cron:

* **Weekday numbers.** APScheduler 3.x counts day-of-week from Monday = 0 (its ``from_crontab`` documents the
  mismatch, issue 286), so ``1-5`` would mean Tuesday to Saturday. The day-of-week field is rewritten with names
  (``1-5`` → ``mon,tue,wed,thu,fri``; 0 and 7 are Sunday), which every APScheduler version reads alike.
* **Day-of-month OR day-of-week.** APScheduler requires every field to match (AND). Cron runs a job when
  *either* restricted day field matches (Polpo ANDs them: a bug, spec §4.5). When both are restricted the
  expression becomes two triggers — day-of-month with any weekday, any day with the weekday — combined
  with ``OrTrigger`` (the earliest of the two).

Everything here is pure: a trigger is asked ``get_next_fire_time(previous, now)`` with the caller's clock.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Literal
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from polpo.durations import parse_iso_duration

__all__ = ["Kind", "ScheduleError", "Trigger", "build", "kind_of", "timezone_of", "weekday_names"]

Kind = Literal["cron", "at", "every"]
Trigger = Any  # an apscheduler.triggers.base.BaseTrigger (apscheduler ships no type hints)

_DAYS = ("sun", "mon", "tue", "wed", "thu", "fri", "sat")
_NAMES = {name: i for i, name in enumerate(_DAYS)}
_TOKEN = re.compile(r"(\*|[a-z]{3}|\d+)(?:-([a-z]{3}|\d+))?(?:/(\d+))?")
_MIN_INTERVAL = timedelta(seconds=1)


class ScheduleError(ValueError):
    """A ``schedule`` that is not a cron expression, an ISO instant or an interval; the message says which."""


def kind_of(expr: str) -> Kind:
    """Five whitespace-separated fields: cron; ``P…`` (ISO-8601 duration): an interval; else an instant."""
    text = expr.strip()
    if len(text.split()) == 5:
        return "cron"
    if text[:1] in ("P", "p"):
        return "every"
    return "at"


def timezone_of(name: str | None) -> ZoneInfo:
    """An IANA zone (``Europe/Rome``); UTC when unset."""
    try:
        return ZoneInfo(name or "UTC")
    except (ZoneInfoNotFoundError, ValueError):
        raise ScheduleError(f"unknown time zone {name!r}: use an IANA name such as Europe/Rome or UTC") from None


def weekday_names(field: str) -> str:
    """Cron's day-of-week field (0 or 7 = Sunday, names, ranges, steps, lists) as APScheduler day names."""
    days: set[int] = set()
    for token in field.lower().split(","):
        m = _TOKEN.fullmatch(token)
        if m is None:
            raise ScheduleError(f"day of week {field!r}: {token!r} is not a day (0-7 or sun-sat), a range or a step")
        first, last, step = m.group(1), m.group(2), int(m.group(3) or 1)
        if first == "*":
            if last is not None:
                raise ScheduleError(f"day of week {field!r}: '*' takes no range")
            lo, hi = 0, 6
        else:
            lo = _day(first, field)
            hi = _day(last, field) if last is not None else (6 if m.group(3) else lo)
        if hi < lo or step < 1:
            raise ScheduleError(f"day of week {field!r}: {token!r} is an empty range")
        days.update(d % 7 for d in range(lo, hi + 1, step))
    return ",".join(_DAYS[d] for d in sorted(days))


def _day(text: str, field: str) -> int:
    if text.isdigit():
        n = int(text)
        if n > 7:
            raise ScheduleError(f"day of week {field!r}: {n} is out of range (0-7, 0 and 7 are Sunday)")
        return n
    if text not in _NAMES:
        raise ScheduleError(f"day of week {field!r}: {text!r} is not a day name (sun-sat)")
    return _NAMES[text]


def build(expr: str, tz: ZoneInfo, *, anchor: datetime, end: datetime | None = None) -> Trigger:
    """The trigger for ``expr`` in ``tz``. ``anchor``: when the schedule was made (an interval's first firing
    is one interval after it); ``end``: no firing after it."""
    from apscheduler.triggers.combining import OrTrigger
    from apscheduler.triggers.cron import CronTrigger
    from apscheduler.triggers.date import DateTrigger
    from apscheduler.triggers.interval import IntervalTrigger

    text = expr.strip()
    kind = kind_of(text)
    try:
        if kind == "cron":
            minute, hour, dom, month, dow = text.split()
            names = weekday_names(dow)

            def cron(day: str, weekday: str) -> Trigger:
                return CronTrigger.from_crontab(f"{minute} {hour} {day} {month} {weekday}", timezone=tz)

            if dom.startswith("*") or dow.startswith("*"):  # at most one day field restricted: AND is cron's rule
                trigger = cron(dom, names)
            else:  # both restricted: either one (cron's OR), as two APScheduler triggers
                trigger = OrTrigger([cron(dom, "*"), cron("*", names)])
            return _Ending(trigger, end) if end is not None else trigger
        if kind == "every":
            every = parse_iso_duration(text)
            if every < _MIN_INTERVAL:
                raise ScheduleError(f"interval {text!r} is shorter than one second")
            return IntervalTrigger(seconds=every.total_seconds(), start_date=anchor + every, end_date=end,
                                   timezone=tz)
        at = datetime.fromisoformat(text.replace("Z", "+00:00"))
        if at.tzinfo is None:
            at = at.replace(tzinfo=tz)  # a local instant: in the schedule's time zone
        return _Ending(DateTrigger(run_date=at, timezone=tz), end) if end is not None else DateTrigger(run_date=at)
    except ScheduleError:
        raise
    except ValueError as e:
        hint = {"cron": "a cron expression (minute hour day-of-month month day-of-week)",
                "every": "an ISO-8601 interval such as PT15M", "at": "an ISO-8601 instant such as 2027-01-01T09:00:00Z"}
        raise ScheduleError(f"{text!r} is not {hint[kind]}: {e}") from None


@dataclass(frozen=True)
class _Ending:
    """A trigger that never fires after ``end`` (``OrTrigger`` and ``DateTrigger`` take no end date)."""

    inner: Trigger
    end: datetime

    def get_next_fire_time(self, previous: datetime | None, now: datetime) -> datetime | None:
        t: datetime | None = self.inner.get_next_fire_time(previous, now)
        return t if t is not None and t <= self.end else None
