"""The contract on queues: every job of the kind waits in a Kueue queue as Kueue's own
integrations do (docs/scheduling.md), with nothing of the plugin's own to write.

The engine keeps Kueue's Workload protocol for every kind (`t9kjobs.planner.queueing`): a
queued job's first reconcile creates its Workload and no pod, and its pods come once Kueue
admits it, with their flavors. What a plugin decides is what Kueue is asked to admit: its pods,
grouped by replica type into podSets. Kueue refuses a Workload of more than 8 podSets, so a
kind whose jobs have more replica types can never be queued.
"""

from __future__ import annotations

import copy
from dataclasses import replace

from t9kjobs.planner import Kueue, Observed, plan
from t9kjobs.planner.queueing import LABEL_QUEUE_NAME
from t9kjobs.planner.workloads import WORKLOAD
from t9kjobs.testing.kit.examples import Example
from t9kjobs.testing.kit.subject import EPOCH, Subject
from t9kjobs.testing.kit.violation import ContractViolation
from t9kjobs.vocabulary import Obj

__all__ = ["jobs_wait_in_queues"]

# Kueue's limit on a Workload's podSets (its CRD's maxItems).
MAX_POD_SETS = 8
_FLAVOR_LABEL = "conformance.t9kjobs.dev/flavor"
_KUEUE = Kueue(
    flavors={"kit": {"metadata": {"name": "kit"}, "spec": {"nodeLabels": {_FLAVOR_LABEL: "kit"}}}}
)


def jobs_wait_in_queues(subject: Subject, example: Example) -> None:
    """A queued job has no pod until Kueue admits it, then all of them, on their flavor.

    Labelled `kueue.x-k8s.io/queue-name`, the example's first reconcile creates one Workload
    and no pod: at most 8 podSets (Kueue's limit), whose counts add up to the pods the job has
    unqueued. Admitted (each podSet on a flavor with a node label), the next reconcile creates
    every one of those pods, each with the flavor's node label in its `nodeSelector`.
    """
    job = subject.job(example)
    unqueued = [o for o in subject.first_reconcile(job).create if o.get("kind") == "Pod"]
    if not unqueued:
        return  # a job without pods has nothing to queue
    doc = copy.deepcopy(example.manifest)
    doc.setdefault("metadata", {}).setdefault("labels", {})[LABEL_QUEUE_NAME] = "kit"
    queued = subject.fresh(subject.job(replace(example, manifest=doc)))
    hooks = subject.hooks(queued.kind)
    first = plan(queued, Observed(kueue=_KUEUE), EPOCH, hooks)
    where = example.id
    kinds = sorted(str(o.get("kind")) for o in first.create)
    if kinds != [WORKLOAD]:
        raise ContractViolation(
            f"{where}: a queued job's first reconcile must create its Workload alone,"
            f" created {kinds}"
        )
    workload = first.create[0]
    pod_sets = workload["spec"]["podSets"]
    if len(pod_sets) > MAX_POD_SETS:
        raise ContractViolation(
            f"{where}: {len(pod_sets)} replica types make {len(pod_sets)} podSets; Kueue admits"
            f" at most {MAX_POD_SETS} in a Workload: such a job can never be queued"
        )
    counted = sum(int(s["count"]) for s in pod_sets)
    if counted != len(unqueued):
        raise ContractViolation(
            f"{where}: the Workload's podSets count {counted} pods, the job has {len(unqueued)}"
        )
    admitted: Obj = {
        **workload,
        "metadata": {**workload["metadata"], "uid": "kit-workload"},
        "status": {
            "conditions": [{"type": "Admitted", "status": "True", "reason": "Admitted"}],
            "admission": {
                "clusterQueue": "kit",
                "podSetAssignments": [
                    {"name": s["name"], "count": s["count"], "flavors": {"cpu": "kit"}}
                    for s in pod_sets
                ],
            },
        },
    }
    waiting = queued.model_copy(update={"status": first.status})
    second = plan(waiting, Observed.of([admitted], kueue=_KUEUE), EPOCH, hooks)
    pods = [o for o in second.create if o.get("kind") == "Pod"]
    names = sorted(p["metadata"]["name"] for p in pods)
    if names != sorted(p["metadata"]["name"] for p in unqueued):
        raise ContractViolation(f"{where}: admitted, the job created pods {names}")
    for pod in pods:
        if (pod["spec"].get("nodeSelector") or {}).get(_FLAVOR_LABEL) != "kit":
            raise ContractViolation(
                f"{where}: admitted, pod {pod['metadata']['name']} lacks its flavor's node label"
                f" {_FLAVOR_LABEL} in spec.nodeSelector"
            )
