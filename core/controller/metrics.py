"""Prometheus metrics of the operator, in a registry of its own (tests can run several).

The restarts and recoveries (`t9kjobs_restarts_total`, `t9kjobs_recovery_seconds`, the steps
they lost, `t9kjobs_steps_lost_total`) are counted from each job's `status.restartHistory` as a
successful status write changes it (`count_recoveries`, called by the reconciler): a write that
fails counts nothing, so a retried reconcile counts its restart once. A force deletion is
counted by the request that made it (`Applier.forced`); the jobs by phase, and the Stalled
ones, from the cache at scrape time.
"""

from __future__ import annotations

import gc
import time
from collections import Counter as Tally
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from t9kjobs.models import FINISHED_PHASES
from t9kjobs.planner.history import new_and_recovered
from t9kjobs.vocabulary import Obj

__all__ = ["RECOVERY_BUCKETS", "Metrics"]

# From a pod replaced at once to a job that waited two hours for room (seconds).
RECOVERY_BUCKETS = (5.0, 10.0, 20.0, 30.0, 60.0, 120.0, 300.0, 600.0, 1800.0, 3600.0, 7200.0)


def _stalled(status: Obj) -> bool:
    """Whether a job's status says it is Stalled (and it has not finished)."""
    if status.get("phase") in FINISHED_PHASES:
        return False
    conditions = status.get("conditions") or []
    return any(c.get("type") == "Stalled" and c.get("status") == "True" for c in conditions)


class _JobsByPhase(Collector):
    """`t9kjobs_jobs{kind,phase}` and `t9kjobs_stalled_jobs{kind}`, counted from the informer
    stores (each job as (kind, object)) at scrape time."""

    def __init__(self, source: Callable[[], Iterable[tuple[str, Obj]]]) -> None:
        self._source = source

    def collect(self) -> Iterator[GaugeMetricFamily]:
        phases: Tally[tuple[str, str]] = Tally()
        stalled: Tally[str] = Tally()
        for kind, job in self._source():
            status = job.get("status") or {}
            phases[(kind, str(status.get("phase") or "Pending"))] += 1
            stalled[kind] += _stalled(status)
        family = GaugeMetricFamily(
            "t9kjobs_jobs", "Jobs by kind and phase.", labels=["kind", "phase"]
        )
        for (kind, phase), n in sorted(phases.items()):
            family.add_metric([kind, phase], n)
        yield family
        family = GaugeMetricFamily(
            "t9kjobs_stalled_jobs",
            "Jobs whose condition Stalled is True (and not finished), by kind.",
            labels=["kind"],
        )
        for kind, n in sorted(stalled.items()):
            family.add_metric([kind], n)
        yield family


class Metrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        r = self.registry
        self.reconciles = Counter(
            "t9kjobs_reconciles", "Reconciles by kind and result.", ["kind", "result"], registry=r
        )
        self.reconcile_seconds = Histogram(
            "t9kjobs_reconcile_duration_seconds",
            "Reconcile duration by kind.",
            ["kind"],
            registry=r,
        )
        self.reconcile_errors = Counter(
            "t9kjobs_reconcile_errors",
            "Failed reconciles by kind and error (conflict, http_<code>, or the exception).",
            ["kind", "error"],
            registry=r,
        )
        self.queue_depth = Gauge(
            "t9kjobs_workqueue_depth", "Keys waiting in the work queue.", registry=r
        )
        self.api_requests = Counter(
            "t9kjobs_api_requests",
            "Requests to the API server by verb, resource and status code.",
            ["verb", "resource", "code"],
            registry=r,
        )
        self.kinds_served = Gauge(
            "t9kjobs_kind_served",
            "1 when the kind's CRD is installed and served, 0 when it is skipped.",
            ["kind"],
            registry=r,
        )
        self.is_leader = Gauge("t9kjobs_leader", "1 while this replica is the leader.", registry=r)
        self.lost_node_detection = Gauge(
            "t9kjobs_lost_node_detection",
            "1 while nodes are watched for lost pods (--lost-node-seconds), 0 when off or refused.",
            registry=r,
        )
        self.gc_seconds = Counter(
            "t9kjobs_gc",
            "Seconds spent in Python's cyclic garbage collector, by generation.",
            ["generation"],
            registry=r,
            unit="seconds",
        )
        self.restarts = Counter(
            "t9kjobs_restarts",
            "Restarts the engine performed (jobs with spec.recoveryPolicy), by kind, failure"
            " reason, action and budget charged.",
            ["kind", "reason", "action", "budget"],
            registry=r,
        )
        self.recovery_seconds = Histogram(
            "t9kjobs_recovery_seconds",
            "Seconds from a failure to every replica of its job Running or Succeeded again,"
            " by kind and failure reason.",
            ["kind", "reason"],
            buckets=RECOVERY_BUCKETS,
            registry=r,
        )
        self.steps_lost = Counter(
            "t9kjobs_steps_lost",
            "Training steps done again after the engine's restarts (from the checkpoint resumed"
            " from, else from step 0), by kind.",
            ["kind"],
            registry=r,
        )
        self.pods_force_deleted = Counter(
            "t9kjobs_pods_force_deleted",
            "Pods force-deleted on a lost node, by reason: NodeLost (a live pod, the job's"
            " failure), TerminatingOnLostNode (one already Terminating there).",
            ["reason"],
            registry=r,
        )
        self._gc_started = 0.0

    def _on_gc(self, phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            self._gc_started = time.perf_counter()
        elif self._gc_started:
            elapsed = time.perf_counter() - self._gc_started
            self.gc_seconds.labels(str(info.get("generation", ""))).inc(elapsed)
            self._gc_started = 0.0

    def time_gc(self) -> None:
        """Count the collector's time into `t9kjobs_gc_seconds_total` until `untime_gc`."""
        if self._on_gc not in gc.callbacks:
            gc.callbacks.append(self._on_gc)

    def untime_gc(self) -> None:
        if self._on_gc in gc.callbacks:
            gc.callbacks.remove(self._on_gc)

    def watch_jobs(self, source: Callable[[], Iterable[tuple[str, Obj]]]) -> None:
        """Count the jobs `source` gives (kind, the job as cached) at each scrape."""
        self.registry.register(_JobsByPhase(source))

    def count_recoveries(self, kind: str, before: Obj, after: Obj) -> None:
        """Count the restart history entries a status write added (`after`, written over
        `before`), and the recoveries it closed."""
        added, recovered = new_and_recovered(
            before.get("restartHistory") or [], after.get("restartHistory") or []
        )
        for entry in added:
            labels = (entry.get("reason"), entry.get("action"), entry.get("budget"))
            self.restarts.labels(kind, *map(str, labels)).inc()
            lost = entry.get("stepsLost")
            if isinstance(lost, int) and lost > 0:
                self.steps_lost.labels(kind).inc(lost)
        for entry, seconds in recovered:
            self.recovery_seconds.labels(kind, str(entry.get("reason"))).observe(seconds)

    def api_request(self, verb: str, path: str, code: int) -> None:
        self.api_requests.labels(verb, _resource_of(path), str(code)).inc()


def _resource_of(path: str) -> str:
    """`/api/v1/namespaces/ns/pods/x/status` -> `pods/status`: bounded label values."""
    parts = [p for p in path.split("/") if p]
    if "namespaces" in parts:
        i = parts.index("namespaces")
        parts = parts[i + 2 :] if len(parts) > i + 2 else ["namespaces"]
    else:
        parts = parts[2:] if parts and parts[0] == "api" else parts[3:]
    if not parts:
        return "discovery"
    return parts[0] + (f"/{parts[2]}" if len(parts) > 2 else "")
