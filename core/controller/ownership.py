"""Names a job needs that objects it does not control hold.

Child names are deterministic, so a creation that meets AlreadyExists is most often an earlier
attempt of ours. But the object may also be the leftover of a deleted job of the same name that
the garbage collector has not removed yet, or another job's child whose generated name happens
to be the same (job `a` with replica type `b-c`, job `a-b` with type `c`): it is ours only if
the operator made it for this job (`owner`: its mark, `t9kjobs.controller.marks`; a controller
ownerReference alone is written as easily by anyone who may create the object). Anything else
is a conflict: remembered
per job, shown in the job's condition and a Warning Event (the planner's part), and looked at
again on each reconcile until the name is free. Objects are looked up with a list by name:
the operator's role lists children, it never gets them one by one. A Secret is looked up as
its metadata alone (`Resource.metadata_only`): an owner is all this reads.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from t9kjobs.kube.informer import Store
from t9kjobs.kube.resources import CHILD_RESOURCES, Resource
from t9kjobs.kube.transport import Transport
from t9kjobs.vocabulary import JobKey, Obj

__all__ = ["Held", "NameConflicts", "controller_of"]

Held = dict[tuple[str, str], str]  # (kind, name) -> who controls the object that holds it


def controller_of(obj: Obj, uid: str | None = None) -> str:
    """Who controls `obj`, for people: `its controller is GenericJob other (uid 1f2e...)`;
    `uid`: the job's, when `obj` names it as its controller though the operator did not make
    it for the job."""
    for ref in obj["metadata"].get("ownerReferences") or []:
        if ref.get("controller"):
            if uid is not None and ref.get("uid") == uid:
                return "it names this job as its controller, but the operator did not make it"
            return f"its controller is {ref.get('kind')} {ref.get('name')} (uid {ref.get('uid')})"
    return "it has no controller"


class NameConflicts:
    """The conflicts of each job, by job key; a job is handled by one worker at a time."""

    def __init__(
        self, transport: Transport, owner: Callable[[Obj], str | None] = Store.owner_uid
    ) -> None:
        """`owner`: the uid of the job an object belongs to (the operator's: its marks)."""
        self.transport = transport
        self.owner = owner
        self._held: dict[JobKey, tuple[str, Held]] = {}

    def lookup(self, namespace: str, resource: Resource, name: str) -> Obj | None:
        """The object of that resource and name, if any."""
        answer = self.transport.request(
            "GET",
            resource.path(namespace),
            query={"fieldSelector": f"metadata.name={name}"},
            accept=resource.list_accept,
        )
        items = answer.get("items") or []
        if not items:
            return None
        found: Obj = resource.typed(items[0])
        return found

    def still_held(
        self,
        key: JobKey,
        uid: str,
        stores: Mapping[str, Store],
        resources: Mapping[str, Resource] = CHILD_RESOURCES,
    ) -> Held:
        """The job's known conflicts, each looked at again: a name now free, or now held by
        an object of this job (its store gets it), is dropped."""
        remembered = self._held.get(key)
        if remembered is None or remembered[0] != uid:
            self._held.pop(key, None)
            return {}
        held: Held = {}
        for kind, name in remembered[1]:
            found = self.lookup(key[1], resources[kind], name)
            if found is None:
                continue
            if self.owner(found) == uid:
                if kind in stores:
                    stores[kind].put(found)
                continue
            held[(kind, name)] = controller_of(found, uid)
        self.remember(key, uid, held)
        return held

    def remember(self, key: JobKey, uid: str, held: Held) -> None:
        if held:
            self._held[key] = (uid, dict(held))
        else:
            self._held.pop(key, None)

    def forget(self, key: JobKey) -> None:
        self._held.pop(key, None)
