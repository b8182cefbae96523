"""Pods on lost nodes: which of a job's pods its plan gives up on, and where new pods go.

A pod whose node stopped answering stays `Running` in the API: only its kubelet may say it
ended, and a kubelet that is gone says nothing. The taint manager deletes it gracefully after
its tolerations (300 s by default), and it then stays `Terminating` for ever: no kubelet
confirms. So the plan reads the nodes its pods name (`Observed.nodes`, built by the controller
from a cluster-wide Node informer) and decides, by these rules (docs/lifecycle.md, "Recovery
rules"):

1. A node whose `Ready` condition is True: never act, whatever the pod says (its kubelet is
   alive and will end the pod: no second copy beside it). A pod Terminating there long past
   its grace gets a Warning Event `PodStuckTerminating`, nothing else.
2. A node the watch saw deleted: its pods are lost at once. One the synced node store never
   held (deleted while no operator watched): lost `MISSING_NODE_SECONDS` after the controller
   first noticed it missing, whatever the job's bound (a node created a moment ago reaches the
   store well within them; kube-controller-manager's PodGC would delete the pods after 40 s,
   and the replacement would then count as nothing).
3. A node `Ready` False or Unknown for the bound (`recoveryPolicy.nodeLostAfterSeconds`, else
   the operator's `--lost-node-seconds`), counted from the condition's `lastTransitionTime`,
   i.e. after the node lifecycle controller's own verdict: a live pod there is lost (failure
   `NodeLost`, through the recovery rules: `t9kjobs.planner.replicas`), a pod already
   Terminating there is force-deleted, with no new failure.

`Observed.nodes` None (detection off, the node store not synced, listing nodes refused): no
pod is ever lost for a node reason. Pure: the same pods, nodes and time give the same verdicts.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from t9kjobs.models.recovery import RecoveryPolicy
from t9kjobs.planner.children import deletion
from t9kjobs.planner.conditions import parse_time
from t9kjobs.planner.situation import Changes
from t9kjobs.planner.types import Event, NodeState, Observed
from t9kjobs.vocabulary import Obj

__all__ = [
    "FORCED_LOST",
    "FORCED_TERMINATING",
    "MAX_AVOIDED_NODES",
    "MISSING_NODE_SECONDS",
    "STUCK_TERMINATING_SECONDS",
    "Lost",
    "as_lost",
    "avoid",
    "bound_of",
    "lost",
    "lost_pods",
    "next_check",
    "remember_lost",
    "stuck_terminating",
    "with_lost_nodes",
]

# Why a pod is force-deleted (`ObjectRef.forced`, t9kjobs_pods_force_deleted_total{reason}): a
# live pod on a lost node, the job's failure; a pod already Terminating there, no kubelet ends.
FORCED_LOST = "NodeLost"
FORCED_TERMINATING = "TerminatingOnLostNode"
# The pods a job creates avoid at most this many of the nodes it lost pods on (the newest).
MAX_AVOIDED_NODES = 16
# A node the synced store never held is deleted after this long (rule 2).
MISSING_NODE_SECONDS = 10.0
# A pod Terminating on a Ready node this long past its deletionTimestamp + grace is said stuck.
STUCK_TERMINATING_SECONDS = 60.0
# How long after the bound a stuck pod is said: the reconciles in that window say it.
_STUCK_SAID_FOR = 30.0
HOSTNAME = "kubernetes.io/hostname"
# What the node lifecycle controller taints an unreachable node with.
UNREACHABLE_TAINT = "node.kubernetes.io/unreachable"


@dataclass(frozen=True)
class Lost:
    """A pod the plan gives up on: its node, and why, in words for the status and Events."""

    node: str
    why: str


def bound_of(recovery: RecoveryPolicy | None, observed: Observed) -> float:
    """The job's bound: its `recoveryPolicy.nodeLostAfterSeconds`, else the operator's."""
    if recovery is not None and recovery.node_lost_after_seconds is not None:
        return float(recovery.node_lost_after_seconds)
    return observed.lost_node_seconds


def _node_of(pod: Obj) -> str | None:
    name = (pod.get("spec") or {}).get("nodeName")
    return str(name) if name else None


def _not_ready_for(node: NodeState, now: datetime) -> float | None:
    """Seconds the node has been not Ready; None while it is Ready, or says nothing yet (no
    Ready condition: a node registering, with no time to count from)."""
    if node.ready == "True" or node.since is None:
        return None
    return max(0.0, (now - node.since).total_seconds())


def _bound(node: NodeState, bound: float) -> float:
    """The job's bound, or the shorter one of a node the store never held (rule 2)."""
    return min(bound, MISSING_NODE_SECONDS) if node.missing else bound


