"""A recovery rule on `PreemptedByKueue` (docs/lifecycle.md, "Recovery rules"): a job whose
Workload Kueue evicts fails, reason RecoveryPolicy, instead of waiting in its queue again; its
pods are stopped and its Workload finished once they are gone. Without the rule, an eviction
stays a requeue (tests/unit/core/planner/test_queueing.py)."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from t9kjobs.models import RecoveryRule
from t9kjobs.planner import Plan
from t9kjobs.testing.fixtures import pod_in_phase
from t9kjobs.vocabulary import Obj
from tests.unit.core.planner.queue_sim import QueueSim, queued_job

GIVE_UP = {"name": "give-up", "onReasons": ["PreemptedByKueue"], "action": "FailJob"}


def _running(doc: Obj) -> QueueSim:
    sim = QueueSim(doc)
    sim.step()
    sim.admit()
    sim.step()
    sim.run_pods()
    sim.step()
    return sim


def _evict(sim: QueueSim) -> Plan:
    sim.kueue_says(
        ("QuotaReserved", "True", "QuotaReserved", "Quota reserved in ClusterQueue cq"),
        ("Admitted", "True", "Admitted", "The workload is admitted"),
        ("Evicted", "True", "Preempted", "Preempted to accommodate a workload."),
        admitted=True,
    )
    return sim.step()


def test_a_job_with_a_kueue_rule_fails_when_evicted_and_gives_its_quota_back() -> None:
    doc = queued_job()
    doc["spec"]["recoveryPolicy"] = {"rules": [GIVE_UP]}
    sim = _running(doc)
    p = _evict(sim)
    assert p.status.phase == "Failed"
    failed = p.status.condition("Failed")
    assert failed is not None and failed.reason == "RecoveryPolicy"
    assert failed.message == (
        "evicted by Kueue (Preempted: Preempted to accommodate a workload); rule give-up"
        " (spec.recoveryPolicy.rules[0]) fails the job"
    )
    assert sorted(d.name for d in p.delete) == ["tiny-worker-0", "tiny-worker-1"]
    assert not p.patch_status  # the quota is held until the pods are gone
    for name, pod in sim.pods().items():  # stopped, as the deletion left them
        sim.objects[("Pod", name)] = pod_in_phase(pod, "Failed", 143)
    p = sim.step()
    (patch,) = p.patch_status
    finished = [c for c in patch["status"]["conditions"] if c["type"] == "Finished"]
    assert finished and finished[0]["reason"] == "Failed"


def test_without_the_rule_an_eviction_is_a_requeue() -> None:
    doc = queued_job()
    doc["spec"]["recoveryPolicy"] = {
        "rules": [{"onReasons": ["Evicted"], "action": "FailJob"}]  # a pod's, not Kueue's
    }
    p = _evict(_running(doc))
    assert p.status.phase == "Queued" and p.status.reason == "Preempted"


@pytest.mark.parametrize(
    "extra",
    [
        {"action": "RestartReplica"},
        {"replicaTypes": ["worker"]},
        {"onPodConditions": [{"type": "DisruptionTarget"}]},
    ],
)
def test_preempted_by_kueue_is_the_whole_jobs_and_only_failjob(extra: Obj) -> None:
    with pytest.raises(ValidationError, match="PreemptedByKueue goes with action FailJob only"):
        RecoveryRule.model_validate({**GIVE_UP, **extra})
