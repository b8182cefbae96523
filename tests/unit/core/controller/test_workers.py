"""A key that keeps failing does not flood the log: one traceback, then one line per retry,
and every failure counted in a metric."""

from __future__ import annotations

import logging
import threading

import pytest

from t9kjobs.controller.metrics import Metrics
from t9kjobs.controller.result import DONE, Result
from t9kjobs.controller.workers import work
from t9kjobs.controller.workqueue import WorkQueue
from t9kjobs.kube.transport import ApiError
from t9kjobs.vocabulary import JobKey

KEY = ("GenericJob", "ns", "broken")


class Failing:
    """A reconciler that fails `times` times with `error`, then shuts the queue down."""

    def __init__(self, queue: WorkQueue[JobKey], error: Exception, times: int) -> None:
        self.queue, self.error, self.left = queue, error, times

    def reconcile(self, key: JobKey) -> Result:
        self.left -= 1
        if self.left < 0:
            self.queue.shutdown()
            return DONE
        raise self.error


def run(error: Exception, times: int) -> Metrics:
    queue: WorkQueue[JobKey] = WorkQueue(base_delay=0.001, max_delay=0.01)
    metrics = Metrics()
    queue.add(KEY)
    worker = threading.Thread(
        target=work,
        args=(queue, Failing(queue, error, times), metrics),  # type: ignore[arg-type]
    )
    worker.start()
    worker.join(10)
    assert not worker.is_alive()
    return metrics


def errors(metrics: Metrics, label: str) -> float:
    return float(metrics.reconcile_errors.labels("GenericJob", label)._value.get())


def test_one_traceback_then_one_line_per_retry(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="t9kjobs.operator"):
        metrics = run(KeyError("spec"), times=8)
    records = [r for r in caplog.records if r.name == "t9kjobs.operator"]
    assert len(records) == 8
    assert [r.exc_info is not None for r in records] == [True] + [False] * 7
    assert records[0].getMessage().startswith("reconcile failed (next try in 0.0s): 'spec'")
    assert records[7].getMessage() == (
        "reconcile failed again (8 in a row, next try in 0.0s): 'spec'"
    )
    assert all(r.job == "ns/broken" for r in records)  # type: ignore[attr-defined]
    assert "\n" not in "".join(r.getMessage() for r in records)
    assert errors(metrics, "KeyError") == 8


def test_http_errors_have_no_traceback_and_conflicts_no_line(
    caplog: pytest.LogCaptureFixture,
) -> None:
    with caplog.at_level(logging.WARNING, logger="t9kjobs.operator"):
        metrics = run(ApiError(503, {"message": "etcd is down"}), times=3)
        conflicts = run(ApiError(409, {"message": "the object has been modified"}), times=2)
    lines = [r for r in caplog.records if r.name == "t9kjobs.operator"]
    assert [bool(r.exc_info) for r in lines] == [False] * 3
    assert lines[0].getMessage() == "reconcile failed (next try in 0.0s): HTTP 503: etcd is down"
    assert errors(metrics, "http_503") == 3
    assert errors(conflicts, "conflict") == 2
