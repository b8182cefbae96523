"""Gang scheduling for every kind: a PodGroup per job, and pods that join it.

A distributed job does nothing until every rank runs; placed pod by pod, two jobs can each
hold part of the GPUs the other needs and wait for ever. A gang is placed whole or not at all.
Two schedulers place gangs, each with a PodGroup kind of its own; the plugin's option
`--gang-scheduling` (`GangMode`; the chart's `gangScheduling`) says which a job gets:

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
`JobSpec.lifecycle()`, so any kind, a third-party one too, gets it. The PodGroup kinds are
declared to the engine (`t9kjobs_child_kinds`, by the plugin configured with its mode: `Gangs`):
watched only under a mode that uses them, deleted when the job has no pods to place (paused,
finished), and kube-scheduler's, whose spec is immutable, replaced when its count changes.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Literal, get_args

from t9kjobs.plugin import (
    ChildKind,
    DesiredPod,
    Job,
    KindInfo,
    Obj,
    Option,
    OptionValue,
    T9kScheduler,
    child_kind,
    hookimpl,
    owner_labels,
    owner_reference,
)
from t9kjobs.plugins.scheduling.reading import NATIVE_GANG, T9K_GANG

__all__ = [
    "GANG_MODES",
    "LABEL_GROUP_NAME",
    "LABEL_QUEUE",
    "NATIVE_API_VERSION",
    "OPTION",
    "POD_GROUP_API_VERSION",
    "POD_GROUP_KIND",
    "SCHEDULER_NAME",
    "GangMode",
    "Gangs",
    "gang_of",
    "t9kjobs_configure",
    "t9kjobs_kinds",
    "t9kjobs_options",
]

POD_GROUP_API_VERSION = "scheduler.tensorstack.dev/v1beta1"
POD_GROUP_KIND = "PodGroup"
SCHEDULER_NAME = "t9k-scheduler"
LABEL_GROUP_NAME = "scheduler.tensorstack.dev/group-name"
LABEL_QUEUE = "scheduler.tensorstack.dev/queue"
NATIVE_API_VERSION = "scheduling.k8s.io/v1alpha2"
_NATIVE = child_kind(NATIVE_API_VERSION, POD_GROUP_KIND)  # PodGroup.scheduling.k8s.io

Gang = Literal["native", "t9k"]

# How a job's pods are placed together (docs/scheduling.md):
# * auto: a job that sets spec.scheduler.t9kScheduler gets a T9k PodGroup (when the cluster
#   serves it, or serves no gang API at all: then Degraded, as always), every other job a
#   PodGroup of kube-scheduler's own (scheduling.k8s.io/v1alpha2) when the cluster serves it;
# * native: every job a kube-scheduler PodGroup when served, t9kScheduler ignored;
# * t9k: only jobs that set t9kScheduler, a T9k PodGroup;
# * none: no PodGroup, pods placed one by one.
GangMode = Literal["auto", "native", "t9k", "none"]
GANG_MODES: tuple[GangMode, ...] = get_args(GangMode)

OPTION = Option(
    "gang-scheduling",
    "how a job's pods are placed together (docs/scheduling.md): auto (default) gives jobs that"
    " set spec.scheduler.t9kScheduler a T9k PodGroup and every other job a kube-scheduler"
    " PodGroup (scheduling.k8s.io/v1alpha2) where the cluster serves it; native: a"
    " kube-scheduler PodGroup for every job; t9k: T9k PodGroups only; none: no PodGroup, pods"
    " placed one by one",
    default="auto",
    choices=GANG_MODES,
    helm="gangScheduling",
)
# The T9k scheduler's PodGroup is updated in place; kube-scheduler's is immutable: replaced.
# Both place pods: a job with none to place (paused, finished) keeps none. Each is a gang, read
# by the engine as `reading` says.
_T9K_KIND = ChildKind(
    POD_GROUP_API_VERSION, POD_GROUP_KIND, "podgroups", without_pods=False, gang=T9K_GANG
)
_NATIVE_KIND = ChildKind(
    NATIVE_API_VERSION,
    POD_GROUP_KIND,
    "podgroups",
    replaced=True,
    without_pods=False,
    gang=NATIVE_GANG,
)


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


class Gangs:
    """The plugin configured with a mode other than `none`: PodGroups, and pods that join them."""

    def __init__(self, mode: GangMode) -> None:
        self.mode = mode

    @hookimpl
    def t9kjobs_child_kinds(self) -> list[ChildKind]:
        kinds = [_T9K_KIND] if self.mode in ("auto", "t9k") else []
        return kinds + ([_NATIVE_KIND] if self.mode in ("auto", "native") else [])

    @hookimpl
    def t9kjobs_build_auxiliary_objects(
        self, job: Job, pods: Sequence[DesiredPod], absent_kinds: frozenset[str]
    ) -> list[Obj]:
        gang = gang_of(job, absent_kinds, self.mode)
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
    def t9kjobs_mutate_pod(self, job: Job, pod: DesiredPod, absent_kinds: frozenset[str]) -> None:
        gang = gang_of(job, absent_kinds, self.mode)
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


@hookimpl
def t9kjobs_kinds() -> list[KindInfo]:
    return []  # a feature plugin: it serves no kind of its own


@hookimpl
def t9kjobs_options() -> Sequence[Option]:
    return [OPTION]


@hookimpl
def t9kjobs_configure(options: Mapping[str, OptionValue]) -> Gangs | None:
    """`none`: the module as registered, which places no pod together."""
    mode = options[OPTION.name]
    if mode not in GANG_MODES or not isinstance(mode, str):
        raise ValueError(f"--gang-scheduling {mode}: choose one of {', '.join(GANG_MODES)}")
    return None if mode == "none" else Gangs(mode)
