"""The stores keep a pod without its spec and most of its status (`slimming`): planning on the
slim pods must give exactly the Plan that the pods as the API server sent them give, in every
state a job's pods go through, a slim pod must be much smaller, and the strings objects share
are kept once."""

from __future__ import annotations

import copy
import json
from datetime import UTC, datetime

import pytest

from t9kjobs.kube.informer import Store
from t9kjobs.kube.slimming import slimmer
from t9kjobs.loading import parse_job
from t9kjobs.manager import PluginManager
from t9kjobs.planner import Observed, plan
from t9kjobs.testing.fixtures import apply_plan, pod_in_phase
from t9kjobs.vocabulary import Obj
from tests.unit.core.controller.reconciling import JOB, KIND

NOW = datetime(2026, 1, 1, tzinfo=UTC)


def as_served(pod: Obj, phase: str, exit_code: int | None = None) -> Obj:
    """`pod` in `phase` with what the API server and the kubelet add to it."""
    pod = pod_in_phase(pod, phase, exit_code)
    pod["metadata"]["managedFields"] = [{"manager": "kubelet", "fieldsV1": {"f:status": {}}}]
    pod["spec"]["nodeName"] = "node-1"
    pod["spec"]["schedulingGroup"] = {"podGroupName": pod["metadata"]["name"].split("-")[0]}
    pod["status"].update(
        conditions=[{"type": "Ready", "status": "True"}], podIP="10.0.0.7", qosClass="BestEffort"
    )
    for status in pod["status"]["containerStatuses"]:
        status.update(image="pytorch:2", imageID="sha256:1", containerID="c://1", restartCount=0)
        status["lastState"] = {"terminated": {"exitCode": 3, "reason": "Error"}}
    return pod


def children(manager: PluginManager) -> dict[tuple[str, str], Obj]:
    job = parse_job(copy.deepcopy(JOB), manager)
    first = plan(job, Observed.of([]), NOW, manager.hooks_for(KIND))
    return apply_plan({}, first)


