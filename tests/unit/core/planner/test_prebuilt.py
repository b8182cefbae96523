"""A job labelled `kueue.x-k8s.io/prebuilt-workload-name` (`t9kjobs.planner.prebuilt`): it
waits while that Workload is missing, adopts it when its podSets match, says how they differ
when they do not, and follows the queued job's protocol from there."""

from __future__ import annotations

import copy

import pytest

from t9kjobs.loading import JobError, load_job
from t9kjobs.planner import Plan
from t9kjobs.vocabulary import Obj
from tests.unit.core.planner.queue_sim import QueueSim, queued_job
from tests.unit.core.planner.tinyjob import tiny_manager

NAME = "wl-from-manager"
KEY = ("Workload", NAME)


def _job() -> Obj:
    return queued_job("team", replicas=2, **{"kueue.x-k8s.io/prebuilt-workload-name": NAME})


def _workload(count: int = 2, name: str = "worker") -> Obj:
    """A Workload as MultiKueue copies it to a worker cluster: no owner, its queue."""
    return {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "Workload",
        "metadata": {
            "name": NAME,
            "namespace": "default",
            "resourceVersion": "3",
            "labels": {"kueue.x-k8s.io/multikueue-origin": "manager"},
        },
        "spec": {
            "queueName": "team-worker",
            "podSets": [{"name": name, "count": count, "template": {"spec": {}}}],
        },
    }


def _pods(p: Plan) -> list[str]:
    return [o["metadata"]["name"] for o in p.create if o["kind"] == "Pod"]


def test_a_missing_prebuilt_workload_is_waited_for() -> None:
    sim = QueueSim(_job())
    p = sim.step()
    assert _pods(p) == [] and p.create == () and p.update == ()
    admitted = sim.condition("Admitted")
    assert admitted["status"] == "False" and admitted["reason"] == "PrebuiltWorkloadMissing"
    assert NAME in admitted["message"] and p.status.phase == "Queued"
    assert p.requeue_after is not None


def test_a_matching_prebuilt_workload_is_adopted_admitted_and_run() -> None:
    sim = QueueSim(_job())
    sim.prebuilt = _workload()
    p = sim.step()
    assert p.create == () and [o["metadata"]["name"] for o in p.update] == [NAME]
    adopted = p.update[0]["metadata"]
    assert adopted["ownerReferences"] == [
        {
            "apiVersion": "batch.tensorstack.dev/v1beta1",
            "kind": "TinyJob",
            "name": "tiny",
            "uid": "job-uid",
            "controller": True,
            "blockOwnerDeletion": True,
        }
    ]
    assert adopted["labels"]["kueue.x-k8s.io/job-uid"] == "job-uid"
    assert adopted["labels"]["kueue.x-k8s.io/multikueue-origin"] == "manager"
    assert p.update[0]["spec"] == _workload()["spec"]  # its spec is Kueue's, untouched
    # The job's Workload now: it waits in the Workload's queue, and never makes one of its own.
    sim.prebuilt = None
    p = sim.step()
    assert p.create == () and "LocalQueue team-worker" in sim.condition("Admitted")["message"]
    workload = copy.deepcopy(sim.objects[KEY])
    workload["status"] = {
        "conditions": [
            {"type": "QuotaReserved", "status": "True", "reason": "QuotaReserved"},
            {"type": "Admitted", "status": "True", "reason": "Admitted"},
        ],
        "admission": {
            "clusterQueue": "cq",
            "podSetAssignments": [{"name": "worker", "count": 2, "flavors": {"cpu": "gpu"}}],
        },
    }
    sim.objects[KEY] = workload
    p = sim.step()
    assert _pods(p) == ["tiny-worker-0", "tiny-worker-1"]
    assert all(o["spec"]["nodeSelector"] == {"pool": "a100"} for o in p.create)
    assert sim.condition("Admitted")["status"] == "True"


def test_a_mismatched_prebuilt_workload_is_said_and_left_alone() -> None:
    sim = QueueSim(_job())
    sim.prebuilt = _workload(count=3)
    p = sim.step()
    assert (p.create, p.update, p.delete) == ((), (), ())
    admitted = sim.condition("Admitted")
    assert admitted["reason"] == "PrebuiltWorkloadMismatch"
    assert "podSet worker counts 3 pod(s), the job has 2" in admitted["message"]
    (event,) = p.events
    assert event.type == "Warning" and event.reason == "PrebuiltWorkloadMismatch"
    # Said once: the next plan, the same mismatch, posts nothing.
    assert sim.step().events == ()


def test_a_prebuilt_workload_of_other_podsets_names_them() -> None:
    sim = QueueSim(_job())
    sim.prebuilt = _workload(name="launcher")
    sim.step()
    message = sim.condition("Admitted")["message"]
    assert "it has no podSet worker" in message
    assert "podSet launcher is no replica type of the job" in message


def test_a_prebuilt_workload_another_object_controls_is_not_taken() -> None:
    sim = QueueSim(_job())
    sim.prebuilt = _workload()
    sim.conflicts = {KEY: "its controller is GenericJob other (uid 1f2e)"}
    p = sim.step()
    assert p.update == () and p.create == ()
    admitted = sim.condition("Admitted")
    assert admitted["reason"] == "NameConflict" and "GenericJob other" in admitted["message"]


def test_a_prebuilt_workload_name_no_workload_can_have_is_refused() -> None:
    doc = _job()
    doc["metadata"]["labels"]["kueue.x-k8s.io/prebuilt-workload-name"] = "Made_By_Hand"
    with pytest.raises(JobError) as caught:
        load_job(doc, tiny_manager())
    (problem,) = caught.value.problems
    assert "kueue.x-k8s.io/prebuilt-workload-name" in problem.path
    assert "'Made_By_Hand' is no Workload's name" in problem.message
    load_job(_job(), tiny_manager())  # a DNS subdomain passes


def test_a_prebuilt_workload_admitted_in_part_does_not_match() -> None:
    sim = QueueSim(_job())
    workload = _workload()
    workload["spec"]["podSets"][0]["minCount"] = 1
    sim.prebuilt = workload
    sim.step()
    admitted = sim.condition("Admitted")
    assert admitted["reason"] == "PrebuiltWorkloadMismatch"
    assert "podSet worker has a minCount" in admitted["message"]
