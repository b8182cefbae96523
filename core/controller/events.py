"""Events about jobs, posted by background threads.

An Event is for people (`kubectl describe`), never for the controller: a reconcile must not wait
for one, and a lost one is worth a log line, not a retry. So the reconcile worker only queues it
(with the time it happened) and goes on with the next job, as client-go's event broadcaster
lets it. A few threads post the queues: one thread cannot keep up with 500 jobs created at once
(an Event is a round trip), and the events of one job always go to the same thread, so they are
posted in the order they happened. The queues are bounded: when the API server cannot keep up,
new Events are dropped and logged rather than held in memory.
"""

from __future__ import annotations

import contextlib
import logging
import queue
import threading
import time
import zlib
from collections.abc import Callable
from datetime import UTC, datetime

from t9kjobs.kube.transport import Transport
from t9kjobs.planner import Event
from t9kjobs.planner.conditions import rfc3339
from t9kjobs.vocabulary import Obj

__all__ = ["EventRecorder", "event_body"]

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
    """`record` queues an Event; a recorder thread posts it. `close` posts what is queued (for
    at most `timeout` seconds) and stops the threads."""

    def __init__(
        self,
        transport: Transport,
        identity: str = COMPONENT,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
        capacity: int = 1000,
        threads: int = 4,
    ) -> None:
        self.transport = transport
        self.identity = identity
        self.clock = clock
        self._queues: list[queue.Queue[Obj | None]] = [
            queue.Queue(maxsize=max(1, capacity // threads)) for _ in range(threads)
        ]
        self._threads = [
            threading.Thread(target=self._post_all, args=(q,), name=f"events-{i}", daemon=True)
            for i, q in enumerate(self._queues)
        ]
        for thread in self._threads:
            thread.start()

    def record(self, job: Obj, event: Event) -> None:
        body = event_body(job, event, self.identity, self.clock())
        # One job, one queue: its events keep their order.
        pending = self._queues[
            zlib.crc32(str(job["metadata"].get("uid")).encode()) % len(self._queues)
        ]
        try:
            pending.put_nowait(body)
        except queue.Full:
            log.warning(
                "event %s dropped: %d events wait to be posted",
                event.reason,
                pending.maxsize,
                extra=_job_of(body),
            )

    def post(self, job: Obj, event: Event) -> None:
        """Post an Event now, raising if it is refused: for an Event that must exist before
        the status write that reports what it says (a job's verdict)."""
        self._send(event_body(job, event, self.identity, self.clock()))

    def close(self, timeout: float = 5.0) -> None:
        deadline = time.monotonic() + timeout
        for pending in self._queues:
            # The threads are daemons: what is still queued at the deadline dies with them.
            with contextlib.suppress(queue.Full):
                pending.put(None, timeout=max(0.0, deadline - time.monotonic()))
        for thread in self._threads:
            thread.join(max(0.0, deadline - time.monotonic()))

    def _post_all(self, pending: queue.Queue[Obj | None]) -> None:
        while (body := pending.get()) is not None:
            try:
                self._send(body)
            except Exception as exc:  # refused or unreachable: the thread outlives any Event
                log.warning("event %s not recorded: %s", body["reason"], exc, extra=_job_of(body))

    def _send(self, body: Obj) -> None:
        namespace = body["metadata"]["namespace"]
        self.transport.request("POST", f"/api/v1/namespaces/{namespace}/events", body=body)


def _job_of(body: Obj) -> dict[str, str]:
    job = body["involvedObject"]
    return {"kind": str(job["kind"]), "job": f"{job['namespace']}/{job['name']}"}
