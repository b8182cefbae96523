"""What the informer stores keep of an object: what a reconcile reads, not what the API server
sent. At 2,000 jobs x 4 pods the stores were most of the operator's 288 MiB; a cached pod is
read for its metadata (names, labels, annotations, owner, deletion) and, in its status, its
phase and its containers' states (exit codes, reasons), and nothing else.

So every object loses `metadata.managedFields` (a third of a pod), and a pod keeps no spec and
of its status only `phase` and, per container, `name`, `state` and `lastState`: the rendered
spec (containers, env, volumes, the launch command's copy in the environment) and the kubelet's
details (conditions, IPs, images, container ids) go. The planner compares pods with the job by
their spec-hash annotation, never by their spec, and never writes a cached pod back (a pod to
change is deleted and created anew from the job). Other kinds keep their spec: a Service or a
PodGroup is compared with the one the job wants.

Then every string of the kept object is interned: the JSON decoder gives each object its own
copies of the keys, label values, namespace, owner kind and apiVersion that thousands of
objects share. On the benchmark's jobs, slimming took a job's cache (its 4 pods and Service)
from about 100 to 30 KiB, and interning to 16 (docs/benchmarks.md).
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

__all__ = ["slimmer"]

Obj = dict[str, Any]

_CONTAINER_FIELDS = ("name", "state", "lastState")


def _interned(value: Any) -> Any:
    """`value` with every string in it (keys too) interned, in new dicts and lists."""
    if isinstance(value, str):
        return sys.intern(value)
    if isinstance(value, dict):
        return {sys.intern(k): _interned(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_interned(v) for v in value]
    return value


def _without_managed_fields(obj: Obj) -> Obj:
    obj["metadata"].pop("managedFields", None)
    return obj


def _slim_pod(pod: Obj) -> Obj:
    _without_managed_fields(pod)
    pod["spec"] = {}
    status = pod.get("status")
    if status:
        kept: Obj = {"phase": status["phase"]} if "phase" in status else {}
        containers = status.get("containerStatuses")
        if containers:
            kept["containerStatuses"] = [
                {k: c[k] for k in _CONTAINER_FIELDS if k in c} for c in containers
            ]
        pod["status"] = kept
    return pod


def slimmer(kind: str) -> Callable[[Obj], Obj]:
    """How a store of `kind` trims an object before keeping it: what it keeps, interned."""
    trim = _slim_pod if kind == "Pod" else _without_managed_fields
    return lambda obj: _interned(trim(obj))
