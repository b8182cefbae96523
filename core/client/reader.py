"""What the client reads from the API server: a job, its pods, ConfigMaps, Events, its pods'
logs and their nodes, each in one request, as plain JSON through the operator's Transport.

A job's pods and ConfigMaps are listed by its owner labels, then kept only if their controller
ownerReference is the job, by uid: labels are not a credential (whoever may create pods in the
namespace may give a bare pod a job's labels), and such a pod is no replica of the job.

A job's replicas are named as users see them: the pod name without `<job>-` (`worker-1`,
`master-0`, ColossalAI's `launcher`); the deciding replica, whose log matters most, is the
first of master-0, launcher, launcher-0 and worker-0 the job has (`t9kjobs.objects`).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import urllib3

from t9kjobs.client.errors import (
    ClientError,
    JobNotFound,
    NoCluster,
    UnknownKind,
    from_api_error,
)
from t9kjobs.kinds import KindInfo
from t9kjobs.kube.resources import CHILD_RESOURCES, job_resource
from t9kjobs.kube.transport import ApiError, Transport
from t9kjobs.loading import JobError, parse_job
from t9kjobs.manager import PluginManager
from t9kjobs.models import Job
from t9kjobs.objects import (
    ANNOTATION_TRAINING_CONTAINER,
    LABEL_OWNER_KIND,
    LABEL_OWNER_NAME,
    DesiredPod,
    Obj,
    find_container,
)
from t9kjobs.planner.conditions import parse_time
from t9kjobs.planner.desired import desired_pods

__all__ = [
    "UNREACHABLE",
    "ClusterReader",
    "JobRef",
    "controlled_by",
    "event_time",
    "find_kind",
    "training_container",
    "uid_of",
]

# A connection that failed: the socket's errors, and urllib3's own (a refused connection is a
# NewConnectionError, no OSError).
UNREACHABLE = (OSError, urllib3.exceptions.HTTPError)

# KWOK's annotation on the fake nodes it drives (hack/cluster/kwok/start.sh).
_SIMULATED_NODE = "kwok.x-k8s.io/node"


def controlled_by(obj: Obj, uid: str) -> bool:
    """Whether `obj`'s controller ownerReference names the object of `uid` (never for an
    empty `uid`)."""
    refs = (obj.get("metadata") or {}).get("ownerReferences") or []
    controller = next((r for r in refs if r.get("controller")), None)
    return bool(uid) and controller is not None and controller.get("uid") == uid


def uid_of(raw: Obj) -> str:
    """A job's uid, as the API server gave it (`""` when it has none)."""
    return str((raw.get("metadata") or {}).get("uid") or "")


def find_kind(text: str, manager: PluginManager) -> KindInfo:
    """The kind named by `text`: its kind, plural, singular or a short name, any case."""
    wanted = text.lower()
    for info in manager.kinds.values():
        if wanted in {info.kind.lower(), info.plural, info.singular, *info.short_names}:
            return info
    names = ", ".join(
        sorted(f"{i.kind} ({', '.join(i.short_names)})" for i in manager.kinds.values())
    )
    raise UnknownKind(f"unknown kind {text!r}; the loaded plugins serve {names}")


@dataclass(frozen=True)
class JobRef:
    info: KindInfo
    name: str
    namespace: str

    @classmethod
    def parse(cls, target: str, namespace: str, manager: PluginManager) -> JobRef:
        kind, slash, name = target.partition("/")
        if not slash or not kind or not name:
            raise ClientError(f"{target!r}: name a job as KIND/NAME, e.g. gj/my-job")
        return cls(find_kind(kind, manager), name, namespace)

    def __str__(self) -> str:
        return f"{self.info.kind}/{self.name}"

    @property
    def where(self) -> str:
        return f"{self} in namespace {self.namespace}"


