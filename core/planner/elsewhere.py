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
job's (`t9kjobs.planner.queueing`), and nothing else: no pod (the job runs on the worker
cluster MultiKueue picks, where its copy adopts the Workload MultiKueue copies there:
`t9kjobs.planner.prebuilt`), no status (MultiKueue copies the worker's), never `Finished`
(MultiKueue finishes it from the worker's). Paused, it gives up its place as any queued job
does: its Workload is deleted, and MultiKueue deletes the worker's copy with it.
"""

from __future__ import annotations

from t9kjobs.models import MANAGED_BY_MULTIKUEUE, Job
from t9kjobs.planner.children import deletion
from t9kjobs.planner.desired import desired_pods
from t9kjobs.planner.queueing import queued
from t9kjobs.planner.types import EngineHooks, Observed, Plan
from t9kjobs.planner.workloads import WORKLOAD, workload_name, workload_objects

__all__ = ["left_alone"]


def left_alone(job: Job, observed: Observed, hooks: EngineHooks, manager: str) -> Plan:
    """The Plan of a job `manager` manages: nothing, or its Workload alone where `manager` is
    MultiKueue (the module's docstring)."""
    nothing = Plan(status=job.status, status_changed=False)
    if manager != MANAGED_BY_MULTIKUEUE or job.status.finished:
        return nothing
    name = workload_name(job)
    life = job.spec.lifecycle()
    if life.run_mode.paused:
        gone = workload_objects([o for o in (observed.get(WORKLOAD, name),) if o is not None])
        return Plan(
            status=job.status, status_changed=False, delete=tuple(deletion(o) for o in gone)
        )
    if observed.get(WORKLOAD, name) is not None or (WORKLOAD, name) in observed.conflicts:
        return nothing
    if WORKLOAD in observed.absent_kinds:
        return nothing
    pods = desired_pods(job, hooks, life, False, observed.absent_kinds)
    place = queued(job, pods, observed)
    if place is None or place.workload is None:
        return nothing  # no queue, or refused one: MultiKueue has nothing to dispatch
    return Plan(
        status=job.status,
        status_changed=False,
        create=(place.workload,),
        status_after_creations=True,
    )
