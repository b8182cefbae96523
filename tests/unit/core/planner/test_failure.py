"""The status of a job that cannot go on (`t9kjobs.planner.failure`), without a controller:
failed once with its reason, degraded while a cause lasts, a finished job left alone, messages
cut to what an Event can hold, a stored status that does not parse read as an empty one."""

from __future__ import annotations

from t9kjobs.models import JobStatus
from t9kjobs.planner.failure import (
    MESSAGE_LIMIT,
    cut,
    degraded_status,
    failed_status,
    stored_status,
)

NOW = "2026-01-01T12:00:00Z"


def test_a_failed_status_says_why_and_when() -> None:
    running = JobStatus(phase="Running")
    failed = failed_status(running, "ChildRejected", "the API server refused Pod a", NOW)
    assert failed is not None
    assert (failed.phase, failed.completion_time) == ("Failed", NOW)
    condition = failed.condition("Failed")
    assert condition is not None
    assert (condition.status, condition.reason, condition.message) == (
        "True",
        "ChildRejected",
        "the API server refused Pod a",
    )
    assert running.phase == "Running" and running.condition("Failed") is None  # a copy


def test_a_finished_job_is_neither_failed_nor_degraded_again() -> None:
    for phase in ("Succeeded", "Failed"):
        done = JobStatus(phase=phase)
        assert failed_status(done, "OperatorError", "boom", NOW) is None
        assert degraded_status(done, "ApiError", "boom", NOW) is None


def test_a_degraded_status_is_new_only_when_something_changed() -> None:
    pending = JobStatus(phase="Pending")
    degraded = degraded_status(pending, "ApiError", "etcd leader changed", NOW)
    assert degraded is not None and degraded.phase == "Pending"
    condition = degraded.condition("Degraded")
    assert condition is not None
    assert (condition.status, condition.reason, condition.message) == (
        "True",
        "ApiError",
        "etcd leader changed",
    )
    assert pending.condition("Degraded") is None  # a copy
    assert degraded_status(degraded, "ApiError", "etcd leader changed", NOW) is None
    again = degraded_status(degraded, "ApiError", "etcd is back but slow", NOW)
    assert again is not None and again.condition("Degraded").message == "etcd is back but slow"  # type: ignore[union-attr]


def test_messages_are_cut_to_what_an_event_holds() -> None:
    assert cut("short") == "short"
    exact = "x" * MESSAGE_LIMIT
    assert cut(exact) == exact
    long = "y" * (MESSAGE_LIMIT + 1)
    assert cut(long) == "y" * (MESSAGE_LIMIT - 3) + "..."
    assert len(cut(long)) == MESSAGE_LIMIT
    assert len(cut("z" * 5000)) == 1000  # an Event's message is at most 1 KiB
    failed = failed_status(JobStatus(), "OperatorError", long, NOW)
    assert failed is not None and failed.condition("Failed").message == cut(long)  # type: ignore[union-attr]
    degraded = degraded_status(JobStatus(), "ApiError", long, NOW)
    assert degraded is not None and degraded.condition("Degraded").message == cut(long)  # type: ignore[union-attr]


def test_the_stored_status_or_an_empty_one() -> None:
    assert stored_status({"status": {"phase": "Running"}}, JobStatus).phase == "Running"
    assert stored_status({}, JobStatus) == JobStatus()
    assert stored_status({"status": None}, JobStatus) == JobStatus()
    assert stored_status({"status": {"phase": "Sleeping"}}, JobStatus) == JobStatus()
