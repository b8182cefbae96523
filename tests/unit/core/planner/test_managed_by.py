"""`spec.managedBy` (`t9kjobs.planner.elsewhere`): a job another controller manages gets
nothing from the plan, but for MultiKueue's, which gets its Workload alone; the field's
syntax is Kubernetes Job's."""

from __future__ import annotations

import pytest

from t9kjobs.crds import crd_for
from t9kjobs.loading import JobError, load_job
from t9kjobs.models import MANAGED_BY_MULTIKUEUE, MANAGED_BY_RULE, MANAGED_BY_T9KJOBS
from t9kjobs.testing.fixtures import installed_plugins
from t9kjobs.vocabulary import Obj
from tests.unit.core.planner.queue_sim import WL, QueueSim, queued_job
from tests.unit.core.planner.tinyjob import tiny_job, tiny_manager


def _managed(doc: Obj, by: str) -> Obj:
    doc["spec"]["managedBy"] = by
    return doc


@pytest.mark.parametrize("by", [None, MANAGED_BY_T9KJOBS])
def test_a_job_managed_by_this_operator_runs(by: str | None) -> None:
    doc = tiny_job(replicas=2)
    if by is not None:
        _managed(doc, by)
    p = QueueSim(doc).step()
    assert sorted(o["metadata"]["name"] for o in p.create if o["kind"] == "Pod") == [
        "tiny-worker-0",
        "tiny-worker-1",
    ]


@pytest.mark.parametrize("queued", [False, True])
def test_a_job_another_controller_manages_gets_nothing(queued: bool) -> None:
    doc = queued_job() if queued else tiny_job(replicas=2)
    sim = QueueSim(_managed(doc, "example.com/other-controller"))
    p = sim.step()
    assert (p.create, p.update, p.delete, p.patch_status, p.events) == ((), (), (), (), ())
    assert not p.status_changed and p.requeue_after is None
    assert sim.objects == {}


def _multikueue_check(sim: QueueSim, state: str, message: str, cluster: str | None) -> None:
    """Kueue on the manager: quota reserved here, the check `multikueue` in `state`, and the
    worker named once it holds the job."""
    sim.kueue_says(("QuotaReserved", "True", "QuotaReserved", "Quota reserved in ClusterQueue cq"))
    status = sim.objects[WL]["status"]
    status["admissionChecks"] = [{"name": "multikueue", "state": state, "message": message}]
    if cluster is not None:
        status["clusterName"] = cluster


def test_multikueue_gets_its_workload_alone_and_a_status_until_dispatched() -> None:
    sim = QueueSim(_managed(queued_job(), MANAGED_BY_MULTIKUEUE))
    p = sim.step()
    assert [o["kind"] for o in p.create] == ["Workload"]
    assert p.create[0]["metadata"]["ownerReferences"][0]["uid"] == "job-uid"
    assert p.create[0]["spec"]["podSets"][0]["count"] == 2
    assert not p.status_changed and p.events == ()
    # Its Workload made, it waits in the manager's queue.
    p = sim.step()
    assert p.status_changed and p.create == ()
    assert p.status.phase == "Queued" and p.status.reason == "Queued"
    # Waiting for a worker: the MultiKueue check's state is the REASON, its message said.
    _multikueue_check(sim, "Pending", 'The workload got reservation on "none"', None)
    waiting = sim.step()
    assert waiting.status_changed and waiting.create == () and waiting.delete == ()
    assert waiting.status.phase == "Queued"
    assert waiting.status.reason == "MultiKueuePending"
    admitted = waiting.status.condition("Admitted")
    assert admitted is not None and admitted.status == "False"
    assert "worker cluster" in admitted.message and "multikueue: Pending" in admitted.message
    # Dispatched: the status is MultiKueue's copy of the worker's; nothing is written.
    _multikueue_check(sim, "Ready", "", "worker")
    sim.manifest["status"] = {"phase": "Running"}
    again = sim.step()
    assert (again.create, again.delete, again.patch_status, again.events) == ((), (), (), ())
    assert not again.status_changed


@pytest.mark.parametrize("cluster", [None, "worker"])
def test_multikueue_a_ready_check_or_a_worker_named_is_dispatched(cluster: str | None) -> None:
    sim = QueueSim(_managed(queued_job(), MANAGED_BY_MULTIKUEUE))
    sim.step()
    _multikueue_check(sim, "Pending" if cluster else "Ready", "", cluster)
    assert not sim.step().status_changed


def test_multikueue_never_overwrites_a_status_copied_from_the_worker() -> None:
    """A Workload the cache reads late (no worker named yet) beside the worker's status,
    copied: the copy stands."""
    sim = QueueSim(_managed(queued_job(), MANAGED_BY_MULTIKUEUE))
    sim.step()
    _multikueue_check(sim, "Pending", "", None)
    sim.manifest["status"] = {"phase": "Running"}
    assert not sim.step().status_changed


def test_multikueue_without_a_queue_or_finished_gets_nothing() -> None:
    p = QueueSim(_managed(tiny_job(replicas=2), MANAGED_BY_MULTIKUEUE)).step()
    assert p.create == () and not p.status_changed
    done = _managed(queued_job(), MANAGED_BY_MULTIKUEUE)
    done["status"] = {"phase": "Succeeded"}  # the worker's, copied by MultiKueue
    p = QueueSim(done).step()
    assert p.create == () and not p.status_changed


def test_multikueue_paused_gives_its_place_up_and_is_paused() -> None:
    doc = _managed(queued_job(), MANAGED_BY_MULTIKUEUE)
    sim = QueueSim(doc)
    sim.step()
    assert WL in sim.objects
    _multikueue_check(sim, "Ready", "", "worker")
    doc["status"] = {"phase": "Running"}  # the worker's, copied
    doc["spec"]["runMode"] = {"pause": {"enabled": True}}
    p = sim.step()
    assert [d.name for d in p.delete] == ["tinyjob-tiny"]
    assert p.status_changed and p.status.phase == "Paused"
    paused = p.status.condition("Paused")
    assert paused is not None and paused.status == "True"
    # Resumed: queued again, its Workload made anew.
    doc["spec"]["runMode"] = {}
    p = sim.step()
    assert [o["kind"] for o in p.create] == ["Workload"]
    p = sim.step()
    assert p.status.phase == "Queued"
    resumed = p.status.condition("Paused")
    assert resumed is not None and resumed.status == "False"


@pytest.mark.parametrize(
    ("value", "said"),
    [
        ("multikueue", "not a domain-prefixed path"),
        ("Kueue.x-k8s.io/multikueue", "not a domain-prefixed path"),
        ("kueue.x-k8s.io/", "not a domain-prefixed path"),
        ("kueue.x-k8s.io/multikueue\n", "not a domain-prefixed path"),  # as the CRD's pattern
        ("a.io/" + "x" * 60, "at most 63 characters"),
    ],
)
def test_managed_by_is_a_domain_prefixed_path(value: str, said: str) -> None:
    with pytest.raises(JobError) as caught:
        load_job(_managed(tiny_job(replicas=1), value), tiny_manager())
    (problem,) = caught.value.problems
    assert problem.path == "spec.managedBy" and said in problem.message


def test_the_crds_hold_managed_by_immutable() -> None:
    for info in installed_plugins().kinds.values():
        schema = crd_for(info)["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
        assert MANAGED_BY_RULE in schema["x-kubernetes-validations"]
        field = schema["properties"]["spec"]["properties"]["managedBy"]
        assert field["type"] == "string" and field["maxLength"] == 63
