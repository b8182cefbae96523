"""Where a job's pods are placed together: its PodGroups, and what the job says when its gang
cannot be placed.

A gang object (a PodGroup: the T9k scheduler's `PodGroup`, or kube-scheduler's own
`PodGroup.scheduling.k8s.io`; built by the `scheduling` feature plugin) only serves to place
pods: a job with no pods to place (paused, finished) keeps none, so none is left behind it to
hold a queue's place or a scheduler's attention. kube-scheduler's PodGroup is immutable: one
whose count must change (the elastic minimum edited) is deleted, and created again by the next
reconcile (both as the plugin declares its kinds: `ChildKind.without_pods`, `.replaced`). A
deleted one of kube-scheduler's goes once no pod names it (podgroup-protection):
while it is on its way out, no new pod of the job is created (`t9kjobs.planner.running`).

A restart's replacement rejoins its gang, unless too few of the gang's members are left
for kube-scheduler to place it (`rejoin_or_alone`): then it is placed on its own.

The engine knows no gang object's format: the plugin that declares the kind says how one is
read (`ChildKind.gang`, a `GangFormat`: its size, its members, its own word on why it waits,
how a pod leaves it), and the plan gets that declaration as a value (`Observed.gangs`).

A gang that buys nothing (of one pod, or of pods that reserve nothing) is not made:
`t9kjobs.planner.idle_gangs`.

A gang that can never be complete (members ended after a replacement joined it) is said
as reason `GangIncomplete` and undone by `t9kjobs.planner.gangs`.

A gang that cannot be placed, because the cluster lacks room now or will never have enough,
waits in silence at the scheduler: its pods are Pending with a `PodScheduled` condition that
says why. The job repeats it in its own `Scheduled` condition (False, reason `Unschedulable`),
in `status.reason` (the REASON column of `kubectl get t9k`) and so in `describe`. The
condition turns True once the pods are placed, and is never written for a job that has no
gang: a cluster without gang scheduling shows nothing new.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from t9kjobs.features import GangFormat
from t9kjobs.models import JobStatus
from t9kjobs.objects import object_key
from t9kjobs.planner.children import pod_state
from t9kjobs.planner.conditions import set_condition
from t9kjobs.planner.gangs import GANG_INCOMPLETE, stranded
from t9kjobs.planner.types import Observed
from t9kjobs.vocabulary import Obj

__all__ = ["held_gangs", "placement", "rejoin_or_alone", "unplaced"]


def _condition(obj: Obj, type_: str) -> Obj | None:
    for condition in (obj.get("status") or {}).get("conditions") or []:
        if isinstance(condition, dict) and condition.get("type") == type_:
            return condition
    return None


def _placed(pod: Obj) -> bool:
    return bool((pod.get("spec") or {}).get("nodeName"))


def unplaced(gang: tuple[Obj, GangFormat] | None, pods: Sequence[Obj]) -> str | None:
    """Why the scheduler cannot place the gang now, from what its object says (`gang`: it,
    and how to read it; `GangFormat.waiting`) and its pods' scheduling conditions; None while
    nothing says it cannot, or once every pod is placed (a group's word may come later than
    its pods')."""
    if pods and all(_placed(p) for p in pods):
        return None
    said = [
        str(c.get("message") or "")
        for pod in sorted(pods, key=lambda p: str(p["metadata"]["name"]))
        if not pod["metadata"].get("deletionTimestamp")
        and not _placed(pod)
        and (c := _condition(pod, "PodScheduled")) is not None
        and c.get("status") == "False"
        and c.get("reason") == "Unschedulable"
    ]
    group_said = gang[1].says(gang[0]) if gang is not None else None
    if group_said:
        said.append(group_said)
    # What the nodes lack says more than that the group waits ("0/4 nodes are available: 4
    # Insufficient nvidia.com/gpu" rather than "pod group is unschedulable, waiting for ...").
    said = sorted((m for m in said if m), key=lambda m: "nodes are available" not in m)
    if not said:
        return None
    if gang is None:
        return said[0]
    group, read = gang
    kind, name = object_key(group)
    size = read.size(group)
    at_once = f"{size} pods at once" if size is not None else "its pods at once"
    return f"{kind} {name} ({at_once}) cannot be placed: {said[0]}"


def rejoin_or_alone(
    creating: Sequence[Obj],
    pods_by_name: Mapping[str, Obj],
    wanted: Sequence[tuple[Obj, GangFormat]],
) -> None:
    """New pods of a job whose gang has fewer members left than it needs are placed on their
    own: out of the gang (`GangFormat.leave`, in place: kube-scheduler's `spec.schedulingGroup`
    removed). Otherwise they join it: a restart's replacement rejoins its gang.

    kube-scheduler counts a gang's members among its pods that have not ended: a replacement
    created beside a member that failed for good, or succeeded, would wait for a `minCount` the
    group can no longer reach, for ever and without a condition (seen on KWOK). `wanted`: the
    gangs the job wants, each with how to read it (`Observed.gangs`); one whose members cannot
    leave it (no `leave`: the T9k scheduler's) is left as it is.

    Only members count: a pod placed on its own earlier (no `schedulingGroup`) is none to
    kube-scheduler. Counted as one, it once stranded two replacements of a job whose three
    pods had restarted together: the first went alone, the other two joined a gang of 3 that
    had two members (chaos tier)."""
    separable = [(group, gang, gang.leave) for group, gang in wanted if gang.leave is not None]
    if not separable:
        return
    group, gang, leave = separable[0]
    size = gang.size(group)
    if size is None:
        return
    names = {p["metadata"]["name"] for p in creating}
    live = sum(
        pod_state(pod) in ("Pending", "Running") and gang.counts(group, pod)
        for name, pod in pods_by_name.items()
        if name not in names
    )
    if live + len(creating) < size:
        for pod in creating:
            leave(pod)


def held_gangs(wanted: Iterable[Obj], observed: Observed) -> list[tuple[Obj, GangFormat]]:
    """The gang objects among `wanted` (not being deleted), as the cluster holds them, each
    with how to read it (`Observed.gangs`)."""
    held = ((observed.get(*object_key(o)), gang) for o, gang in observed.gangs(wanted))
    return [(group, gang) for group, gang in held if group is not None]


def placement(
    status: JobStatus, wanted: Iterable[Obj], observed: Observed, pods: Sequence[Obj], ts: str
) -> None:
    """The job's `Scheduled` condition, for a job with a gang (`wanted`: the children it wants,
    its gang objects among them; `observed`: as the cluster holds them; `pods`: its pods)."""
    groups = held_gangs(wanted, observed)
    if not groups:
        return
    incomplete = stranded(groups, pods)
    if incomplete is not None:
        before = status.condition("Scheduled")
        fresh = before is None or before.reason != GANG_INCOMPLETE or before.status != "False"
        set_condition(status, "Scheduled", False, GANG_INCOMPLETE, incomplete.message, ts)
        if fresh:  # the bound counts from now, not from an earlier Unschedulable
            condition = status.condition("Scheduled")
            assert condition is not None
            condition.last_transition_time = ts
        return
    why = unplaced(groups[0], pods)
    if why is not None:
        set_condition(status, "Scheduled", False, "Unschedulable", why, ts)
        return
    before = status.condition("Scheduled")
    if before is not None and before.status == "False" and pods and all(map(_placed, pods)):
        set_condition(status, "Scheduled", True, "Scheduled", "every pod is placed", ts)
