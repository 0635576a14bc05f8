"""Stored timestamps: one format (ISO-8601 UTC, milliseconds, ``Z``) from any aware time, and back."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

from polpo.clock import iso, parse_iso


def test_iso_is_utc_with_milliseconds_truncated_and_a_z() -> None:
    assert iso(datetime(2026, 1, 2, 3, 4, 5, 678901, tzinfo=UTC)) == "2026-01-02T03:04:05.678Z"
    assert iso(datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)) == "2026-01-02T03:04:05.000Z"
    assert iso(datetime(2026, 1, 2, 3, 4, 5, 999, tzinfo=UTC)) == "2026-01-02T03:04:05.000Z"


def test_iso_converts_other_offsets_to_utc() -> None:
    two_hours_east = timezone(timedelta(hours=2))
    assert iso(datetime(2026, 1, 2, 1, 30, tzinfo=two_hours_east)) == "2026-01-01T23:30:00.000Z"


def test_parse_iso_reads_back_what_iso_wrote() -> None:
    t = datetime(2026, 11, 23, 16, 5, 7, 123000, tzinfo=UTC)
    assert parse_iso(iso(t)) == t
