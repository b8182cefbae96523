"""The API resources the controller reads and writes, and their REST paths.

A resource whose objects the operator reads only for their metadata (`metadata_only`: the
Secrets) is listed and watched as `PartialObjectMetadata` (the `Accept` headers below, what
client-go's metadata informers send): the API server sends each object's metadata alone, so a
Secret's key material never crosses the wire to the operator, nor sits in its cache
(`t9kjobs.kube.slimming` drops it from whatever else puts a Secret in a store: the answer
to a creation, a lookup by name). Each header ends with plain `application/json`, as
client-go's do: a server that cannot answer in that form sends whole objects instead of
refusing, and the slimming still keeps their data out of the cache. Such objects come with
`kind: PartialObjectMetadata` and `apiVersion: meta.k8s.io/v1`; `typed` gives them back the
resource's own, which the rest of the operator keys them by (the planner's `(kind, name)`, a
deletion's path).
"""

from __future__ import annotations

from dataclasses import dataclass

from t9kjobs.features import ChildKind
from t9kjobs.kinds import KindInfo
from t9kjobs.models import API_GROUP
from t9kjobs.objects import child_kind
from t9kjobs.vocabulary import Obj

__all__ = [
    "CHILD_RESOURCES",
    "KUEUE_NAMESPACED",
    "KUEUE_RESOURCES",
    "METADATA_LIST",
    "METADATA_WATCH",
    "Resource",
    "child_resource",
    "job_resource",
]


_META = "g=meta.k8s.io;v=v1"
# What a list and a watch of a `metadata_only` resource accept (client-go's metadata client
# asks the same, but for protobuf first).
METADATA_LIST = f"application/json;as=PartialObjectMetadataList;{_META},application/json"
METADATA_WATCH = f"application/json;as=PartialObjectMetadata;{_META},application/json"


@dataclass(frozen=True)
class Resource:
    group: str  # "" for the core group
    version: str
    plural: str
    kind: str
    # Read for its metadata alone: listed and watched as PartialObjectMetadata (module docstring).
    metadata_only: bool = False

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    def path(self, namespace: str | None = None, name: str | None = None, sub: str = "") -> str:
        base = f"/apis/{self.group}/{self.version}" if self.group else f"/api/{self.version}"
        if namespace:
            base += f"/namespaces/{namespace}"
        base += f"/{self.plural}"
        if name:
            base += f"/{name}"
        if sub:
            base += f"/{sub}"
        return base

    @property
    def list_accept(self) -> str:
        return METADATA_LIST if self.metadata_only else "application/json"

    @property
    def watch_accept(self) -> str:
        return METADATA_WATCH if self.metadata_only else "application/json"

    def typed(self, obj: Obj) -> Obj:
        """`obj` (changed in place) with this resource's kind and apiVersion: list items carry
        none, and PartialObjectMetadata carries its own."""
        if self.metadata_only or "kind" not in obj:
            obj["kind"] = self.kind
            obj["apiVersion"] = self.api_version
        else:
            obj.setdefault("apiVersion", self.api_version)
        return obj


def job_resource(info: KindInfo) -> Resource:
    return Resource(API_GROUP, "v1beta1", info.plural, info.kind)


def child_resource(child: ChildKind) -> Resource:
    """The resource of a child kind a plugin declares (`t9kjobs_child_kinds`)."""
    group, _, version = child.api_version.rpartition("/")
    return Resource(group, version, child.plural, child.kind)


# The engine's own children. The kinds a plugin creates (PodGroups, NetworkPolicies, ...) are
# the plugin's to declare (`t9kjobs_child_kinds`), watched while the configured plugin declares
# them (`Operator`). TensorBoard belongs to another component: when its CRD is absent the
# planner leaves it out and reports it. Secrets are read for their metadata only: the operator
# creates a job's SSH Secret and never reads its data back (a Secret is never updated:
# `t9kjobs.planner`'s `_needs_update`).
CHILD_RESOURCES: dict[str, Resource] = {
    child_kind(r.api_version, r.kind): r
    for r in (
        Resource("", "v1", "pods", "Pod"),
        Resource("", "v1", "services", "Service"),
        Resource("", "v1", "configmaps", "ConfigMap"),
        Resource("", "v1", "secrets", "Secret", metadata_only=True),
        Resource("tensorstack.dev", "v1beta1", "tensorboards", "TensorBoard"),
        # Kueue's (queues, quotas, preemption): the engine's own queueing, not a plugin's
        # (t9kjobs.planner.queueing); watched only with `t9kjobs operator --kueue auto`.
        Resource("kueue.x-k8s.io", "v1beta2", "workloads", "Workload"),
    )
}
# Objects of Kueue's a queued job's plan reads, watched where Workloads are
# (`t9kjobs.planner.Kueue`): its ResourceFlavors and WorkloadPriorityClasses and the
# PriorityClasses of pods (cluster-wide), and its LocalQueues (in the namespaces watched).
KUEUE_RESOURCES: dict[str, Resource] = {
    r.kind: r
    for r in (
        Resource("kueue.x-k8s.io", "v1beta2", "resourceflavors", "ResourceFlavor"),
        Resource("kueue.x-k8s.io", "v1beta2", "workloadpriorityclasses", "WorkloadPriorityClass"),
        Resource("scheduling.k8s.io", "v1", "priorityclasses", "PriorityClass"),
        Resource("kueue.x-k8s.io", "v1beta2", "localqueues", "LocalQueue"),
    )
}
KUEUE_NAMESPACED = frozenset({"LocalQueue"})
