"""Gang scheduling by the T9k scheduler, for every kind: a PodGroup per job and pods that join it.

A job with `spec.scheduler.t9kScheduler` (read through `JobSpec.lifecycle()`, so any kind, a
third-party one too, gets it) owns a PodGroup `scheduler.tensorstack.dev/v1beta1` named after
the job: `minMember` is the number of pods the job cannot run without (all of them, or the
elastic minimum the kind declares as `Lifecycle.min_available`), with the queue and priority
of the spec. Its pods carry the group and queue labels and `schedulerName: t9k-scheduler`.

The PodGroup kind belongs to the scheduler, not to us: when the cluster does not serve it, the
engine leaves the PodGroup out and reports `Degraded`, and the pods are left exactly as without
`t9kScheduler` — a pod naming a scheduler that is not there would stay Pending for ever.
"""

from __future__ import annotations

from collections.abc import Sequence

from t9kjobs.hooks import hookimpl
from t9kjobs.kinds import KindInfo
from t9kjobs.models import Job, T9kScheduler
from t9kjobs.objects import DesiredPod, Obj, owner_labels, owner_reference

__all__ = [
    "LABEL_GROUP_NAME",
    "LABEL_QUEUE",
    "POD_GROUP_API_VERSION",
    "POD_GROUP_KIND",
    "SCHEDULER_NAME",
    "t9kjobs_build_auxiliary_objects",
    "t9kjobs_kinds",
    "t9kjobs_mutate_pod",
]

POD_GROUP_API_VERSION = "scheduler.tensorstack.dev/v1beta1"
POD_GROUP_KIND = "PodGroup"
SCHEDULER_NAME = "t9k-scheduler"
LABEL_GROUP_NAME = "scheduler.tensorstack.dev/group-name"
LABEL_QUEUE = "scheduler.tensorstack.dev/queue"


def _t9k_scheduler(job: Job) -> T9kScheduler | None:
    policy = job.spec.lifecycle().scheduler
    return policy.t9k_scheduler if policy is not None else None


@hookimpl
def t9kjobs_kinds() -> list[KindInfo]:
    return []  # a feature plugin: it serves no kind of its own


@hookimpl
def t9kjobs_build_auxiliary_objects(job: Job, pods: Sequence[DesiredPod]) -> list[Obj]:
    t9k = _t9k_scheduler(job)
    if t9k is None:
        return []
    least = job.spec.lifecycle().min_available
    # Never more than the pods there are: a group that waits for absent members never starts.
    min_member = len(pods) if least is None else min(least, len(pods))
    return [
        {
            "apiVersion": POD_GROUP_API_VERSION,
            "kind": POD_GROUP_KIND,
            "metadata": {
                "name": job.name,
                "namespace": job.namespace,
                "labels": owner_labels(job),
                "ownerReferences": [owner_reference(job)],
            },
            "spec": {"minMember": min_member, "queue": t9k.queue, "priority": t9k.priority},
        }
    ]


@hookimpl
def t9kjobs_mutate_pod(job: Job, pod: DesiredPod, absent_kinds: frozenset[str]) -> None:
    t9k = _t9k_scheduler(job)
    if t9k is None or POD_GROUP_KIND in absent_kinds:
        return
    meta = pod.manifest["metadata"]
    meta["labels"] = {
        **(meta.get("labels") or {}),
        LABEL_GROUP_NAME: job.name,
        LABEL_QUEUE: t9k.queue,
    }
    pod.manifest["spec"]["schedulerName"] = SCHEDULER_NAME
