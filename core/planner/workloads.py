"""Kueue's Workload as the engine writes and reads it: its name, its podSets (what Kueue counts
and places a job's pods by), its priority, its conditions and the status patches Kueue's
`jobframework` would write.

It exists apart from the steps of the protocol (`t9kjobs.planner.queueing`, which decides a
job's place in a queue and the Workload it wants there, and `t9kjobs.planner.admission`, what a
plan does with that Workload) because both build and read the same object: its shape (name,
labels, podSets, priority, conditions, status patch) is said once, here.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from t9kjobs.models import Job
from t9kjobs.objects import DesiredPod, owner_labels, owner_reference
from t9kjobs.planner.topology import topology_request
from t9kjobs.planner.types import Kueue
from t9kjobs.vocabulary import Obj

__all__ = [
    "KUEUE_API_VERSION",
    "LABEL_JOB_UID",
    "LABEL_PREBUILT_WORKLOAD",
    "LABEL_PRIORITY_CLASS",
    "WORKLOAD",
    "condition_of",
    "condition_true",
    "new_workload",
    "pod_set_name",
    "prebuilt_name",
    "status_patch",
    "workload_name",
    "workload_objects",
    "workload_priority",
]

KUEUE_API_VERSION = "kueue.x-k8s.io/v1beta2"
WORKLOAD = "Workload"
LABEL_PRIORITY_CLASS = "kueue.x-k8s.io/priority-class"
LABEL_JOB_UID = "kueue.x-k8s.io/job-uid"
# A label, as Kueue v0.17 reads it (`pkg/controller/constants`: PrebuiltWorkloadLabel,
# "the label key of the job holding the name of the pre-built workload to use"): the job
# adopts that Workload instead of making its own (`t9kjobs.planner.prebuilt`).
LABEL_PREBUILT_WORKLOAD = "kueue.x-k8s.io/prebuilt-workload-name"
# What a pod may ask for at pod level (PodLevelResources): what Kueue reads there too
# (k8s.io/component-helpers/resource.IsSupportedPodLevelResource).
_POD_LEVEL = ("cpu", "memory")
# What a podSet's template keeps of a pod's spec: what Kueue counts and places by.
_TEMPLATE_KEYS = (
    "nodeSelector",
    "affinity",
    "tolerations",
    "priorityClassName",
    "runtimeClassName",
    "overhead",
)


def workload_objects(objects: Sequence[Obj]) -> list[Obj]:
    """The Workloads among `objects`, not being deleted already."""
    return [
        o
        for o in objects
        if o.get("kind") == WORKLOAD
        and str(o.get("apiVersion", "")).startswith("kueue.x-k8s.io/")
        and not o["metadata"].get("deletionTimestamp")
    ]


def prebuilt_name(job: Job) -> str | None:
    """The prebuilt Workload the job names (`LABEL_PREBUILT_WORKLOAD`), if any."""
    return (job.metadata.labels or {}).get(LABEL_PREBUILT_WORKLOAD) or None


def workload_name(job: Job) -> str:
    """The prebuilt Workload the job names, else `<kind>-<job>`, lower case (a job's name is
    short enough for it: `t9kjobs.loading`)."""
    return prebuilt_name(job) or f"{job.kind.lower()}-{job.name}"


def new_workload(
    job: Job, queue: str, pods: Sequence[DesiredPod], ref: Obj | None, priority: int | None
) -> Obj:
    """The Workload `job` wants in LocalQueue `queue`: a podSet per replica type of `pods`,
    and its priority (`workload_priority`)."""
    spec: Obj = {"queueName": queue, "podSets": _pod_sets(pods)}
    if ref is not None:
        spec["priorityClassRef"] = ref
    if priority is not None:
        spec["priority"] = priority
    return {
        "apiVersion": KUEUE_API_VERSION,
        "kind": WORKLOAD,
        "metadata": {
            "name": workload_name(job),
            "namespace": job.namespace,
            # Kueue names the job by this label in what it says (a preemption's message).
            "labels": {**owner_labels(job), LABEL_JOB_UID: job.metadata.uid or ""},
            "ownerReferences": [owner_reference(job)],
        },
        "spec": spec,
    }


def workload_priority(
    job: Job, pods: Sequence[DesiredPod], kueue: Kueue
) -> tuple[Obj | None, int | None] | str:
    """(priorityClassRef, priority) of the Workload, or why it cannot be said yet."""
    name = (job.metadata.labels or {}).get(LABEL_PRIORITY_CLASS)
    if name:
        value = kueue.workload_priorities.get(name)
        if value is None:
            return f"WorkloadPriorityClass {name} (label {LABEL_PRIORITY_CLASS}) does not exist"
        ref = {"group": "kueue.x-k8s.io", "kind": "WorkloadPriorityClass", "name": name}
        return ref, value
    classes = sorted({str(c) for p in pods if (c := p.manifest["spec"].get("priorityClassName"))})
    if classes:
        value = kueue.pod_priorities.get(classes[0])
        if value is None:
            return f"PriorityClass {classes[0]} (the pods' priorityClassName) does not exist"
        return {"group": "scheduling.k8s.io", "kind": "PriorityClass", "name": classes[0]}, value
    scheduler = job.spec.lifecycle().scheduler
    if kueue.t9k_queues and scheduler is not None and scheduler.t9k_scheduler is not None:
        return None, scheduler.t9k_scheduler.priority
    return None, None


def pod_set_name(replica_type: str) -> str:
    """A podSet's name: the replica type as a DNS label."""
    name = re.sub(r"[^a-z0-9-]+", "-", replica_type.lower()).strip("-")[:63].strip("-")
    return name or "pods"


