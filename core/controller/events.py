"""Events about jobs, posted by one background thread.

An Event is for people (`kubectl describe`), never for the controller: a reconcile must not wait
for one, and a lost one is worth a log line, not a retry. So the reconcile worker only queues it
(with the time it happened) and goes on with the next job; a single thread posts the queue in
order, as client-go's event broadcaster does. The queue is bounded: when the API server cannot
keep up, new Events are dropped and logged rather than held in memory.
"""

from __future__ import annotations

import logging
import queue
import threading
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from t9kjobs.controller.transport import Transport
from t9kjobs.planner import Event
from t9kjobs.planner.conditions import rfc3339

__all__ = ["EventRecorder", "event_body"]

Obj = dict[str, Any]
COMPONENT = "t9k-jobs"

log = logging.getLogger("t9kjobs.events")


def event_body(job: Obj, event: Event, identity: str, now: datetime) -> Obj:
    """The core/v1 Event about `job` (the job object as the API server returned it)."""
    meta = job["metadata"]
    stamp = rfc3339(now)
    return {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"generateName": f"{meta['name']}.", "namespace": meta["namespace"]},
        "involvedObject": {
            "apiVersion": job.get("apiVersion"),
            "kind": job.get("kind"),
            "name": meta["name"],
            "namespace": meta["namespace"],
            "uid": meta.get("uid"),
        },
        "reason": event.reason,
        "message": event.message,
        "type": event.type,
        "source": {"component": COMPONENT},
        "reportingComponent": COMPONENT,
        "reportingInstance": identity,
        "firstTimestamp": stamp,
        "lastTimestamp": stamp,
        "count": 1,
    }


class EventRecorder:
    """`record` queues an Event; the recorder's thread posts it. `close` posts what is queued
    (for at most `timeout` seconds) and stops the thread."""

    def __init__(
        self,
        transport: Transport,
        identity: str = COMPONENT,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
        capacity: int = 1000,
    ) -> None:
        self.transport = transport
        self.identity = identity
        self.clock = clock
        self._pending: queue.Queue[Obj | None] = queue.Queue(maxsize=capacity)
        self._thread = threading.Thread(target=self._post_all, name="events", daemon=True)
        self._thread.start()

    def record(self, job: Obj, event: Event) -> None:
        body = event_body(job, event, self.identity, self.clock())
        try:
            self._pending.put_nowait(body)
        except queue.Full:
            log.warning(
                "event %s dropped: %d events wait to be posted",
                event.reason,
                self._pending.maxsize,
                extra=_job_of(body),
            )

    def close(self, timeout: float = 5.0) -> None:
        try:
            self._pending.put(None, timeout=timeout)
        except queue.Full:
            return  # the thread is a daemon: what is still queued dies with the process
        self._thread.join(timeout)

    def _post_all(self) -> None:
        while (body := self._pending.get()) is not None:
            namespace = body["metadata"]["namespace"]
            try:
                self.transport.request("POST", f"/api/v1/namespaces/{namespace}/events", body=body)
            except Exception as exc:  # refused or unreachable: the thread outlives any Event
                log.warning("event %s not recorded: %s", body["reason"], exc, extra=_job_of(body))


def _job_of(body: Obj) -> dict[str, str]:
    job = body["involvedObject"]
    return {"kind": str(job["kind"]), "job": f"{job['namespace']}/{job['name']}"}
