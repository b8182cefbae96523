"""A job another controller manages (`spec.managedBy`): the operator leaves it alone.

A Kubernetes Job names its controller in `spec.managedBy` so that another one (Kueue's
MultiKueue, most often) can take it over; every kind of ours has the field for the same
reason (`t9kjobs.models.job`). With any value but this operator's (unset, or
`batch.tensorstack.dev/t9k-jobs`) the job's pods, Services, PodGroups, Events and status are
that controller's: the plan creates, updates and deletes nothing, and never writes the status
(the reconciler writes none either, not even a failure: `t9kjobs.controller.reconciler`).

One value asks for one thing more. `kueue.x-k8s.io/multikueue` is how a job waits on
MultiKueue's manager cluster, and Kueue v0.17 dispatches a kind it does not know (its
external-framework adapter, `pkg/controller/admissionchecks/multikueue/externalframeworks`)
only by its Workload there, which is the job's own controller's to make: KEP-2349 ("Job Flow
for the Generic Adapter", step 2: "An external controller creates a Workload object for the
job"), and `multikueue/workload.go` finds the job by that Workload's controller
ownerReference. So with that value and a queue, the plan makes the job's Workload as a queued
job's (`t9kjobs.planner.queueing`), and no pod (the job runs on the worker cluster MultiKueue
picks, where its copy adopts the Workload MultiKueue copies there: `t9kjobs.planner.prebuilt`),
and never makes it `Finished` (MultiKueue finishes it from the worker's). Paused, it gives up
its place as any queued job does: its Workload is deleted, and MultiKueue deletes the worker's
copy with it.

Its status is the operator's only while no worker holds a copy, and MultiKueue's after:

* Not dispatched (its Workload names no `status.clusterName` and no admission check of it is
  `Ready`): `Queued`, its `Admitted` condition False with why, which is its REASON: Kueue's
  word while the manager's ClusterQueue holds it (`Queued`, `Inadmissible`), then
  `MultiKueue<State>` of its admission check (`MultiKueuePending`: no worker has admitted
  it yet, the check's message said) once quota is reserved here.
* Paused: `Paused`, as any paused job (its tasks shown Deleted).
* Dispatched: nothing is written. Kueue's external-framework adapter
  (`multikueue/externalframeworks/adapter.go`, `syncStatus`) copies the worker's whole
  `.status` over the job's as a merge patch whenever they differ, so a write here would be
  undone and fought over. For the same reason a status MultiKueue copied (a phase the
  operator does not write here: `Running`, `Restarting`...) is never overwritten while the
  job runs: a Workload the operator's cache reads late must not undo the worker's status.
  A job evicted from its worker keeps the status last copied until it is dispatched again.
"""

from __future__ import annotations

from typing import Any

from t9kjobs.models import MANAGED_BY_MULTIKUEUE, Job, JobStatus, Lifecycle
from t9kjobs.planner.conditions import set_condition, standing_reason
from t9kjobs.planner.desired import desired_pods
from t9kjobs.planner.queueing import queue_of, queued
from t9kjobs.planner.stopping import paused
from t9kjobs.planner.types import EngineHooks, Observed, Plan
from t9kjobs.planner.workloads import WORKLOAD, condition_of, workload_name, workload_objects
from t9kjobs.vocabulary import Obj

__all__ = ["dispatched", "left_alone"]

# The phases the operator writes on the manager: any other was copied from the worker.
_OURS = (None, "Queued", "Paused")


def dispatched(workload: Obj | None) -> bool:
    """Whether MultiKueue has given the job to a worker: its Workload names the worker
    (`status.clusterName`), or an admission check of it is `Ready`."""
    status = (workload or {}).get("status") or {}
    checks = status.get("admissionChecks") or []
    return bool(status.get("clusterName")) or any(c.get("state") == "Ready" for c in checks)