@pytest.mark.parametrize(
    "phases",
    [
        {},  # all Pending
        {"master-0": ("Running", None), "worker-0": ("Running", None)},
        {"master-0": ("Succeeded", None), "worker-1": ("Running", None)},  # the verdict
        {"worker-2": ("Failed", 137), "master-0": ("Running", None)},
        {"worker-0": ("Deleting", None)},
    ],
)
def test_planning_on_slim_pods_gives_the_same_plan(
    manager: PluginManager, phases: dict[str, tuple[str, int | None]]
) -> None:
    objects = []
    for (kind, name), obj in children(manager).items():
        if kind == "Pod":
            phase, code = phases.get(name.removeprefix("mnist-"), ("Pending", None))
            obj = as_served(obj, "Running" if phase == "Deleting" else phase, code)
            if phase == "Deleting":
                obj["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
        objects.append(obj)
    slim = [slimmer(o["kind"])(copy.deepcopy(o)) for o in objects]
    job = parse_job(copy.deepcopy(JOB), manager)
    hooks = manager.hooks_for(KIND)
    full_plan = plan(job, Observed.of(objects), NOW, hooks)
    assert plan(job, Observed.of(slim), NOW, hooks) == full_plan


def test_a_slim_pod_keeps_what_is_read_and_is_a_fraction_of_the_size(
    manager: PluginManager,
) -> None:
    pod = next(o for (kind, _), o in children(manager).items() if kind == "Pod")
    served = as_served(pod, "Failed", 2)
    store = Store(slimmer("Pod"))
    store.put(copy.deepcopy(served))
    kept = store.get("team-a", served["metadata"]["name"])
    assert kept is not None
    assert kept["metadata"] == {k: v for k, v in served["metadata"].items() if k != "managedFields"}
    # placed, and in its gang: what rejoining it needs (placement)
    assert kept["spec"] == {
        "nodeName": "node-1",
        "schedulingGroup": served["spec"]["schedulingGroup"],
    }
    assert kept["status"] == {
        "phase": "Failed",
        "containerStatuses": [
            {"name": c["name"], "state": c["state"], "lastState": c["lastState"]}
            for c in served["status"]["containerStatuses"]
        ],
    }
    assert len(json.dumps(kept)) < len(json.dumps(served)) / 2


def test_a_pod_that_cannot_be_placed_keeps_why(manager: PluginManager) -> None:
    pod = next(o for (kind, _), o in children(manager).items() if kind == "Pod")
    served = as_served(pod, "Pending")
    del served["spec"]["nodeName"]
    why = {
        "type": "PodScheduled",
        "status": "False",
        "reason": "Unschedulable",
        "message": "0/4 nodes are available: 4 Insufficient nvidia.com/gpu.",
    }
    served["status"]["conditions"].append({**why, "lastProbeTime": None, "observedGeneration": 1})
    kept = slimmer("Pod")(served)
    assert kept["spec"] == {"schedulingGroup": served["spec"]["schedulingGroup"]}  # not placed
    assert kept["status"]["conditions"] == [why]  # not Ready, not the probe time


def test_kept_strings_are_shared_between_objects(manager: PluginManager) -> None:
    pods = [o for (kind, _), o in children(manager).items() if kind == "Pod"]
    first, second = (json.loads(json.dumps(as_served(p, "Running"))) for p in pods[:2])
    assert first["metadata"]["namespace"] is not second["metadata"]["namespace"]  # decoded apart
    store = Store(slimmer("Pod"))
    store.put(first)
    store.put(second)
    a, b = store.all()
    assert a["metadata"]["namespace"] is b["metadata"]["namespace"]
    key_a = next(k for k in a["metadata"]["labels"] if k.endswith("owner-kind"))
    key_b = next(k for k in b["metadata"]["labels"] if k.endswith("owner-kind"))
    assert key_a is key_b


def test_other_kinds_keep_their_spec(manager: PluginManager) -> None:
    service = next(o for (kind, _), o in children(manager).items() if kind == "Service")
    served = {**copy.deepcopy(service), "status": {"loadBalancer": {}}}
    served["metadata"]["managedFields"] = [{"manager": "kube-apiserver"}]
    kept = slimmer("Service")(copy.deepcopy(served))
    assert kept["spec"] == service["spec"] and kept["status"] == served["status"]
    assert "managedFields" not in kept["metadata"]


def test_a_disrupted_pod_keeps_what_the_recovery_rules_read(manager: PluginManager) -> None:
    """The DisruptionTarget condition (type, status, reason), Kueue's TerminatedByKueue,
    status.reason and a cut status.message: what `t9kjobs.planner.failures.classify` reads."""
    pod = next(o for (kind, _), o in children(manager).items() if kind == "Pod")
    served = as_served(pod, "Failed", 137)
    served["status"]["containerStatuses"][0]["state"]["terminated"]["reason"] = "OOMKilled"
    served["status"].update(reason="Evicted", message="The node was low on memory. " * 40)
    disruption = {"type": "DisruptionTarget", "status": "True", "reason": "TerminationByKubelet"}
    by_kueue = {
        "type": "TerminatedByKueue",
        "status": "True",
        "reason": "UnschedulableOnAssignedNode",
    }
    for condition in (disruption, by_kueue):
        served["status"]["conditions"].append(
            {**condition, "message": "gone", "lastTransitionTime": "2026-01-01T00:00:00Z"}
        )
    kept = slimmer("Pod")(copy.deepcopy(served))
    assert kept["status"]["conditions"] == [disruption, by_kueue]
    assert kept["status"]["reason"] == "Evicted"
    assert kept["status"]["message"] == served["status"]["message"][:256]
    terminated = kept["status"]["containerStatuses"][0]["state"]["terminated"]
    assert terminated == {"exitCode": 137, "reason": "OOMKilled"}


def test_a_childs_finalizers_are_not_kept() -> None:
    """kube-controller-manager puts its finalizer on each kube-scheduler PodGroup the moment it
    is created (podgroup-protection); no reader reads a child's finalizers, so that event
    changes nothing a store keeps (and the informer hands it to no one, #50)."""
    group: Obj = {
        "apiVersion": "scheduling.k8s.io/v1alpha2",
        "kind": "PodGroup",
        "metadata": {
            "name": "job",
            "namespace": "ns",
            "resourceVersion": "2",
            "finalizers": ["scheduling.k8s.io/podgroup-protection"],
            "managedFields": [{"manager": "kube-controller-manager"}],
        },
        "spec": {"schedulingPolicy": {"gang": {"minCount": 4}}},
    }
    kept = slimmer("PodGroup.scheduling.k8s.io")(copy.deepcopy(group))
    assert "finalizers" not in kept["metadata"] and "managedFields" not in kept["metadata"]
    assert kept["spec"] == group["spec"]
    pod: Obj = {"metadata": {"name": "p", "finalizers": ["example.com/hold"]}, "spec": {}}
    assert "finalizers" not in slimmer("Pod")(pod)["metadata"]
