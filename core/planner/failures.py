"""What kind of failure a failed pod is: `classify(pod, training_container) -> Failure`.

The recovery rules (`spec.recoveryPolicy`, `t9kjobs.planner.rules`) match a failure by its
reason, its exit code and the pod's `DisruptionTarget` condition; this module reads them from
the pod as the informer's store keeps it (`t9kjobs.kube.slimming` keeps exactly what is read
here: that condition's type, status and reason, `status.reason`, a cut `status.message`, and
each container's terminated state). Pure: the same pod gives the same failure.

The first that applies decides, most specific first: who disrupted the pod (Kubernetes says so
in `DisruptionTarget`, or in the kubelet's `status.reason`) comes before what the program did,
because a program killed by an eviction exits 137 like one killed for its own memory use, and
the disruption is the cause the rules want to charge. A pod Kueue failed because it waited on
a node Kueue's Topology-Aware Scheduling took for failed (condition `TerminatedByKueue`, reason
`UnschedulableOnAssignedNode`: ungated onto a lost node's slot before Kueue replaced the node)
never ran: `NodeLost`, charged to the infrastructure like the pod lost with that node.
"""

from __future__ import annotations

from dataclasses import dataclass

from t9kjobs.vocabulary import Obj

__all__ = [
    "DISRUPTION",
    "KUEUE_TERMINATED",
    "Failure",
    "classify",
    "disruption_of",
    "exit_code_of",
    "exit_of",
]

DISRUPTION = "DisruptionTarget"

# DisruptionTarget reasons (k8s.io/api/core/v1: PodReasonPreemptionByScheduler...), by reason.
_NODE_LOST = frozenset({"DeletionByTaintManager", "DeletionByPodGC"})
_PREEMPTED = frozenset({"PreemptionByScheduler", "PreemptionByKubeScheduler"})
_EVICTED = frozenset({"EvictionByEvictionAPI", "TerminationByKubelet"})
# The kubelet's `status.reason` of a pod it stopped (node-pressure eviction, graceful node
# shutdown); `NodeLost` is what the node controller wrote before v1.26.
_EVICTED_STATUS = frozenset({"Evicted", "NodeShutdown", "Shutdown", "Terminated"})
_NODE_LOST_STATUS = frozenset({"NodeLost"})
# Kueue's TAS node controller's condition on a pod it failed for its node (module docstring).
KUEUE_TERMINATED = "TerminatedByKueue"


def exit_of(pod: Obj, training_container: str | None) -> tuple[str, int] | None:
    """(container, exit code) of the training container, else of the first container with a
    non-zero one, else of the first that terminated; None while none has terminated."""
    statuses = (pod.get("status") or {}).get("containerStatuses") or []
    codes: dict[str, int] = {}
    for cs in statuses:
        terminated = (cs.get("state") or {}).get("terminated") or (cs.get("lastState") or {}).get(
            "terminated"
        )
        if terminated and terminated.get("exitCode") is not None:
            codes[str(cs.get("name"))] = int(terminated["exitCode"])
    if training_container in codes:
        return str(training_container), codes[str(training_container)]
    nonzero = [(name, code) for name, code in codes.items() if code != 0]
    if nonzero:
        return nonzero[0]
    return next(iter(codes.items()), None)


def exit_code_of(pod: Obj, training_container: str | None) -> int | None:
    """The exit code `exit_of` reports, if any."""
    found = exit_of(pod, training_container)
    return found[1] if found else None


@dataclass(frozen=True)
class Failure:
    """A failed pod, as the rules read it."""

    reason: str  # NodeLost, Preempted, Evicted, OOMKilled or Error
    exit_code: int | None  # of `container`, when one terminated
    container: str | None
    condition: Obj | None  # the pod's DisruptionTarget condition, as kept
    pod_reason: str | None  # status.reason
    node: str | None = None  # the node the pod ran on (spec.nodeName), for the restart history

    def describe(self, name: str) -> str:
        """`<pod> failed with exit code N (container C)`, or `<pod> failed: <reason> (...)`
        when no exit code says it: how the status and Events name the failure."""
        if self.exit_code is not None and self.reason in ("Error", "OOMKilled"):
            container = f" (container {self.container})" if self.container else ""
            oom = ", OOMKilled" if self.reason == "OOMKilled" else ""
            return f"{name} failed with exit code {self.exit_code}{container}{oom}"
        why = [self.reason]
        if self.condition is not None:
            why.append(f"{DISRUPTION} {self.condition.get('reason') or ''}".rstrip())
        elif self.pod_reason:
            why.append(f"status.reason {self.pod_reason}")
        return f"{name} failed: {why[0]}" + (f" ({why[1]})" if len(why) > 1 else "")


def disruption_of(pod: Obj) -> Obj | None:
    """The pod's `DisruptionTarget` condition, when it has one."""
    for condition in (pod.get("status") or {}).get("conditions") or []:
        if condition.get("type") == DISRUPTION:
            return dict(condition)
    return None


def _terminated_reason(pod: Obj, container: str | None) -> str | None:
    for cs in (pod.get("status") or {}).get("containerStatuses") or []:
        if cs.get("name") != container:
            continue
        terminated = (cs.get("state") or {}).get("terminated") or (cs.get("lastState") or {}).get(
            "terminated"
        )
        return str(terminated.get("reason")) if terminated and terminated.get("reason") else None
    return None


def classify(pod: Obj, training_container: str | None) -> Failure:
    """The failure a failed pod is (module docstring: the first that applies decides)."""
    exited = exit_of(pod, training_container)
    container, code = exited if exited else (None, None)
    condition = disruption_of(pod)
    pod_reason = (pod.get("status") or {}).get("reason")
    disrupted = condition if condition is not None and condition.get("status") == "True" else None
    by = (disrupted or {}).get("reason")
    by_kueue = any(
        c.get("type") == KUEUE_TERMINATED and c.get("status") == "True"
        for c in (pod.get("status") or {}).get("conditions") or []
    )
    if by in _NODE_LOST or pod_reason in _NODE_LOST_STATUS or by_kueue:
        reason = "NodeLost"
    elif by in _PREEMPTED:
        reason = "Preempted"
    elif by in _EVICTED or pod_reason in _EVICTED_STATUS:
        reason = "Evicted"
    elif _terminated_reason(pod, container) == "OOMKilled":
        reason = "OOMKilled"
    else:
        reason = "Error"
    node = (pod.get("spec") or {}).get("nodeName")
    return Failure(reason, code, container, condition, pod_reason, str(node) if node else None)
