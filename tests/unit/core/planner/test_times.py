"""Times as the API server writes them, read back (`t9kjobs.planner.conditions`)."""

from __future__ import annotations

from datetime import UTC, datetime

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