def left_alone(job: Job, observed: Observed, hooks: EngineHooks, manager: str, ts: str) -> Plan:
    """The Plan of a job `manager` manages at `ts`: nothing; or, where `manager` is
    MultiKueue, its Workload and its status until it is dispatched (the module's docstring)."""
    nothing = Plan(status=job.status, status_changed=False)
    if manager != MANAGED_BY_MULTIKUEUE or job.status.finished:
        return nothing
    name = workload_name(job)
    current = observed.get(WORKLOAD, name)
    life = job.spec.lifecycle()
    if life.run_mode.paused:
        gone = workload_objects([o for o in (current,) if o is not None])
        status = job.status.model_copy(deep=True)
        status.run_mode = life.run_mode.name
        changes = paused(status, observed, ts, gone)
        return _written(job.status, status, delete=changes.delete)
    if dispatched(current):
        return nothing  # the worker's status is copied here (the module's docstring)
    queue = queue_of(job, observed.kueue) or ""
    if (WORKLOAD, name) in observed.conflicts or WORKLOAD in observed.absent_kinds:
        return nothing
    if current is not None:
        return _written(job.status, _queued(job.status, current, queue, name, life, ts))
    pods = desired_pods(job, hooks, life, False, observed.absent_kinds)
    place = queued(job, pods, observed)
    if place is None or place.workload is None:
        return nothing  # no queue, or refused one: MultiKueue has nothing to dispatch
    # Its `Queued` status is the next reconcile's, once the Workload exists: a Workload the
    # API server refuses leaves no status saying that the job waits (the refusal is logged).
    return Plan(
        status=job.status,
        status_changed=False,
        create=(place.workload,),
        status_after_creations=True,
    )


def _written(before: JobStatus, status: JobStatus, **changes: Any) -> Plan:
    """The plan that writes `status`, unless the stored one is MultiKueue's copy of the
    worker's (a phase the operator does not write here) and the job is not paused."""
    status.reason = standing_reason(status)
    ours = before.phase in _OURS or status.phase == "Paused"
    if not ours:
        status = before
    return Plan(status=status, status_changed=ours and status != before, **changes)


def _queued(
    before: JobStatus, workload: Obj | None, queue: str, name: str, life: Lifecycle, ts: str
) -> JobStatus:
    """`Queued`, with why it waits: in the manager's queue, or for a worker."""
    status = before.model_copy(deep=True)
    status.run_mode = life.run_mode.name
    reason, message = _why_waiting(workload, queue, name)
    status.phase = "Queued"
    set_condition(status, "Admitted", False, reason, message, ts)
    was_paused = status.condition("Paused")
    if was_paused is not None and was_paused.status == "True":
        set_condition(status, "Paused", False, "Resumed", "spec.runMode.pause is disabled", ts)
    return status


def _why_waiting(workload: Obj | None, queue: str, name: str) -> tuple[str, str]:
    """The reason and message of a job that waits on the manager, in Kueue's words."""
    reserved = condition_of(workload, "QuotaReserved")
    if workload is None or reserved is None or reserved.get("status") != "True":
        said = str((reserved or {}).get("message") or "")
        if reserved is not None and reserved.get("reason") == "Inadmissible":
            return "Inadmissible", f"LocalQueue {queue}: {said}" if said else f"LocalQueue {queue}"
        tail = f": {said}" if said else f" (Workload {name})"
        return "Queued", f"waiting in LocalQueue {queue} for MultiKueue to dispatch it{tail}"
    checks = ((workload.get("status") or {}).get("admissionChecks")) or []
    check = next((c for c in checks if c.get("state") != "Ready"), None)
    if check is None:
        return "Queued", f"quota reserved in LocalQueue {queue}; waiting for its admission checks"
    state = str(check.get("state") or "Pending")
    said = str(check.get("message") or "")
    return (
        f"MultiKueue{state}",
        f"waiting for a worker cluster with room (admission check {check.get('name')}: {state}"
        + (f", {said})" if said else ")"),
    )
