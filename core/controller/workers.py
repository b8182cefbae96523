"""A reconcile worker: take a job key from the queue, reconcile it, retry it with backoff when
the reconcile fails, until the queue shuts down.

A key that keeps failing must not flood the log: its first failure is logged in full (with the
traceback of an unexpected error), every retry after that with one line (how many failures in a
row, when the next try is), and every failure is counted in
`t9kjobs_reconcile_errors_total{kind,error}`. A write conflict (409: the reconcile ran on data
that changed meanwhile) is normal and counted, not logged.
"""

from __future__ import annotations

import logging
import time

from t9kjobs.controller.metrics import Metrics
from t9kjobs.controller.reconciler import Reconciler
from t9kjobs.controller.workqueue import WorkQueue
from t9kjobs.kube.transport import ApiError
from t9kjobs.vocabulary import JobKey

__all__ = ["error_label", "work"]

log = logging.getLogger("t9kjobs.operator")


def error_label(exc: Exception) -> str:
    """A bounded label for the error metric: `conflict`, `http_503`, or the exception class."""
    if isinstance(exc, ApiError):
        return "conflict" if exc.status == 409 else f"http_{exc.status}"
    return type(exc).__name__


def work(queue: WorkQueue[JobKey], reconciler: Reconciler, metrics: Metrics) -> None:
    while (key := queue.get()) is not None:
        metrics.queue_depth.set(len(queue))
        kind = key[0]
        started = time.monotonic()
        try:
            outcome = reconciler.reconcile(key)
        except Exception as exc:
            result = "conflict" if isinstance(exc, ApiError) and exc.status == 409 else "error"
            metrics.reconcile_errors.labels(kind, error_label(exc)).inc()
            failures = queue.failures(key)
            delay = queue.add_rate_limited(key)
            if result == "error":
                _log_failure(key, exc, failures, delay)
        else:
            result = "ok"
            queue.forget(key)
            if outcome.at_once:
                queue.add(key)  # taken again once this worker is done with it
            elif outcome.requeue_after is not None:
                queue.add_after(key, outcome.requeue_after + 0.5)
        finally:
            queue.done(key)
            metrics.reconciles.labels(kind, result).inc()
            metrics.reconcile_seconds.labels(kind).observe(time.monotonic() - started)


def _log_failure(key: JobKey, exc: Exception, failures: int, delay: float) -> None:
    where = {"kind": key[0], "job": f"{key[1]}/{key[2]}"}
    if failures == 0:
        # HTTP errors say all in their message; anything else is a bug, with its traceback.
        log.warning(
            "reconcile failed (next try in %.1fs): %s",
            delay,
            exc,
            exc_info=not isinstance(exc, ApiError),
            extra=where,
        )
    else:
        log.warning(
            "reconcile failed again (%d in a row, next try in %.1fs): %s",
            failures + 1,
            delay,
            exc,
            extra=where,
        )