def _at_stake(pod: Obj) -> bool:
    """Whether a lost node holds the pod up: it is Terminating, or has not ended (an ended
    pod's replica is judged by how it ended, wherever its node is)."""
    phase = (pod.get("status") or {}).get("phase")
    return bool(pod["metadata"].get("deletionTimestamp")) or phase not in ("Succeeded", "Failed")


def lost(
    pod: Obj, nodes: Mapping[str, NodeState] | None, now: datetime, bound: float
) -> Lost | None:
    """Whether `pod` is lost with its node (rules 2 and 3 of the module docstring); never
    one that has ended."""
    name = _node_of(pod)
    if nodes is None or name is None or not _at_stake(pod):
        return None
    node = nodes.get(name)
    if node is None:
        return None  # not read: never a verdict on a node the controller did not look at
    if not node.present:
        return Lost(name, f"node {name} was deleted")
    down = _not_ready_for(node, now)
    if down is None or down < _bound(node, bound):
        return None
    if node.missing:
        return Lost(name, f"node {name} absent from the cluster for {down:.0f}s")
    how = ", unreachable" if node.unreachable else ""
    return Lost(name, f"node {name} not Ready ({node.ready}{how}) for {down:.0f}s")


def lost_pods(
    pods: Iterable[Obj], nodes: Mapping[str, NodeState] | None, now: datetime, bound: float
) -> dict[str, Lost]:
    """The pods lost with their node, by name: Terminating ones too (their node is lost all
    the same; only the live ones are judged as failed, `t9kjobs.planner.plan`)."""
    out: dict[str, Lost] = {}
    for pod in pods:
        why = lost(pod, nodes, now, bound)
        if why is not None:
            out[pod["metadata"]["name"]] = why
    return out


def next_check(
    pods: Iterable[Obj], nodes: Mapping[str, NodeState] | None, now: datetime, bound: float
) -> float | None:
    """Seconds until a node of these pods that is not Ready reaches the bound (`since + bound -
    now`), the soonest; None when no such wait is left."""
    if nodes is None:
        return None
    waits = []
    for pod in pods:
        node = nodes.get(_node_of(pod) or "")
        if node is None or not node.present or not _at_stake(pod):
            continue
        down = _not_ready_for(node, now)
        if down is not None and down < _bound(node, bound):
            waits.append(_bound(node, bound) - down)
    return min(waits, default=None)


def stuck_terminating(
    pod: Obj, nodes: Mapping[str, NodeState] | None, now: datetime
) -> float | None:
    """For a pod Terminating on a Ready node: seconds past its deletionTimestamp + grace + 60 s
    (negative: not stuck yet); None for any other pod (rule 1 of the module docstring)."""
    meta = pod["metadata"]
    deleted = meta.get("deletionTimestamp")
    node = (nodes or {}).get(_node_of(pod) or "")
    if not deleted or node is None or not node.present or node.ready != "True":
        return None
    # deletionTimestamp is when the grace ends: the API server adds the grace to the request.
    due = parse_time(str(deleted)) + timedelta(seconds=STUCK_TERMINATING_SECONDS)
    return (now - due).total_seconds()


def stuck_said(past: float | None) -> bool:
    """Whether the reconcile `past` seconds after the stuck bound says it (the first ones)."""
    return past is not None and 0 <= past < _STUCK_SAID_FOR


