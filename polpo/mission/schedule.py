"""The schedule fields of a mission document: when a mission file runs by itself, again and again.

Polpo keeps ``schedule`` (a cron expression or an ISO instant) and ``endDate`` on its mission record; polpo reads
them from the document, with the same names, plus what a daemon that can be down or busy needs to be told:
``timezone``, ``overlap`` (a run still going when the next is due), ``catchUp`` and ``misfireGrace`` (firings
missed while the daemon was down). :class:`ScheduleFields` is a base of ``MissionSpec``, so these are top-level
keys of the document. The expression is checked by building its trigger (:mod:`polpo.schedules.triggers`).
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Annotated, Self

from pydantic import BeforeValidator, Field, ValidationInfo, field_validator, model_validator

from polpo.docmodel import Model
from polpo.durations import Duration
from polpo.schedules.plan import CatchUp, Overlap

__all__ = ["ScheduleFields"]

_MAX_GRACE = timedelta(days=366)


def _instant(v: object) -> object:
    """An ISO-8601 instant; without an offset it is read in the schedule's ``timezone`` (below)."""
    if isinstance(v, str):
        try:
            return datetime.fromisoformat(v.strip().replace("Z", "+00:00").replace("z", "+00:00"))
        except ValueError:
            raise ValueError(f"{v!r} is not an ISO-8601 instant such as 2027-01-01T00:00:00Z") from None
    return v


Instant = Annotated[datetime, BeforeValidator(_instant)]


class ScheduleFields(Model):
    """``schedule``: ``"0 9 * * 1-5"`` (cron, day-of-month OR day-of-week as cron has it), ``"2027-01-04T09:00:00Z"``
    (once) or ``"PT15M"`` (every 15 minutes from when the file was read). ``timezone``: an IANA zone for the
    cron fields and instants without an offset (default UTC). ``endDate``: no firing after it.
    ``overlap`` (default ``skip``): when a run of the mission is still going at a firing, skip the firing,
    ``queue`` it (it starts when the run ends) or ``cancel-previous`` (cancel the run, start a new one).
    ``catchUp`` (default ``one``) for firings missed while the daemon was down: ``none`` runs none, ``one`` runs
    one for all of them, ``all`` runs each (the newest 100). ``misfireGrace`` (default one minute): a firing
    this late still counts as on time."""

    timezone: str | None = None  # before schedule and endDate: they are read in it
    end_date: Instant | None = None
    schedule: str | None = Field(None, min_length=1)
    overlap: Overlap | None = None
    catch_up: CatchUp | None = None
    misfire_grace: Duration | None = None

    @field_validator("timezone")
    @classmethod
    def _known_zone(cls, v: str | None) -> str | None:
        from polpo.schedules.triggers import timezone_of

        timezone_of(v)  # raises what is wrong
        return v

    @field_validator("end_date")
    @classmethod
    def _end_in_zone(cls, v: datetime | None, info: ValidationInfo) -> datetime | None:
        from polpo.schedules.triggers import ScheduleError, timezone_of

        if v is None or v.tzinfo is not None:
            return v
        try:
            return v.replace(tzinfo=timezone_of(info.data.get("timezone")))
        except ScheduleError:
            return v  # the timezone's own error says what is wrong

    @field_validator("schedule")
    @classmethod
    def _buildable(cls, v: str | None, info: ValidationInfo) -> str | None:
        from polpo.schedules.triggers import ScheduleError, build, timezone_of

        if v is None:
            return v
        try:
            tz = timezone_of(info.data.get("timezone"))
        except ScheduleError:
            return v  # the timezone's own error says what is wrong
        build(v, tz, anchor=datetime(2000, 1, 1, tzinfo=tz), end=info.data.get("end_date"))  # raises what is wrong
        return v

    @model_validator(mode="after")
    def _needs_schedule(self) -> Self:
        if self.schedule is None:
            given = [k for k, v in (("timezone", self.timezone), ("endDate", self.end_date), ("overlap", self.overlap),
                                    ("catchUp", self.catch_up), ("misfireGrace", self.misfire_grace)) if v is not None]
            if given:
                raise ValueError(f"{', '.join(given)} without a schedule: add \"schedule\" (a cron expression, an "
                                 "ISO instant or an ISO interval such as PT15M) or remove them")
        if self.misfire_grace is not None and self.misfire_grace > _MAX_GRACE:
            raise ValueError("misfireGrace is too long: at most a year (P366D)")
        return self
