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


def test_multikueue_gets_its_workload_alone_and_no_status() -> None:
    sim = QueueSim(_managed(queued_job(), MANAGED_BY_MULTIKUEUE))
    p = sim.step()
    assert [o["kind"] for o in p.create] == ["Workload"]
    assert p.create[0]["metadata"]["ownerReferences"][0]["uid"] == "job-uid"
    assert p.create[0]["spec"]["podSets"][0]["count"] == 2
    assert not p.status_changed and p.events == ()
    # Admitted (MultiKueue dispatched it): still no pod here, no status, nothing to say.
    sim.admit()
    again = sim.step()
    assert (again.create, again.delete, again.patch_status, again.events) == ((), (), (), ())
    assert not again.status_changed


def test_multikueue_without_a_queue_or_finished_gets_nothing() -> None:
    p = QueueSim(_managed(tiny_job(replicas=2), MANAGED_BY_MULTIKUEUE)).step()
    assert p.create == () and not p.status_changed
    done = _managed(queued_job(), MANAGED_BY_MULTIKUEUE)
    done["status"] = {"phase": "Succeeded"}  # the worker's, copied by MultiKueue
    assert QueueSim(done).step().create == ()


def test_multikueue_paused_gives_its_place_up() -> None:
    doc = _managed(queued_job(), MANAGED_BY_MULTIKUEUE)
    sim = QueueSim(doc)
    sim.step()
    assert WL in sim.objects
    doc["spec"]["runMode"] = {"pause": {"enabled": True}}
    p = sim.step()
    assert [d.name for d in p.delete] == ["tinyjob-tiny"] and not p.status_changed


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
