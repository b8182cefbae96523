"""Events are posted by the recorder's thread, in order, and a refused one stops nothing."""

from __future__ import annotations

import logging
import threading
from datetime import UTC, datetime
from typing import Any

import pytest

from t9kjobs.controller.events import EventRecorder, event_body
from t9kjobs.kube.transport import ApiError
from t9kjobs.planner import Event
from tests.unit.core.kube.fake_transport import FakeTransport

NOW = datetime(2026, 1, 1, 12, 0, 0, tzinfo=UTC)
JOB = {
    "apiVersion": "batch.tensorstack.dev/v1beta1",
    "kind": "PyTorchTrainingJob",
    "metadata": {"name": "mnist", "namespace": "team-a", "uid": "u-1"},
}


def test_the_event_names_the_job_and_when() -> None:
    body = event_body(JOB, Event("Normal", "PodsCreated", "created 4 pods"), "op-1", NOW)
    assert body["involvedObject"] == {
        "apiVersion": "batch.tensorstack.dev/v1beta1",
        "kind": "PyTorchTrainingJob",
        "name": "mnist",
        "namespace": "team-a",
        "uid": "u-1",
    }
    assert (body["reason"], body["message"], body["type"]) == (
        "PodsCreated",
        "created 4 pods",
        "Normal",
    )
    assert body["metadata"] == {"generateName": "mnist.", "namespace": "team-a"}
    assert body["firstTimestamp"] == body["lastTimestamp"] == "2026-01-01T12:00:00Z"
    assert body["reportingInstance"] == "op-1"


def test_events_are_posted_in_order_off_the_caller_thread() -> None:
    release = threading.Event()
    fake = FakeTransport(before=lambda *_: release.wait(5))
    recorder = EventRecorder(fake.as_transport(), clock=lambda: NOW)
    for reason in ("First", "Second", "Third"):
        recorder.record(JOB, Event("Normal", reason, ""))  # returns while a post is held
    while not fake.requests:
        threading.Event().wait(0.01)
    assert [b["reason"] for b in fake.posted("events")] == ["First"]  # one at a time
    release.set()
    recorder.close()
    assert [b["reason"] for b in fake.posted("events")] == ["First", "Second", "Third"]
    assert all(p == "/api/v1/namespaces/team-a/events" for _, p, _ in fake.requests)


def test_a_refused_event_is_logged_and_the_next_is_posted(caplog: Any) -> None:
    def refuse_first(method: str, path: str, body: Any) -> None:
        if body["reason"] == "Refused":
            raise ApiError(403, {"message": "events is forbidden"})

    fake = FakeTransport(before=refuse_first)
    recorder = EventRecorder(fake.as_transport())
    with caplog.at_level(logging.WARNING, logger="t9kjobs.events"):
        recorder.record(JOB, Event("Warning", "Refused", ""))
        recorder.record(JOB, Event("Normal", "Posted", ""))
        recorder.close()
    assert [b["reason"] for b in fake.posted("events")] == ["Refused", "Posted"]
    assert "event Refused not recorded: HTTP 403: events is forbidden" in caplog.text


@pytest.mark.parametrize("capacity", [1, 2])
def test_a_full_queue_drops_new_events_with_a_log_line(capacity: int, caplog: Any) -> None:
    release = threading.Event()
    fake = FakeTransport(before=lambda *_: release.wait(5))
    recorder = EventRecorder(fake.as_transport(), capacity=capacity, threads=1)
    recorder.record(JOB, Event("Normal", "Held", ""))  # taken by the thread, held
    while not fake.requests:
        threading.Event().wait(0.01)
    with caplog.at_level(logging.WARNING, logger="t9kjobs.events"):
        for i in range(capacity + 1):
            recorder.record(JOB, Event("Normal", f"Queued{i}", ""))
    release.set()
    recorder.close()
    reasons = [b["reason"] for b in fake.posted("events")]
    assert reasons == ["Held", *(f"Queued{i}" for i in range(capacity))]
    assert f"event Queued{capacity} dropped" in caplog.text


def test_a_slow_job_does_not_hold_back_the_events_of_others() -> None:
    release = threading.Event()

    def hold(method: str, path: str, body: Any) -> None:
        if body["involvedObject"]["uid"] == "slow":
            release.wait(5)

    fake = FakeTransport(before=hold)
    recorder = EventRecorder(fake.as_transport(), threads=4)
    jobs = [{**JOB, "metadata": {**JOB["metadata"], "uid": f"u-{i}"}} for i in range(8)]
    slow = {**JOB, "metadata": {**JOB["metadata"], "uid": "slow"}}
    recorder.record(slow, Event("Normal", "Held", ""))
    for job in jobs:
        recorder.record(job, Event("Normal", "Posted", ""))
    # Every job whose events share no thread with the held one is posted meanwhile.
    started = threading.Event()
    for _ in range(200):
        if sum(b["reason"] == "Posted" for b in fake.posted("events")) >= 4:
            started.set()
            break
        threading.Event().wait(0.01)
    release.set()
    recorder.close()
    assert started.is_set(), [b["reason"] for b in fake.posted("events")]
    assert len(fake.posted("events")) == 9
