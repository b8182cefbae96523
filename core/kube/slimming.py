"""What the informer stores keep of an object: what a reconcile reads, not what the API server
sent. At 2,000 jobs x 4 pods the stores were most of the operator's 288 MiB; a cached pod is
read for its metadata (names, labels, annotations, owner, deletion) and, in its status, its
phase and its containers' states (exit codes, reasons), and nothing else.

So every object loses `metadata.managedFields` (a third of a pod) and `metadata.finalizers`
(no reader reads them), and a pod keeps of its spec
only `nodeName` (whether it is placed) and `schedulingGroup` (whether it is a member of its
job's gang, which decides whether a replacement can rejoin it: `rejoin_or_alone`), and of its
status only `phase`, per container `name`,
`state` and `lastState`, a `PodScheduled` condition that says it cannot be placed (why its
gang waits: `t9kjobs.planner.placement`), and what the recovery rules read of a failed pod
(`t9kjobs.planner.failures`): its `DisruptionTarget` condition's type, status and reason
(and Kueue's `TerminatedByKueue`'s),
`status.reason` and `status.message` cut to 256 characters. The rendered
spec (containers, env, volumes, the launch command's copy in the environment) and the kubelet's
details (conditions, IPs, images, container ids) go. The planner compares pods with the job by
their spec-hash annotation, never by their spec, and never writes a cached pod back (a pod to
change is deleted and created anew from the job). Other kinds keep their spec: a Service or a
PodGroup is compared with the one the job wants.

A Node (the lost-node detection's cluster-wide informer, `t9kjobs.controller.nodes`) keeps its
name, uid, resourceVersion and deletionTimestamp, its taints (key, effect, timeAdded), whether it
is unschedulable, and its `Ready` condition's status, reason and lastTransitionTime: nothing
that a kubelet's heartbeat changes (lastHeartbeatTime, images, allocatable, the other
conditions' times), so that the kept part of a node changes only when what a plan reads does.

A Secret keeps its metadata alone (and its kind and apiVersion): no `data`, `stringData` or
anything else of it. Nothing reads a cached Secret but for its name, labels and owner (the SSH
Secret is created with its key material and never rewritten), and key material has no business
in a cache that lives as long as the process. The Secret informers ask for metadata only
(`t9kjobs.kube.resources`), but a store gets Secrets from elsewhere too: the answer to a
creation (the whole Secret, keys included), a lookup by name, a deletion's answer. Every `put`
trims, so none of them keeps the data; the trim drops it from the object it is given too
(in place), and applies to any object of kind Secret, whatever store it goes to.

Then every string of the kept object is interned: the JSON decoder gives each object its own
copies of the keys, label values, namespace, owner kind and apiVersion that thousands of
objects share. On the benchmark's jobs, slimming took a job's cache (its 4 pods and Service)
from about 100 to 30 KiB, and interning to 16 (docs/benchmarks.md).
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

from t9kjobs.vocabulary import Obj

__all__ = ["slimmer"]


_CONTAINER_FIELDS = ("name", "state", "lastState")
_CONDITION_FIELDS = ("type", "status", "reason", "message")
# What the recovery rules read of a failed pod (`t9kjobs.planner.failures`): who disrupted it
# (its DisruptionTarget condition, without the message), and the kubelet's reason and message
# (`Evicted`, `NodeShutdown`), the message cut: an eviction's names every container's usage.
_DISRUPTION_FIELDS = ("type", "status", "reason")
# Conditions kept so: who disrupted it, and Kueue's TAS node controller failing a pod that
# waited on a failed node (`TerminatedByKueue`).
_DISRUPTIONS = ("DisruptionTarget", "TerminatedByKueue")
_MESSAGE_LIMIT = 256


def _interned(value: Any) -> Any:
    """`value` with every string in it (keys too) interned, in new dicts and lists."""
    if isinstance(value, str):
        return sys.intern(value)
    if isinstance(value, dict):
        return {sys.intern(k): _interned(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_interned(v) for v in value]
    return value


# What a cached pod keeps of its spec (see the module's docstring).
_POD_SPEC_FIELDS = ("nodeName", "schedulingGroup")


def _without_managed_fields(obj: Obj) -> Obj:
    """Without the API server's bookkeeping: `managedFields`, and `finalizers` (no reader reads
    a child's: an object changed is written whole from the job, never from the cache). So a
    controller's finalizer on a child (kube-controller-manager's on each PodGroup) changes
    nothing kept, and its event is no news (`t9kjobs.kube.informer`)."""
    obj["metadata"].pop("managedFields", None)
    obj["metadata"].pop("finalizers", None)
    return obj


def _slim_pod(pod: Obj) -> Obj:
    _without_managed_fields(pod)
    spec = pod.get("spec") or {}
    pod["spec"] = {k: spec[k] for k in _POD_SPEC_FIELDS if spec.get(k)}
    status = pod.get("status")
    if status:
        kept: Obj = {"phase": status["phase"]} if "phase" in status else {}
        containers = status.get("containerStatuses")
        if containers:
            kept["containerStatuses"] = [
                {k: c[k] for k in _CONTAINER_FIELDS if k in c} for c in containers
            ]
        for key in ("reason", "message"):
            if status.get(key):
                kept[key] = str(status[key])[:_MESSAGE_LIMIT]
        conditions = [
            {k: c[k] for k in _CONDITION_FIELDS if k in c}
            for c in status.get("conditions") or []
            if c.get("type") == "PodScheduled" and c.get("status") == "False"
        ] + [
            {k: c[k] for k in _DISRUPTION_FIELDS if k in c}
            for c in status.get("conditions") or []
            if c.get("type") in _DISRUPTIONS
        ]
        if conditions:
            kept["conditions"] = conditions
        pod["status"] = kept
    return pod


_NODE_META_FIELDS = ("name", "uid", "resourceVersion", "deletionTimestamp")
_TAINT_FIELDS = ("key", "effect", "timeAdded")
_READY_FIELDS = ("type", "status", "reason", "lastTransitionTime")


def _slim_node(node: Obj) -> Obj:
    meta = node.get("metadata") or {}
    spec = node.get("spec") or {}
    kept_spec: Obj = {}
    if spec.get("taints"):
        kept_spec["taints"] = [{k: t[k] for k in _TAINT_FIELDS if k in t} for t in spec["taints"]]
    if spec.get("unschedulable"):
        kept_spec["unschedulable"] = True
    ready = [
        {k: c[k] for k in _READY_FIELDS if k in c}
        for c in (node.get("status") or {}).get("conditions") or []
        if c.get("type") == "Ready"
    ]
    return {
        "apiVersion": node.get("apiVersion", "v1"),
        "kind": "Node",
        "metadata": {k: meta[k] for k in _NODE_META_FIELDS if k in meta},
        "spec": kept_spec,
        "status": {"conditions": ready} if ready else {},
    }


_SECRET_FIELDS = ("apiVersion", "kind", "metadata")


def _metadata_only(obj: Obj) -> Obj:
    """`obj` without anything but its kind, apiVersion and metadata (changed in place)."""
    for key in [k for k in obj if k not in _SECRET_FIELDS]:
        del obj[key]
    return _without_managed_fields(obj)


def slimmer(kind: str) -> Callable[[Obj], Obj]:
    """How a store of `kind` trims an object before keeping it: what it keeps, interned. An
    object of kind Secret keeps its metadata only, in a store of any kind."""
    trim = {"Pod": _slim_pod, "Secret": _metadata_only, "Node": _slim_node}.get(
        kind, _without_managed_fields
    )

    def slim(obj: Obj) -> Obj:
        kept: Obj = _interned((_metadata_only if obj.get("kind") == "Secret" else trim)(obj))
        return kept

    return slim
