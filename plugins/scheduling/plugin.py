"""Gang scheduling for every kind: a PodGroup per job, and pods that join it.

A distributed job does nothing until every rank runs; placed pod by pod, two jobs can each
hold part of the GPUs the other needs and wait for ever. A gang is placed whole or not at all.
Two schedulers place gangs, each with a PodGroup kind of its own; the operator-wide
`t9kjobs.settings.GangMode` (`t9kjobs operator --gang-scheduling`) says which a job gets:

* **kube-scheduler's own** (Kubernetes 1.36, alpha: `scheduling.k8s.io/v1alpha2`, gates
  `GenericWorkload` and `GangScheduling`): a PodGroup named after the job with
  `schedulingPolicy.gang.minCount`, and `spec.schedulingGroup.podGroupName` on each pod. Used
  only where the cluster serves the kind: elsewhere jobs are exactly as without it.
* **the T9k scheduler's** (`scheduler.tensorstack.dev/v1beta1`), for jobs that set
  `spec.scheduler.t9kScheduler`: `minMember`, the queue and priority of the spec; pods carry
  the group and queue labels and `schedulerName: t9k-scheduler`. When the cluster does not
  serve it, the engine leaves the PodGroup out and reports `Degraded`, and the pods are left as
  without `t9kScheduler`: a pod naming a scheduler that is not there would stay Pending for ever.

Either way the count is the number of pods the job cannot run without: all of them, or the
elastic minimum the kind declares as `Lifecycle.min_available`. Read through
`JobSpec.lifecycle()`, so any kind, a third-party one too, gets it. The engine deletes a job's
PodGroups when it has no pods to place (paused, finished) and replaces one whose count changed
(`t9kjobs.planner`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

from t9kjobs.plugin import (
    DesiredPod,
    GangMode,
    Job,
    KindInfo,
    Obj,
    T9kScheduler,
    child_kind,
    current,
    hookimpl,
    owner_labels,
    owner_reference,
)

__all__ = [
    "LABEL_GROUP_NAME",
    "LABEL_QUEUE",
    "NATIVE_API_VERSION",
    "POD_GROUP_API_VERSION",
    "POD_GROUP_KIND",
    "SCHEDULER_NAME",
    "gang_of",
    "t9kjobs_build_auxiliary_objects",
    "t9kjobs_kinds",
    "t9kjobs_mutate_pod",
]

POD_GROUP_API_VERSION = "scheduler.tensorstack.dev/v1beta1"
POD_GROUP_KIND = "PodGroup"
SCHEDULER_NAME = "t9k-scheduler"
LABEL_GROUP_NAME = "scheduler.tensorstack.dev/group-name"
LABEL_QUEUE = "scheduler.tensorstack.dev/queue"
NATIVE_API_VERSION = "scheduling.k8s.io/v1alpha2"
_NATIVE = child_kind(NATIVE_API_VERSION, POD_GROUP_KIND)  # PodGroup.scheduling.k8s.io

Gang = Literal["native", "t9k"]


def _t9k_scheduler(job: Job) -> T9kScheduler | None:
    policy = job.spec.lifecycle().scheduler
    return policy.t9k_scheduler if policy is not None else None


def gang_of(job: Job, absent_kinds: frozenset[str], mode: GangMode) -> Gang | None:
    """Which PodGroup `job` gets under `mode`, the cluster lacking `absent_kinds`."""
    wants_t9k = _t9k_scheduler(job) is not None
    if wants_t9k and mode in ("auto", "t9k"):
        # Under auto, a cluster that serves neither kind keeps the job's T9k PodGroup (left
        # out, Degraded), as before kube-scheduler had gangs.
        t9k_or_nothing = POD_GROUP_KIND not in absent_kinds or _NATIVE in absent_kinds
        if mode == "t9k" or t9k_or_nothing:
            return "t9k"
    if mode in ("auto", "native") and _NATIVE not in absent_kinds:
        return "native"
    return None


def _min_count(job: Job, pods: Sequence[DesiredPod]) -> int:
    least = job.spec.lifecycle().min_available
    # Never more than the pods there are (a group that waits for absent members never starts),
    # never less than one (the API server refuses a gang of none).
    return len(pods) if least is None else max(1, min(least, len(pods)))


def _metadata(job: Job) -> Obj:
    return {
        "name": job.name,
        "namespace": job.namespace,
        "labels": owner_labels(job),
        "ownerReferences": [owner_reference(job)],
    }


@hookimpl
def t9kjobs_kinds() -> list[KindInfo]:
    return []  # a feature plugin: it serves no kind of its own


@hookimpl
def t9kjobs_build_auxiliary_objects(
    job: Job, pods: Sequence[DesiredPod], absent_kinds: frozenset[str]
) -> list[Obj]:
    gang = gang_of(job, absent_kinds, current().gang_scheduling)
    if gang is None or not pods:
        return []
    count = _min_count(job, pods)
    if gang == "native":
        return [
            {
                "apiVersion": NATIVE_API_VERSION,
                "kind": POD_GROUP_KIND,
                "metadata": _metadata(job),
                "spec": {"schedulingPolicy": {"gang": {"minCount": count}}},
            }
        ]
    t9k = _t9k_scheduler(job)
    assert t9k is not None  # gang_of: t9k only for a job that sets it
    return [
        {
            "apiVersion": POD_GROUP_API_VERSION,
            "kind": POD_GROUP_KIND,
            "metadata": _metadata(job),
            "spec": {"minMember": count, "queue": t9k.queue, "priority": t9k.priority},
        }
    ]


@hookimpl
def t9kjobs_mutate_pod(job: Job, pod: DesiredPod, absent_kinds: frozenset[str]) -> None:
    gang = gang_of(job, absent_kinds, current().gang_scheduling)
    if gang == "native":
        pod.manifest["spec"]["schedulingGroup"] = {"podGroupName": job.name}
        return
    t9k = _t9k_scheduler(job)
    if gang is None or t9k is None or POD_GROUP_KIND in absent_kinds:
        return
    meta = pod.manifest["metadata"]
    meta["labels"] = {
        **(meta.get("labels") or {}),
        LABEL_GROUP_NAME: job.name,
        LABEL_QUEUE: t9k.queue,
    }
    pod.manifest["spec"]["schedulerName"] = SCHEDULER_NAME
