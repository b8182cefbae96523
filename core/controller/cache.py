"""What the informers hold, as a reconcile reads it, and where a reconcile records the API's
answers.

The stores are the informers' (`t9kjobs.kube.informer`). A reconcile puts every answer of the
API server into them (`record`), so that the next reconcile of the same job sees what this one
did even before the watch reports it; a store never goes back in time, so a late watch event
cannot undo an answer. The maps are replaced whole, never changed in place, when discovery
starts serving a kind (`Operator`): a worker never sees one change under it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from t9kjobs.controller.failing import CannotHandle
from t9kjobs.kube.informer import Store
from t9kjobs.kube.resources import CHILD_RESOURCES, Resource
from t9kjobs.objects import child_kind
from t9kjobs.planner import Kueue, ObjectRef
from t9kjobs.vocabulary import JobKey, Obj

__all__ = ["Cache"]


@dataclass(frozen=True)
class Cache:
    """The stores of the job kinds served and of their child kinds, the child kinds the
    cluster does not serve (their CRD is not installed), and the stores of the cluster-wide
    objects of Kueue a queued job's plan reads (`kueue`, by kind: where Workloads are
    watched and served)."""

    job_resources: Mapping[str, Resource] = field(default_factory=dict)
    job_stores: Mapping[str, Store] = field(default_factory=dict)
    child_stores: Mapping[str, Store] = field(default_factory=dict)
    absent_kinds: frozenset[str] = frozenset()
    kueue_stores: Mapping[str, Store] = field(default_factory=dict)
    # Where each child kind is written: the engine's own and those the configured plugins
    # declare (`Operator`, `t9kjobs_child_kinds`).
    child_resources: Mapping[str, Resource] = field(default_factory=lambda: dict(CHILD_RESOURCES))

    def child_resource(self, kind: str) -> Resource:
        """Where children of `kind` are written; one of a kind no plugin declares cannot be
        (a plugin that creates it without `t9kjobs_child_kinds`: the kit's
        `children_are_of_declared_kinds` says so before it ships)."""
        resource = self.child_resources.get(kind)
        if resource is None:
            raise CannotHandle(
                f"the child kind {kind} is declared by no plugin (t9kjobs_child_kinds): the"
                " operator neither watches it nor knows where to write it"
            )
        return resource

    def kueue(self) -> Kueue | None:
        """Kueue's objects as a plan reads them; None where Workloads are not watched and
        served."""
        if "Workload" not in self.child_stores or not self.kueue_stores:
            return None

        def by_name(kind: str) -> dict[str, Obj]:
            store = self.kueue_stores.get(kind)
            return {o["metadata"]["name"]: o for o in store.all()} if store is not None else {}

        def values(kind: str) -> dict[str, int]:
            return {
                name: int(value)
                for name, obj in by_name(kind).items()
                if isinstance(value := obj.get("value"), int)
            }

        t9k_served = "PodGroup" in self.child_stores and "PodGroup" not in self.absent_kinds
        queues = self.kueue_stores.get("LocalQueue")
        return Kueue(
            flavors=by_name("ResourceFlavor"),
            workload_priorities=values("WorkloadPriorityClass"),
            pod_priorities=values("PriorityClass"),
            local_queues=frozenset(
                (str(q["metadata"].get("namespace", "")), str(q["metadata"]["name"]))
                for q in (queues.all() if queues is not None else [])
            ),
            t9k_queues=not t9k_served,
        )

    def job(self, key: JobKey) -> Obj | None:
        store = self.job_stores.get(key.kind)
        return store.get(key.namespace, key.name) if store is not None else None

    def children(self, uid: str) -> list[Obj]:
        """Every child the job of this uid controls, of every kind watched."""
        return [o for store in self.child_stores.values() for o in store.owned_by(uid)]

    def pods(self, uid: str) -> list[Obj]:
        pods = self.child_stores.get("Pod")
        return pods.owned_by(uid) if pods is not None else []

    def record(self, kind: str, answer: Obj) -> bool:
        """Put the API's answer about an object of `kind` (a job or a child) into its store;
        False when no store holds that kind."""
        store = self.job_stores.get(kind)
        if store is None:
            store = self.child_stores.get(kind)
        if store is None:
            return False
        store.put(answer)
        return True

    def record_deletion(self, namespace: str, ref: ObjectRef, answer: Obj) -> None:
        """A child deleted: marked for deletion (a pod ends gracefully), or gone."""
        store = self.child_stores.get(child_kind(ref.api_version, ref.kind))
        if store is None:
            return
        meta = answer.get("metadata") or {}
        if answer.get("kind") == ref.kind and meta.get("deletionTimestamp"):
            store.put(answer)
        else:
            store.remove(namespace, ref.name)