def as_lost(pod: Obj, why: Lost) -> Obj:
    """The pod as the recovery rules judge it: failed, `status.reason` NodeLost (what the node
    controller wrote itself before Kubernetes 1.26: `t9kjobs.planner.failures` reads it), its
    containers as they were. A copy: the cache's pod is never changed."""
    out = copy.deepcopy(pod)
    status = out.setdefault("status", {})
    status["phase"] = "Failed"
    status["reason"] = "NodeLost"
    status["message"] = why.why
    return out


def remember_lost(before: Sequence[str] | None, nodes: Sequence[str]) -> list[str] | None:
    """`status.lostNodes` with `nodes` added (newest last, each once, the newest 16); as it
    was when none is added."""
    if not nodes:
        return None if before is None else list(before)
    kept = [n for n in before or [] if n not in nodes]
    return [*kept, *dict.fromkeys(nodes)][-MAX_AVOIDED_NODES:]


def avoid(pod: Obj, names: Sequence[str] | None) -> None:
    """Make `pod` prefer nodes other than `names` (avoidance, rule 4): a preferred
    anti-affinity term (weight 100) `kubernetes.io/hostname NotIn names`, appended to the
    template's own affinity. Preferred, not required: a lost node that comes back is still a
    place to run. Applied after the pod's spec hash was computed: it never relaunches a pod."""
    if not names:
        return
    affinity = pod["spec"].setdefault("affinity", {})
    node_affinity = affinity.setdefault("nodeAffinity", {})
    preferred = node_affinity.setdefault("preferredDuringSchedulingIgnoredDuringExecution", [])
    preferred.append(
        {
            "weight": 100,
            "preference": {
                "matchExpressions": [
                    {
                        "key": HOSTNAME,
                        "operator": "NotIn",
                        "values": list(names)[-MAX_AVOIDED_NODES:],
                    }
                ]
            },
        }
    )


def with_lost_nodes(changes: Changes, observed: Observed, now: datetime, bound: float) -> Changes:
    """`changes`, plus what the nodes of Terminating pods call for: a pod Terminating on a lost
    node force-deleted (no new failure: whoever deleted it decided; its replacement, if the job
    wants one, is created once it is gone), a Warning Event for one stuck on a Ready node, and
    a requeue when a node reaches the bound or a pod the stuck bound."""
    if observed.nodes is None:
        return changes
    deletes = list(changes.delete)
    events = list(changes.events)
    waits = [w for w in (changes.requeue_after,) if w is not None]
    deleting = {(d.kind, d.name) for d in deletes}
    for pod in observed.pods():
        if not pod["metadata"].get("deletionTimestamp"):
            continue
        name = pod["metadata"]["name"]
        why = lost(pod, observed.nodes, now, bound)
        if why is not None and pod["metadata"].get("deletionGracePeriodSeconds") == 0:
            continue  # forced already: only its finalizers, if any, keep it
        if why is not None:
            if ("Pod", name) not in deleting:
                deletes.append(deletion(pod, force=FORCED_TERMINATING))
                events.append(Event("Warning", "NodeLost", f"{name} force-deleted: {why.why}"))
            continue
        past = stuck_terminating(pod, observed.nodes, now)
        if stuck_said(past):
            events.append(
                Event(
                    "Warning",
                    "PodStuckTerminating",
                    f"{name} is still Terminating {STUCK_TERMINATING_SECONDS:.0f}s past its"
                    f" grace period on node {_node_of(pod)}, which is Ready: its kubelet has not"
                    " stopped it; the operator does not force a pod on a live node",
                )
            )
        elif past is not None and past < 0:
            waits.append(-past)
    wait = next_check(observed.pods(), observed.nodes, now, bound)
    if wait is not None:
        waits.append(wait)
    return Changes(
        create=changes.create,
        update=changes.update,
        delete=tuple(deletes),
        patch_status=changes.patch_status,
        events=tuple(events),
        requeue_after=min(waits, default=None),
    )