class ClusterReader:
    """Reads through a Transport; every refusal is a `ClientError`."""

    def __init__(self, transport: Transport, manager: PluginManager) -> None:
        self.transport = transport
        self.manager = manager

    def call(self, method: str, path: str, what: str, **kwargs: Any) -> Obj:
        """One request; the API's refusals as the client's exceptions about `what`."""
        try:
            return self.transport.request(method, path, **kwargs)
        except ApiError as exc:
            raise from_api_error(exc, what) from None
        except UNREACHABLE as exc:
            raise NoCluster(f"cannot reach the API server: {exc}") from None

    def job(self, ref: JobRef) -> Obj:
        try:
            return self.call("GET", job_resource(ref.info).path(ref.namespace, ref.name), ref.where)
        except JobNotFound:
            raise JobNotFound(f"{ref} not found in namespace {ref.namespace}") from None

    def jobs(self, info: KindInfo, namespace: str | None, selector: str | None) -> list[Obj]:
        """The jobs of a kind in a namespace (every namespace for None), by label selector."""
        path = job_resource(info).path(namespace)
        where = f"{info.plural} in " + (f"namespace {namespace}" if namespace else "all namespaces")
        found = self.call("GET", path, where, query={"labelSelector": selector})
        return list(found.get("items") or [])

    def _owned(self, kind: str, ref: JobRef, uid: str) -> list[Obj]:
        """The objects of `kind` with the job's owner labels whose controller is the job of
        `uid`, by name."""
        selector = f"{LABEL_OWNER_KIND}={ref.info.kind},{LABEL_OWNER_NAME}={ref.name}"
        path = CHILD_RESOURCES[kind].path(ref.namespace)
        found = self.call(
            "GET", path, f"the {kind}s of {ref.where}", query={"labelSelector": selector}
        )
        owned = [o for o in found.get("items") or [] if controlled_by(o, uid)]
        return sorted(owned, key=lambda o: o["metadata"]["name"])

    def pods(self, ref: JobRef, uid: str) -> list[Obj]:
        """The pods of the job `ref` names, `uid` its uid (`metadata.uid`)."""
        return self._owned("Pod", ref, uid)

    def pod(self, namespace: str, name: str, uid: str | None = None) -> Obj | None:
        """The pod; None when there is none of that name, or (with `uid`, a job's) when the
        pod of that name is not that job's."""
        path = CHILD_RESOURCES["Pod"].path(namespace, name)
        try:
            found = self.call("GET", path, f"Pod/{name} in namespace {namespace}")
        except JobNotFound:  # the 404 of any object
            return None
        return found if uid is None or controlled_by(found, uid) else None

    def on_simulated_node(self, pod: Obj | None) -> bool:
        """Whether the pod runs on a KWOK node, which keeps no logs (False when the node
        cannot be read: a user without the right to read nodes gets the API's own answer)."""
        node = ((pod or {}).get("spec") or {}).get("nodeName")
        if not node:
            return False
        with contextlib.suppress(ApiError, *UNREACHABLE):
            got = self.transport.request("GET", f"/api/v1/nodes/{node}")
            return _SIMULATED_NODE in ((got.get("metadata") or {}).get("annotations") or {})
        return False

    def topology_levels(self, namespace: str, workload: str) -> dict[str, list[str]]:
        """The Topology levels each podSet of the Workload was placed by: its flavor's Topology
        (`topologyName`), else the levels of its `topologyAssignment` (Kueue v0.17 keeps only
        the lowest there when it is the hostname). None where the Workload cannot be read (no
        right on Workloads, gone, not admitted yet)."""
        kueue = "/apis/kueue.x-k8s.io/v1beta2"
        with contextlib.suppress(ApiError, *UNREACHABLE):
            got = self.transport.request(
                "GET", f"{kueue}/namespaces/{namespace}/workloads/{workload}"
            )
            admission = (got.get("status") or {}).get("admission") or {}
            out = {}
            for a in admission.get("podSetAssignments") or []:
                levels = (a.get("topologyAssignment") or {}).get("levels")
                if not levels:
                    continue
                flavors = sorted({str(f) for f in (a.get("flavors") or {}).values()})
                full = next(filter(None, (self._flavor_levels(kueue, f) for f in flavors)), None)
                out[str(a.get("name"))] = full or [str(level) for level in levels]
            return out
        return {}

    def _flavor_levels(self, kueue: str, flavor: str) -> list[str] | None:
        """The levels of the Topology a ResourceFlavor names; None where it names none or
        either cannot be read."""
        with contextlib.suppress(ApiError, *UNREACHABLE):
            found = self.transport.request("GET", f"{kueue}/resourceflavors/{flavor}")
            name = (found.get("spec") or {}).get("topologyName")
            if not name:
                return None
            topology = self.transport.request("GET", f"{kueue}/topologies/{name}")
            levels = (topology.get("spec") or {}).get("levels") or []
            return [str(level["nodeLabel"]) for level in levels]
        return None

    def node_labels(self, name: str) -> dict[str, str] | None:
        """A node's labels; None where it cannot be read (no right on nodes, gone)."""
        with contextlib.suppress(ApiError, *UNREACHABLE):
            got = self.transport.request("GET", f"/api/v1/nodes/{name}")
            return dict((got.get("metadata") or {}).get("labels") or {})
        return None

    def config_maps(self, ref: JobRef, uid: str) -> list[Obj]:
        """The ConfigMaps of the job `ref` names, `uid` its uid."""
        return self._owned("ConfigMap", ref, uid)

    def job_events(self, raw: Obj, pods: list[Obj]) -> list[Obj]:
        """The Events about the job `raw` and its pods, oldest first: the pods it has (by
        uid), and by name since the job was created, those its status names that are gone (a
        replica's earlier pod, a worker stopped when its launcher finished, the cleanup's)."""
        meta = raw["metadata"]
        uids = {meta.get("uid")} | {p["metadata"].get("uid") for p in pods}
        status = raw.get("status") or {}
        names = {r.get("name") for t in status.get("tasks") or [] for r in t.get("replicas") or []}
        created = meta.get("creationTimestamp")
        path = f"/api/v1/namespaces/{meta['namespace']}/events"
        items = self.call("GET", path, f"the Events of namespace {meta['namespace']}")
        mine = []
        for event in items.get("items") or []:
            about = event.get("involvedObject") or {}
            if about.get("uid") in uids:
                mine.append(event)
            elif about.get("kind") == "Pod" and about.get("name") in names and created:
                with contextlib.suppress(ValueError):
                    if parse_time(event_time(event)) >= parse_time(created):
                        mine.append(event)
        return sorted(mine, key=event_time)

    def log_lines(
        self,
        namespace: str,
        pod: str,
        container: str | None,
        *,
        follow: bool = False,
        tail: int | None = None,
        since_seconds: int | None = None,
        since_time: str | None = None,
    ) -> Iterator[str]:
        """The container's log, each line with its RFC 3339 timestamp in front (ApiError when
        the server cannot give it: no such pod, a container not started, no kubelet)."""
        query = {
            "container": container,
            "timestamps": "true",
            "follow": "true" if follow else None,
            "tailLines": tail,
            "sinceSeconds": since_seconds,
            "sinceTime": since_time,
        }
        path = CHILD_RESOURCES["Pod"].path(namespace, pod, "log")
        timeout = 24 * 3600.0 if follow else 60.0
        for line in self.transport.lines(path, query, timeout):
            yield line.decode(errors="replace").rstrip("\r")

    def parsed(self, raw: Obj) -> Job | None:
        """The job as the operator reads it; None when its spec no longer validates."""
        with contextlib.suppress(JobError, ValueError):
            return parse_job(raw, self.manager)
        return None

    def built_pods(self, raw: Obj) -> dict[str, DesiredPod]:
        """The pods the job's plugin would build now, by name: only to show what a replica
        whose pod is gone runs (a live pod says it itself); none when the spec no longer
        validates or its plugin cannot build it."""
        job = self.parsed(raw)
        if job is None:
            return {}
        hooks = self.manager.hooks_for(job.kind)
        try:
            pods = desired_pods(job, hooks, job.spec.lifecycle(), False, frozenset())
        except Exception:  # a plugin that cannot build this job: the reader goes on without
            return {}
        return {pod.name: pod for pod in pods}


def training_container(pod: Obj) -> str | None:
    """The container of `pod` that trains, as the operator that created it marked it; the
    first container of a pod without the mark (created by an older operator)."""
    marked = (pod["metadata"].get("annotations") or {}).get(ANNOTATION_TRAINING_CONTAINER)
    if marked:
        return str(marked)
    found = find_container(pod, None)
    return str(found["name"]) if found is not None else None


def event_time(event: Obj) -> str:
    return str(
        event.get("lastTimestamp")
        or event.get("eventTime")
        or event.get("firstTimestamp")
        or (event.get("metadata") or {}).get("creationTimestamp")
        or ""
    )
