"""The requests that apply a Plan, each answer recorded in the cache (`Cache.record`): its
deletions, its updates, the status patches of its children (a Workload's), its creations.

Creations go in two waves, each wave's requests at once: the objects pods use (Services,
ConfigMaps, Secrets, PodGroups), then the pods; a job's pods cost one round trip, not one each.
NotFound and Conflict are normal, and so is AlreadyExists for an object this job controls
(names are deterministic, so a retry can never create a duplicate); one it does not control is
a conflict (`t9kjobs.controller.ownership`), and while the objects the pods use meet one, no
pod is created: ownership before use. A refusal the same request would get again is
`ChildRejected` (`t9kjobs.controller.failing`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from concurrent.futures import Executor

from t9kjobs.controller.cache import Cache
from t9kjobs.controller.failing import ChildRejected, refused_for_good
from t9kjobs.controller.ownership import Held, NameConflicts, controller_of
from t9kjobs.kube.informer import Store
from t9kjobs.kube.transport import ApiError, Transport
from t9kjobs.objects import child_kind, object_key
from t9kjobs.planner import ObjectRef, Plan
from t9kjobs.ssh import fill_generated_secret
from t9kjobs.vocabulary import JobKey, Obj

__all__ = ["Applier"]


class Applier:
    def __init__(
        self,
        api: Transport,
        conflicts: NameConflicts,
        creator: Executor | None,
        mark: Callable[[Obj, str], Obj] = lambda obj, namespace: obj,
    ) -> None:
        """`creator` runs the requests of a creation wave at once (serially without one); it
        may be shared by all workers, and its size bounds the creations in flight. `mark`:
        an object to write into a namespace, with the operator's mark of whose it is
        (`t9kjobs.controller.marks`); `conflicts.owner` reads those marks."""
        self.api = api
        self.conflicts = conflicts
        self.creator = creator
        self.mark = mark
        # Called with `ObjectRef.forced` once a pod is force-deleted (the operator's metric).
        self.forced: Callable[[str], None] = lambda reason: None

    def status(self, cache: Cache, key: JobKey, raw: Obj, status: Obj) -> None:
        """Write the job's status through its status subresource."""
        # The status subresource takes only the status (and the resourceVersion): the spec is
        # not sent, so a job of any size or depth costs the same small write.
        body: Obj = {k: raw[k] for k in ("apiVersion", "kind", "metadata") if k in raw}
        body["status"] = status
        path = cache.job_resources[key.kind].path(key.namespace, key.name, "status")
        cache.record(key.kind, self.api.request("PUT", path, body=body))

    def probe(self, cache: Cache, namespace: str, objs: Sequence[Obj]) -> None:
        """Submit `objs` as a dry run (`Plan.probe`): ChildRejected for the first the API
        server refuses for good. Any other answer is no verdict (a conflict, a quota, a kind
        not served): the creation itself meets it later, and it holds nothing back now."""
        for obj in objs:
            kind, _ = object_key(obj)
            body = self.mark(obj, namespace)  # an SSH Secret's placeholders: no keys made
            path = cache.child_resource(kind).path(namespace)
            try:
                self.api.request("POST", path, query={"dryRun": "All"}, body=body)
            except ApiError as exc:
                if refused_for_good(exc):
                    raise ChildRejected(obj, exc) from exc

    def objects(self, cache: Cache, namespace: str, plan: Plan, found: Held) -> bool:
        """Deletions, updates and creations of the Plan (not its status, not its events);
        names held by objects the job does not control go into `found`. True when every
        object created is in the cache now (its kind has a store)."""
        for ref in plan.delete:
            self._delete(cache, namespace, ref)
        for obj in plan.update:
            self._update(cache, namespace, obj)
        for obj in plan.patch_status:
            self._patch_status(cache, namespace, obj)
        recorded = self._create_all(
            cache, namespace, [o for o in plan.create if o["kind"] != "Pod"], found
        )
        if found:
            # Ownership before use: an object the pods would use (a Secret, a ConfigMap, the
            # Service that names them) is held by another; the next plan says so, no pod.
            return recorded
        pods = [o for o in plan.create if o["kind"] == "Pod"]
        return self._create_all(cache, namespace, pods, found) and recorded

    def _create_all(self, cache: Cache, namespace: str, objs: list[Obj], found: Held) -> bool:
        """Create `objs` at once; the first error once every request has ended. Names held by
        objects the job does not control go into `found`."""
        if self.creator is None or len(objs) < 2:
            outcomes = [self._create(cache, namespace, obj) for obj in objs]
        else:
            futures = [self.creator.submit(self._create, cache, namespace, obj) for obj in objs]
            errors = [e for e in (f.exception() for f in futures) if e is not None]
            outcomes = [f.result() for f in futures if f.exception() is None]
            if errors:
                found.update(held for held, _ in outcomes if held is not None)
                raise errors[0]
        found.update(held for held, _ in outcomes if held is not None)
        return all(recorded for _, recorded in outcomes)

    def _create(
        self, cache: Cache, namespace: str, obj: Obj
    ) -> tuple[tuple[tuple[str, str], str] | None, bool]:
        """Create `obj`: its (kind, name) and holder if an object this job does not control
        already has the name, and whether the answer is in the cache."""
        kind, name = object_key(obj)
        body = self.mark(fill_generated_secret(obj), namespace)
        try:
            answer = self.api.request("POST", cache.child_resource(kind).path(namespace), body=body)
        except ApiError as exc:
            if exc.status != 409:
                if refused_for_good(exc):
                    raise ChildRejected(obj, exc) from exc
                raise
            existing = self.conflicts.lookup(namespace, cache.child_resource(kind), name)
            if existing is None:
                raise  # gone since: the retry creates it
            uid = Store.owner_uid(obj)
            if self.conflicts.owner(existing) != uid:
                return ((kind, name), controller_of(existing, uid)), True
            answer = existing  # an earlier attempt made it
        return None, cache.record(kind, answer)

    def _update(self, cache: Cache, namespace: str, obj: Obj) -> None:
        kind, name = object_key(obj)
        path = cache.child_resource(kind).path(namespace, name)
        try:
            answer = self.api.request("PUT", path, body=self.mark(obj, namespace))
        except ApiError as exc:
            if refused_for_good(exc):
                raise ChildRejected(obj, exc) from exc
            raise
        cache.record(kind, answer)

    def _patch_status(self, cache: Cache, namespace: str, obj: Obj) -> None:
        """A merge patch of a child's status subresource; its resourceVersion makes it apply
        only to the object it was computed from (409 otherwise: the next reconcile sees the
        news). A child gone meanwhile needs no status."""
        kind, name = object_key(obj)
        path = cache.child_resource(kind).path(namespace, name, "status")
        try:
            answer = self.api.request(
                "PATCH",
                path,
                body={"metadata": obj["metadata"], "status": obj["status"]},
                content_type="application/merge-patch+json",
            )
        except ApiError as exc:
            if exc.status == 404:
                return
            if refused_for_good(exc):
                raise ChildRejected(obj, exc) from exc
            raise
        cache.record(kind, answer)

    def _delete(self, cache: Cache, namespace: str, ref: ObjectRef) -> None:
        body: Obj = {"kind": "DeleteOptions", "apiVersion": "v1", "propagationPolicy": "Background"}
        if ref.uid:
            body["preconditions"] = {"uid": ref.uid}
        if ref.grace_period_seconds is not None:
            body["gracePeriodSeconds"] = ref.grace_period_seconds
        resource = cache.child_resource(child_kind(ref.api_version, ref.kind))
        path = resource.path(namespace, ref.name)
        try:
            answer = self.api.request("DELETE", path, body=body)
        except ApiError as exc:
            if exc.status in (404, 409):  # gone already, or replaced by a newer object
                return
            raise
        cache.record_deletion(namespace, ref, answer)
        if ref.forced is not None:
            self.forced(ref.forced)
