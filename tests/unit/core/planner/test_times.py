"""Times as the API server writes them, read back (`t9kjobs.planner.conditions`)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest

from t9kjobs.planner.conditions import parse_time, rfc3339

NOON = datetime(2026, 1, 1, 12, 0, 0, tzinfo=UTC)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("2026-01-01T12:00:00Z", NOON),  # a Time: a condition's, a job's startTime
        ("2026-01-01T12:00:00.250000Z", NOON.replace(microsecond=250000)),  # a MicroTime
        ("2026-01-01T14:00:00+02:00", NOON),  # another zone
        ("2026-01-01T12:00:00", NOON),  # no zone: UTC, as the API server means it
    ],
)
def test_times_are_read_in_every_form_the_api_server_writes(text: str, expected: datetime) -> None:
    assert parse_time(text) == expected


def test_written_times_are_whole_seconds_in_utc_and_read_back() -> None:
    written = rfc3339(NOON.replace(microsecond=999999))
    assert written == "2026-01-01T12:00:00Z"
    assert parse_time(written) == NOON


@pytest.mark.parametrize(
    "when",
    [
        NOON,
        datetime(1970, 1, 1, tzinfo=UTC),
        datetime(2026, 12, 31, 23, 59, 59, 999999, tzinfo=UTC),  # never rounded up
        datetime(2026, 3, 29, 1, 30, 5, 123, tzinfo=timezone(timedelta(hours=-7))),
        datetime(2026, 6, 1, 0, 0, 1, tzinfo=timezone(timedelta(hours=5, minutes=45))),
        datetime(9999, 12, 31, 23, 59, 59, tzinfo=UTC),
    ],
)
def test_written_times_are_as_strftime_writes_them(when: datetime) -> None:
    """The format the API server reads (and the status ever had): strftime's."""
    expected = when.astimezone(UTC).replace(microsecond=0).strftime("%Y-%m-%dT%H:%M:%SZ")
    assert rfc3339(when) == expected
