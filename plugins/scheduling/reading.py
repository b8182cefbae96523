"""How the engine reads the two PodGroup formats this plugin writes (`GangFormat`, declared with
each kind: `ChildKind.gang`).

The engine says why a gang waits, notices one that can never be complete and places a
replacement on its own when too few members are left, for any plugin's gang; the format of
the object is this plugin's, so it reads it here and the engine asks (docs/scheduling.md):

* **kube-scheduler's** (`scheduling.k8s.io/v1alpha2`): the size is
  `spec.schedulingPolicy.gang.minCount`; a member is a pod whose
  `spec.schedulingGroup.podGroupName` names the group, so a pod leaves the gang when that
  field goes (the scheduler then places it on its own).
* **the T9k scheduler's** (`scheduler.tensorstack.dev/v1beta1`): the size is
  `spec.minMember`; every pod of the job is a member (they all carry the group's label), and
  none can leave it: the engine cannot take the label off one pod.

Both say why they wait in a `PodGroupScheduled` condition that is False.
"""

from __future__ import annotations

from t9kjobs.plugin import GangFormat, Obj

__all__ = ["NATIVE_GANG", "T9K_GANG"]


def _int(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _min_count(group: Obj) -> int | None:
    """kube-scheduler's gang size: `spec.schedulingPolicy.gang.minCount`."""
    policy = (group.get("spec") or {}).get("schedulingPolicy") or {}
    return _int((policy.get("gang") or {}).get("minCount"))


def _min_member(group: Obj) -> int | None:
    """The T9k scheduler's gang size: `spec.minMember`."""
    return _int((group.get("spec") or {}).get("minMember"))


def _member_native(group: Obj, pod: Obj) -> bool:
    """A pod is a member of kube-scheduler's gang when its `spec.schedulingGroup` names it."""
    joined = ((pod.get("spec") or {}).get("schedulingGroup") or {}).get("podGroupName")
    return isinstance(joined, str) and joined == group["metadata"]["name"]


def _leave_native(pod: Obj) -> None:
    """Takes a pod out of kube-scheduler's gang: without `spec.schedulingGroup`, it is placed
    on its own."""
    (pod.get("spec") or {}).pop("schedulingGroup", None)


def _waiting(group: Obj) -> str | None:
    """Why the scheduler says the group cannot be placed now: its `PodGroupScheduled`
    condition, when False (its message, else its reason)."""
    for condition in (group.get("status") or {}).get("conditions") or []:
        if isinstance(condition, dict) and condition.get("type") == "PodGroupScheduled":
            if condition.get("status") != "False":
                return None
            return str(condition.get("message") or condition.get("reason") or "") or None
    return None


NATIVE_GANG = GangFormat(_min_count, member=_member_native, waiting=_waiting, leave=_leave_native)
T9K_GANG = GangFormat(_min_member, waiting=_waiting)
