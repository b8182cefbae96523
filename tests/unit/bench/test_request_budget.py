"""The request budget's arithmetic (bench/request_budget.py): what the guard of
tests/e2e/test_request_budget.py compares, and which status writes it leaves to the clock."""

from __future__ import annotations

from typing import Any

from bench.request_budget import grown, per_job, timing_writes, written_statuses


def test_requests_per_job_are_rounded_up_and_only_what_grew_is_reported() -> None:
    before = {"POST pods": 10.0, "GET discovery": 3.0}
    after = {"POST pods": 90.0, "GET discovery": 3.0, "PUT x/status": 41.0}
    measured = per_job(before, after, 20)
    assert measured == {"POST pods": 4.0, "PUT x/status": 2.05}
    assert per_job({}, {"PUT x/status": 41.0}, 40) == {"PUT x/status": 1.03}  # 1.025 up
    assert grown(measured, {"POST pods": 4.0, "PUT x/status": 2.05}) == []
    assert grown(measured, {"POST pods": 4.0, "PUT x/status": 2.0}) == [
        "PUT x/status: 2.05 a job, recorded 2.00"
    ]
    # A request the budget does not name is one that grew from nothing.
    assert grown({"GET pods/log": 0.05}, {}) == ["GET pods/log: 0.05 a job, recorded 0.00"]


def _status(phase: str, *, start: str = "", initialized: str = "", **more: Any) -> Any:
    conditions = [{"type": "Initialized", "status": "True", "lastTransitionTime": initialized}]
    return {"phase": phase, "startTime": start, "conditions": conditions, **more}


def test_a_watch_of_the_jobs_gives_each_jobs_written_statuses() -> None:
    a1 = {"metadata": {"name": "a"}}
    a2 = {"metadata": {"name": "a"}, "status": {"phase": "Running"}}
    a3 = {"metadata": {"name": "a", "labels": {"x": "y"}}, "status": {"phase": "Running"}}
    events = [("ADDED", a1), ("MODIFIED", a2), ("MODIFIED", a3), ("DELETED", a3)]
    assert written_statuses(events) == {"a": [{"phase": "Running"}]}


def test_the_writes_the_clock_decides_are_a_late_pending_and_one_after_the_verdict() -> None:
    start = "2026-01-01T12:00:00Z"
    running, done = {"phase": "Running"}, {"phase": "Succeeded"}
    # Straight to Running: nothing left to the clock.
    assert timing_writes([running, done]) == (0, [])
    # Pending once the fold ran out (3 s, shown as 2 by seconds), one write after the verdict.
    late = _status("Pending", start=start, initialized="2026-01-01T12:00:02Z")
    assert timing_writes([late, running, done, {"phase": "Succeeded", "x": 1}]) == (2, [])
    # Pending that says why its pods wait is written at once, by design.
    why = _status("Pending", start=start, initialized=start, reason="Unschedulable")
    assert timing_writes([why, running, done]) == (1, [])


def test_writes_that_break_the_rules_are_said() -> None:
    start = "2026-01-01T12:00:00Z"
    early = _status("Pending", start=start, initialized="2026-01-01T12:00:01Z")
    count, broken = timing_writes([early, {"phase": "Succeeded"}])
    assert count == 0 and broken[0].startswith("Pending written before the fold ran out")
    after = [{"phase": "Succeeded", "n": n} for n in range(3)]
    assert timing_writes(after) == (1, ["2 writes after the verdict, not one"])
