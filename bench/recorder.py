"""When each pod appeared and finished and when each job succeeded, as a watcher sees them.

A list+watch of the benchmark namespace (the operator's own informer class, over a transport
without a rate limit), stamping every change with this machine's wall clock; the operators'
own timestamps (creationTimestamp) have a resolution of one second, too coarse at hundreds of
pods a second.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from t9kjobs.kube.informer import Informer
from t9kjobs.kube.resources import Resource
from t9kjobs.kube.transport import Transport
from t9kjobs.vocabulary import Obj

__all__ = ["POD", "Recorder", "Timeline"]

POD = Resource("", "v1", "pods", "Pod")


@dataclass
class Timeline:
    """Unix times by object name."""

    pod_created: dict[str, float] = field(default_factory=dict)
    pod_finished: dict[str, float] = field(default_factory=dict)
    pod_job: dict[str, str] = field(default_factory=dict)
    job_created: dict[str, float] = field(default_factory=dict)
    job_succeeded: dict[str, float] = field(default_factory=dict)
    job_failed: dict[str, float] = field(default_factory=dict)
    pod_events: int = 0  # every change of a pod the watch delivered
    # Per job, what each change of it after its creation said (the operator's status writes).
    job_writes: dict[str, list[str]] = field(default_factory=dict)


class Recorder:
    """Fills a Timeline from watches of pods and, when given, of the jobs' resource."""

    def __init__(
        self,
        transport: Transport,
        namespace: str,
        job_label: str,
        jobs: Resource | None = None,
        outcome: Callable[[Obj], str | None] = lambda _: None,
        label: Callable[[Obj], str] = lambda _: "",
    ) -> None:
        self.timeline = Timeline()
        self._job_label = job_label
        self._outcome = outcome
        self._label = label
        self._lock = threading.Lock()
        self._informers = [Informer(transport, POD, self._on_pod, namespace=namespace)]
        if jobs is not None:
            self._informers.append(Informer(transport, jobs, self._on_job, namespace=namespace))

    def _on_pod(self, event: str, obj: Obj) -> None:
        now = time.time()
        meta = obj["metadata"]
        name = meta["name"]
        with self._lock:
            t = self.timeline
            t.pod_events += 1
            t.pod_created.setdefault(name, now)
            job = (meta.get("labels") or {}).get(self._job_label)
            if job:
                t.pod_job[name] = job
            if (obj.get("status") or {}).get("phase") in ("Succeeded", "Failed"):
                t.pod_finished.setdefault(name, now)

    def _on_job(self, event: str, obj: Obj) -> None:
        now = time.time()
        name = obj["metadata"]["name"]
        outcome = self._outcome(obj)
        with self._lock:
            t = self.timeline
            t.job_created.setdefault(name, now)
            if event == "MODIFIED":
                t.job_writes.setdefault(name, []).append(self._label(obj))
            if outcome == "Succeeded":
                t.job_succeeded.setdefault(name, now)
            elif outcome == "Failed":
                t.job_failed.setdefault(name, now)

    def start(self, timeout: float = 60) -> None:
        for informer in self._informers:
            informer.start()
        for informer in self._informers:
            if not informer.synced.wait(timeout):
                raise TimeoutError(f"the watch of {informer.resource.plural} did not sync")

    def stop(self) -> None:
        for informer in self._informers:
            informer.stop()

    def snapshot(self) -> Timeline:
        """A copy of the timeline: the watches may still be filling it (an operator stopped at
        its time limit is still creating pods while the figures are computed)."""
        with self._lock:
            t = self.timeline
            return Timeline(
                dict(t.pod_created),
                dict(t.pod_finished),
                dict(t.pod_job),
                dict(t.job_created),
                dict(t.job_succeeded),
                dict(t.job_failed),
                t.pod_events,
                {k: list(v) for k, v in t.job_writes.items()},
            )

    def counts(self) -> tuple[int, int, int, int]:
        """(pods seen, pods finished, jobs succeeded, jobs failed)."""
        with self._lock:
            t = self.timeline
            return (
                len(t.pod_created),
                len(t.pod_finished),
                len(t.job_succeeded),
                len(t.job_failed),
            )
