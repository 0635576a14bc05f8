"""Schedules' triggers and fire-time decisions: pure functions over a given ``now`` (no daemon, no sleep)."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest

from polpo.mission.loader import load_mission
from polpo.schedules.plan import MAX_QUEUED, Due, Policy, due, next_fire, on_overlap, plan
from polpo.schedules.triggers import ScheduleError, build, timezone_of, weekday_names

T0 = datetime(2026, 3, 23, 0, 0, 30, tzinfo=UTC)  # a Monday; the EU clocks move forward on Sunday the 29th


def firings(expr: str, start: datetime, n: int, tz: str | None = None) -> list[datetime]:
    trigger = build(expr, timezone_of(tz), anchor=start)
    out: list[datetime] = []
    prev: datetime | None = None
    while len(out) < n:
        t = next_fire(trigger, prev, start, start if prev is None else prev)
        assert t is not None
        out.append(t)
        prev = t
    return out


def test_weekdays_at_nine_local_time_across_a_daylight_saving_change() -> None:
    rome = ZoneInfo("Europe/Rome")
    got = firings("0 9 * * 1-5", T0, 10, "Europe/Rome")
    local = [t.astimezone(rome) for t in got]
    assert all((t.hour, t.minute, t.second) == (9, 0, 0) for t in local)
    assert [t.strftime("%a %d") for t in local] == ["Mon 23", "Tue 24", "Wed 25", "Thu 26", "Fri 27",
                                                    "Mon 30", "Tue 31", "Wed 01", "Thu 02", "Fri 03"]
    assert got[0].astimezone(UTC).hour == 8 and got[5].astimezone(UTC).hour == 7  # CET, then CEST


def test_cron_weekday_numbers_are_crons_not_apschedulers() -> None:
    """APScheduler 3.x counts Monday as 0: ``1-5`` would be Tuesday to Saturday without the rewrite."""
    assert weekday_names("1-5") == "mon,tue,wed,thu,fri"
    assert weekday_names("0") == weekday_names("7") == weekday_names("SUN") == "sun"
    assert weekday_names("*/2") == "sun,tue,thu,sat"  # cron's steps count from Sunday
    assert weekday_names("5-7") == "sun,fri,sat"
    assert [t.strftime("%a") for t in firings("0 0 * * 0", T0, 2)] == ["Sun", "Sun"]


def test_day_of_month_or_day_of_week_when_both_are_restricted() -> None:
    """Cron runs ``0 0 13 * 5`` on every 13th and every Friday; Polpo ANDed them (Friday the 13th only)."""
    got = firings("0 0 13 * 5", datetime(2026, 1, 1, tzinfo=UTC), 6)
    assert [t.strftime("%a %d") for t in got] == ["Fri 02", "Fri 09", "Tue 13", "Fri 16", "Fri 23", "Fri 30"]


def test_one_restricted_day_field_keeps_the_other_open() -> None:
    assert {t.day for t in firings("0 0 1 * *", T0, 3)} == {1}
    assert {t.strftime("%a") for t in firings("0 0 */1 * 1", T0, 3)} == {"Mon"}  # "*/1" counts as unrestricted


def test_every_minute_fires_each_minute_once() -> None:
    got = firings("*/1 * * * *", T0, 5)
    assert got == [datetime(2026, 3, 23, 0, m, tzinfo=UTC) for m in range(1, 6)]


def test_an_instant_and_an_interval() -> None:
    at = build("2026-03-23T10:00:00", timezone_of("Europe/Rome"), anchor=T0)
    assert next_fire(at, None, T0, T0) == datetime(2026, 3, 23, 9, 0, tzinfo=UTC)
    assert next_fire(at, datetime(2026, 3, 23, 9, 0, tzinfo=UTC), T0, T0 + timedelta(hours=10)) is None
    assert firings("PT15M", T0, 3) == [T0 + timedelta(minutes=15 * k) for k in (1, 2, 3)]


def test_end_date_ends_every_kind() -> None:
    end = T0 + timedelta(minutes=2, seconds=30)
    for expr in ("*/1 * * * *", "PT1M", "0 0 13 * 5"):
        trigger = build(expr, timezone_of(None), anchor=T0, end=end)
        got = due(trigger, None, T0, T0 + timedelta(days=400)).instants
        assert all(t <= end for t in got), expr
    cron = build("*/1 * * * *", timezone_of(None), anchor=T0, end=end)
    assert next_fire(cron, end, T0, end) is None  # 00:03 was the last


@pytest.mark.parametrize("expr", ["61 * * * *", "0 9 * * 8", "0 9 * * mon-xyz", "* * *", "tomorrow", "PT0.5S",
                                  "0 25 * * *"])
def test_bad_expressions_say_what_is_wrong(expr: str) -> None:
    with pytest.raises(ScheduleError):
        build(expr, timezone_of(None), anchor=T0)


def test_unknown_time_zone() -> None:
    with pytest.raises(ScheduleError, match="IANA"):
        timezone_of("Mars/Olympus")


# --------------------------------------------------------------------------------------------- decisions

def minutes(*ms: int) -> tuple[datetime, ...]:
    return tuple(datetime(2026, 3, 23, 0, m, tzinfo=UTC) for m in ms)


def test_due_lists_what_fell_due_after_the_cursor_once() -> None:
    trigger = build("*/1 * * * *", timezone_of(None), anchor=T0)
    now = datetime(2026, 3, 23, 0, 3, 10, tzinfo=UTC)
    assert due(trigger, None, T0, now).instants == minutes(1, 2, 3)
    assert due(trigger, minutes(2)[0], T0, now).instants == minutes(3)
    assert due(trigger, minutes(3)[0], T0, now).instants == ()  # dealt with: nothing twice


def test_a_long_downtime_is_bounded() -> None:
    trigger = build("*/1 * * * *", timezone_of(None), anchor=T0)
    now = T0 + timedelta(days=30)
    got = due(trigger, T0, T0, now, keep=100)
    assert len(got.instants) == 100 and got.instants[-1] == now.replace(second=0)
    assert got.dropped >= 1000  # at least: a month of minutes is counted in part


@pytest.mark.parametrize(("catch_up", "fire", "missed"), [
    ("none", (), minutes(1, 2, 3)),
    ("one", minutes(3), minutes(1, 2)),
    ("all", minutes(1, 2, 3), ()),
])
def test_catch_up_after_downtime(catch_up: str, fire: tuple[datetime, ...], missed: tuple[datetime, ...]) -> None:
    now = datetime(2026, 3, 23, 0, 10, tzinfo=UTC)  # seven minutes after the last one: all late
    got = plan(Due(minutes(1, 2, 3)), None, now, Policy(catch_up=catch_up))  # type: ignore[arg-type]
    assert (got.fire, got.missed, got.cursor) == (fire, missed, minutes(3)[0])


def test_an_on_time_firing_runs_whatever_the_catch_up_policy() -> None:
    now = datetime(2026, 3, 23, 0, 3, 40, tzinfo=UTC)  # 40 s late, within the default minute of grace
    got = plan(Due(minutes(3)), None, now, Policy(catch_up="none"))
    assert got.fire == minutes(3)
    assert plan(Due(minutes(3)), None, now, Policy(catch_up="none", misfire_grace=timedelta(seconds=30))).fire == ()


def test_nothing_due_changes_nothing() -> None:
    assert plan(Due(()), minutes(2)[0], minutes(2)[0], Policy()).cursor == minutes(2)[0]


def test_overlap_policies() -> None:
    assert on_overlap(Policy(overlap="skip"), False, 0) == "start"
    assert on_overlap(Policy(overlap="skip"), True, 0) == "skip"
    assert on_overlap(Policy(overlap="queue"), True, 0) == "queue"
    assert on_overlap(Policy(overlap="queue"), True, MAX_QUEUED) == "skip"
    assert on_overlap(Policy(overlap="cancel-previous"), True, 0) == "replace"


# ------------------------------------------------------------------------------------------ the document

def doc(**top: object) -> bytes:
    return json.dumps({"tasks": [{"title": "a", "description": "b"}], **top}).encode()


def test_polpo_schedule_fields_validate_and_are_kept() -> None:
    r = load_mission(doc(schedule="0 9 * * 1-5", timezone="Europe/Rome", endDate="2027-01-01T00:00:00",
                         overlap="queue", catchUp="all", misfireGrace="PT5M"), known_agents=None)
    assert r.spec is not None, r.problems
    assert not r.warnings  # not "accepted and ignored"
    assert r.spec.end_date == datetime(2027, 1, 1, tzinfo=ZoneInfo("Europe/Rome"))
    assert (r.spec.overlap, r.spec.catch_up, r.spec.misfire_grace) == ("queue", "all", timedelta(minutes=5))


@pytest.mark.parametrize(("top", "says"), [
    ({"schedule": "0 9 * * 8"}, "out of range"),
    ({"schedule": "* * * * *", "timezone": "Nowhere/Town"}, "IANA"),
    ({"endDate": "2027-01-01T00:00:00Z"}, "without a schedule"),
    ({"schedule": "* * * * *", "overlap": "wait"}, "skip"),
    ({"schedule": "* * * * *", "catchUp": "some"}, "none"),
])
def test_bad_schedule_fields_are_refused(top: dict[str, str], says: str) -> None:
    r = load_mission(doc(**top), known_agents=None)
    assert r.spec is None and any(says in p.message for p in r.problems), r.problems