def _pod_sets(pods: Sequence[DesiredPod]) -> list[Obj]:
    sets: dict[str, Obj] = {}
    for pod in pods:
        name = pod_set_name(pod.replica_type)
        if name in sets:
            sets[name]["count"] += 1
            continue
        spec = pod.manifest["spec"]
        template: Obj = {k: spec[k] for k in _TEMPLATE_KEYS if spec.get(k)}
        for key in ("initContainers", "containers"):
            if spec.get(key):
                template[key] = [
                    {
                        "name": c["name"],
                        **({"resources": c["resources"]} if c.get("resources") else {}),
                        # A sidecar (an init container that runs on) adds to what the pod
                        # holds; another init container does not: Kueue sums them so.
                        **({"restartPolicy": c["restartPolicy"]} if c.get("restartPolicy") else {}),
                    }
                    for c in spec[key]
                ]
        if spec.get("resources"):
            template["resources"] = _pod_level(spec)
        if spec.get("resourceClaims"):
            template["resourceClaims"] = spec["resourceClaims"]  # counted: `queueing._not_counted`
        sets[name] = {"name": name, "count": 1, "template": {"spec": template}}
        request = topology_request(pod)  # placed in a Topology's domains by rank: its docstring
        if request is not None:
            sets[name]["topologyRequest"] = request
    return list(sets.values())


def _pod_level(spec: Obj) -> Obj:
    """The pod-level `resources`, with the requests the API server gives the pod: where a
    resource has a pod-level limit, no pod-level request and no container that asks for it,
    its request is the limit. Kueue reads pod-level requests alone (it defaults container
    requests from limits, never the pod's), so it would count nothing of that resource."""
    resources: Obj = dict(spec["resources"])
    limits = resources.get("limits") or {}
    requests = dict(resources.get("requests") or {})
    asked = {
        str(name)
        for key in ("initContainers", "containers")
        for c in spec.get(key) or []
        for part in ("requests", "limits")
        for name in ((c.get("resources") or {}).get(part) or {})
    }
    for name, value in limits.items():
        supported = name in _POD_LEVEL or str(name).startswith("hugepages-")
        if supported and name not in requests and name not in asked:
            requests[name] = value
    if requests:
        resources["requests"] = requests
    return resources


def condition_of(obj: Obj | None, type_: str) -> Obj | None:
    for condition in ((obj or {}).get("status") or {}).get("conditions") or []:
        if isinstance(condition, dict) and condition.get("type") == type_:
            return condition
    return None


def condition_true(obj: Obj | None, type_: str) -> bool:
    condition = condition_of(obj, type_)
    return condition is not None and condition.get("status") == "True"


def status_patch(workload: Obj, status: Obj) -> Obj:
    meta = workload["metadata"]
    return {
        "apiVersion": workload.get("apiVersion", KUEUE_API_VERSION),
        "kind": WORKLOAD,
        "metadata": {"name": meta["name"], "resourceVersion": meta.get("resourceVersion")},
        "status": status,
    }
