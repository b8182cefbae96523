"""The API resources the controller reads and writes, and their REST paths."""

from __future__ import annotations

from dataclasses import dataclass

from t9kjobs.kinds import KindInfo
from t9kjobs.models import API_GROUP

__all__ = ["CHILD_RESOURCES", "Resource", "job_resource"]


@dataclass(frozen=True)
class Resource:
    group: str  # "" for the core group
    version: str
    plural: str
    kind: str

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


def job_resource(info: KindInfo) -> Resource:
    return Resource(API_GROUP, "v1beta1", info.plural, info.kind)


# Children a job may own. PodGroup and TensorBoard belong to other components: when their CRD
# is absent the planner leaves them out and reports it.
CHILD_RESOURCES: dict[str, Resource] = {
    r.kind: r
    for r in (
        Resource("", "v1", "pods", "Pod"),
        Resource("", "v1", "services", "Service"),
        Resource("", "v1", "configmaps", "ConfigMap"),
        Resource("", "v1", "secrets", "Secret"),
        Resource("scheduler.tensorstack.dev", "v1beta1", "podgroups", "PodGroup"),
        Resource("tensorstack.dev", "v1beta1", "tensorboards", "TensorBoard"),
    )
}
