"""The job controller: the informers' events become work for the reconciler, and workers do it.

* a new job, or a changed spec, is reconciled at once; a change of a job's status or of a child
  is batched (`child_batch_period`): the pods of a job that start or end together cost one
  reconcile and one status write; a pod that has just finished may decide its job, so its job
  is queued sooner (`finished_pod_batch_period`) and ahead of jobs still to start;
* every job in flight is queued again every `resync_period` (jittered), so a missed event
  costs at most that long; left out of the sweep are a finished job whose replicas have all
  ended (`in_flight`): nothing is left to do for it, and 10,000 finished jobs cost a sweep
  3-4 CPU seconds (docs/benchmarks.md); and a job whose cache is as a reconcile that had
  nothing to do found it (`Reconciler.unchanged`): a missed event changed its cache.
"""

from __future__ import annotations

import logging
import random
import threading

from t9kjobs.controller.metrics import Metrics
from t9kjobs.controller.options import Options
from t9kjobs.controller.reconciler import Reconciler
from t9kjobs.controller.threads import Supervisor
from t9kjobs.controller.workers import work
from t9kjobs.controller.workqueue import WorkQueue
from t9kjobs.models import API_GROUP, FINISHED_PHASES
from t9kjobs.vocabulary import JobKey, Obj

__all__ = ["JobController", "in_flight"]

log = logging.getLogger("t9kjobs.operator")

ACTIVE_COUNTS = ("creating", "pending", "running", "unknown")


def in_flight(job: Obj) -> bool:
    """Whether the job, as its status says, may still have work for a reconcile: it has not
    finished, or a replica of it has not ended yet (a finished job follows its replicas to
    their end). A finished job's cleanup ran when it finished, and a failed deletion is
    retried by the work queue; a new pod, or a change of one still active, queues it."""
    status = job.get("status") or {}
    if status.get("phase") not in FINISHED_PHASES:
        return True
    aggregate = status.get("aggregate") or {}
    return any(aggregate.get(count) for count in ACTIVE_COUNTS)


class JobController:
    def __init__(self, reconciler: Reconciler, options: Options, metrics: Metrics) -> None:
        """`reconciler` does the work (and holds the cache the events are judged by);
        `options` says how events are batched, how many workers, how often the resync."""
        self.reconciler = reconciler
        self.options = options
        self.metrics = metrics
        self.queue: WorkQueue[JobKey] = WorkQueue()
        self._generations: dict[JobKey, int | None] = {}  # the last seen, by the job informers

    # -- events -> queue ---------------------------------------------------------------------

    def on_job(self, event: str, obj: Obj) -> None:
        """A new job or a changed spec is reconciled at once. A change that leaves the spec's
        generation as it was (the status: another writer's, or our own write whose echo came
        before its answer) is batched like a child's: reconciling on it at once would write the
        status again for every pod that moved meanwhile."""
        key = JobKey.of(obj)
        if event == "DELETED":
            self._generations.pop(key, None)
            self.reconciler.forget(key)
            return
        generation = obj["metadata"].get("generation")
        if self._generations.get(key) == generation:
            self.queue.add_after(key, self.options.child_batch_period)
        else:
            self._generations[key] = generation
            self.queue.add(key)

    def on_child(self, event: str, obj: Obj) -> None:
        meta = obj["metadata"]
        finished = (
            obj.get("kind") == "Pod"
            and event != "DELETED"
            and (obj.get("status") or {}).get("phase") in ("Succeeded", "Failed")
        )
        delay = (
            self.options.finished_pod_batch_period if finished else self.options.child_batch_period
        )
        served = self.reconciler.cache.job_resources
        for ref in meta.get("ownerReferences") or []:
            if (
                ref.get("controller")
                and ref.get("kind") in served
                and str(ref.get("apiVersion", "")).startswith(API_GROUP + "/")
            ):
                key = JobKey(ref["kind"], meta["namespace"], ref["name"])
                if (finished or event == "DELETED") and self._done_with(key):
                    continue
                # A finished pod may decide its job: ahead of the jobs still to start.
                self.queue.add_after(key, delay, urgent=finished)

    def _done_with(self, key: JobKey) -> bool:
        """Whether the job has finished and its replicas have all ended: a child of it that
        goes away, or a pod of it that changes once ended, leaves it nothing to do (a finished
        job's plan only deletes what still exists and follows the replicas still active).
        kube-controller-manager's pod collector, once 12,500 pods have ended, marks and then
        deletes thousands of them in a long run: two events a pod, no work."""
        job = self.reconciler.cache.job(key)
        return job is not None and not in_flight(job)

    # -- running -----------------------------------------------------------------------------

    def start(self, supervisor: Supervisor) -> None:
        """The workers, and the resync when it is on; each a supervised thread."""
        for i in range(self.options.workers):
            supervisor.spawn(f"worker-{i}", lambda: work(self.queue, self.reconciler, self.metrics))
        if self.options.resync_period > 0:
            supervisor.spawn("resync", lambda: self._resync(supervisor.stop))
        progress = self.reconciler.progress
        if progress is not None and progress.qps > 0:
            supervisor.spawn("progress", lambda: progress.run(supervisor.stop))

    def _resync(self, stop: threading.Event) -> None:
        """Every job in flight again every `resync_period` (+-10%, so replicas and restarts do
        not line up), spread over a tenth of the period rather than all at once."""
        period = self.options.resync_period
        while not stop.wait(period * random.uniform(0.9, 1.1)):
            queued, left = self.requeue_all(spread=period / 10, settled_too=False)
            log.info("resync: %d job(s) queued, %d unchanged or settled", queued, left)

    def requeue_all(self, spread: float = 0.0, settled_too: bool = True) -> tuple[int, int]:
        """Queue every job the stores hold, each after a random delay up to `spread`; with
        `settled_too` False, only those still `in_flight` and changed since a reconcile that
        had nothing to do. How many were queued, and how many left out."""
        queued = left = 0
        for kind, store in self.reconciler.cache.job_stores.items():
            for job in store.all():
                key = JobKey(kind, job["metadata"]["namespace"], job["metadata"]["name"])
                if not settled_too and (not in_flight(job) or self.reconciler.unchanged(key)):
                    left += 1
                    continue
                self.queue.add_after(key, random.uniform(0, spread))
                queued += 1
        return queued, left

    def stop(self) -> None:
        self.queue.shutdown()
