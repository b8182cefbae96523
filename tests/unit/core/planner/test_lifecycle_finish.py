"""How a job ends: `activeDeadlineSeconds` whatever the restart state, and `cleanUpPolicy`
applied alike whether the job succeeded, failed, ran out of restarts or out of time
(docs/lifecycle.md, "Deadline" and "Cleanup")."""

from __future__ import annotations

from datetime import timedelta

import pytest

from t9kjobs.models import dump
from tests.unit.conftest import NOW
from tests.unit.core.planner.sim import Sim
from tests.unit.core.planner.tinyjob import tiny_job


def test_deadline_fails_a_job_in_the_middle_of_a_restart() -> None:
    sim = Sim(tiny_job(replicas=2, run_policy={"activeDeadlineSeconds": 5, "backoffLimit": 9}))
    sim.step()
    sim.set("tiny-worker-0", "Running")
    sim.set("tiny-worker-1", "Failed", 137)
    sim.step()  # worker-1's restart is recorded and its pod deleted, not yet recreated
    assert ("Pod", "tiny-worker-1") not in sim.objects
    sim.now = NOW + timedelta(seconds=5)
    p = sim.step()
    assert p.status.phase == "Failed" and not p.create
    failed = p.status.condition("Failed")
    assert failed is not None and failed.reason == "DeadlineExceeded"
    assert failed.message == (
        "the job was active longer than spec.runPolicy.activeDeadlineSeconds (5s)"
    )
    assert [d.name for d in p.delete] == ["tiny-worker-0"]
    assert p.status.backoff_count == 1
    assert p.status.condition("Running").status == "False"  # type: ignore[union-attr]


def test_deadline_requeues_for_the_time_left() -> None:
    sim = Sim(tiny_job(replicas=1, run_policy={"activeDeadlineSeconds": 30}))
    assert sim.step().requeue_after == 30
    sim.now = NOW + timedelta(seconds=12)
    assert sim.step().requeue_after == 18
    sim.now = NOW + timedelta(seconds=29.5)  # to the second: half a second is left
    assert sim.step().requeue_after == 0.5
    sim.now = NOW + timedelta(seconds=30)
    p = sim.step()  # its pod never left Pending: active, so deleted
    assert (p.status.phase, [d.name for d in p.delete]) == ("Failed", ["tiny-worker-0"])


def test_pods_of_a_job_past_its_deadline_are_deleted_even_after_a_crash() -> None:
    sim = Sim(tiny_job(replicas=1, run_policy={"activeDeadlineSeconds": 5}))
    sim.step()
    sim.set("tiny-worker-0", "Running")
    sim.now = NOW + timedelta(seconds=9)
    failed = sim.plan()
    # The status was written, then the operator died before deleting the running pod.
    sim.manifest["status"] = dump(failed.status)
    p = sim.step()
    assert [d.name for d in p.delete] == ["tiny-worker-0"] and not p.status_changed


def test_the_deadline_counts_from_the_resume_after_a_pause() -> None:
    sim = Sim(tiny_job(replicas=1, run_policy={"activeDeadlineSeconds": 10}))
    sim.step()
    sim.manifest["spec"]["runMode"] = {"pause": {"enabled": True}}
    sim.now = NOW + timedelta(seconds=8)
    sim.step()
    sim.now = NOW + timedelta(seconds=60)  # paused past the deadline: not counted
    assert sim.step().status.phase == "Paused"
    sim.manifest["spec"]["runMode"]["pause"]["enabled"] = False
    p = sim.step()
    assert p.status.phase == "Resuming"
    assert p.status.start_time == "2026-01-01T12:01:00Z"
    assert p.requeue_after == 10
    sim.now = NOW + timedelta(seconds=71)
    assert sim.step().status.condition("Failed").reason == "DeadlineExceeded"  # type: ignore[union-attr]


def _end(sim: Sim, how: str) -> None:
    """Bring the job to its end by `how`; worker-1 still runs unless the job succeeds."""
    sim.step()
    sim.set("tiny-worker-1", "Running")
    if how == "success":
        sim.set("tiny-worker-0", "Succeeded")
        sim.set("tiny-worker-1", "Succeeded")
    elif how == "failure":
        sim.set("tiny-worker-0", "Failed", 1)  # exit 1 is not retried under ExitCode
    elif how == "backoff":
        sim.set("tiny-worker-0", "Failed", 137)
        sim.step()
        sim.step()
        sim.set("tiny-worker-0", "Failed", 137)  # the second restart is over the budget
    else:
        sim.set("tiny-worker-0", "Succeeded")
        sim.now = NOW + timedelta(seconds=100)


BOTH = {"tiny-worker-0", "tiny-worker-1"}
RUNNING = {"tiny-worker-1"}
# (how the job ends, cleanUpPolicy) -> pods deleted when it ends. Past its deadline a job's
# running pods go whatever the policy.
CLEANUP = {
    ("success", "All"): BOTH,
    ("success", "Unfinished"): set(),
    ("success", "None"): set(),
    ("failure", "All"): BOTH,
    ("failure", "Unfinished"): RUNNING,
    ("failure", "None"): set(),
    ("backoff", "All"): BOTH,
    ("backoff", "Unfinished"): RUNNING,
    ("backoff", "None"): set(),
    ("deadline", "All"): BOTH,
    ("deadline", "Unfinished"): RUNNING,
    ("deadline", "None"): RUNNING,
}
REASON = {
    "success": "AllSucceeded",
    "failure": "ReplicaFailed",
    "backoff": "BackoffLimitExceeded",
    "deadline": "DeadlineExceeded",
}


@pytest.mark.parametrize(("how", "policy"), sorted(CLEANUP))
def test_cleanup_policy_applies_however_the_job_ends(how: str, policy: str) -> None:
    run_policy = {"cleanUpPolicy": policy, "backoffLimit": 1, "activeDeadlineSeconds": 50}
    sim = Sim(tiny_job(replicas=2, restart="ExitCode", run_policy=run_policy))
    _end(sim, how)
    p = sim.step()
    assert p.status.phase == ("Succeeded" if how == "success" else "Failed")
    finished = p.status.condition("Completed" if how == "success" else "Failed")
    assert finished is not None and finished.reason == REASON[how]
    assert {d.name for d in p.delete} == CLEANUP[(how, policy)]
    phases = {r.name: r.phase for t in p.status.tasks for r in t.replicas}
    # A pod stopped by the cleanup shows Deleted; one that had ended keeps its final phase,
    # deleted or not, so that the finished job's counts say how its replicas ended.
    ended = {"tiny-worker-0"} | (RUNNING if how == "success" else set())
    assert {n for n, phase in phases.items() if phase == "Deleted"} == CLEANUP[
        (how, policy)
    ] - ended
    assert phases["tiny-worker-0"] == ("Failed" if how in ("failure", "backoff") else "Succeeded")
    aggregate = p.status.aggregate
    assert (aggregate.succeeded, aggregate.failed) == {
        "success": (2, 0),
        "failure": (0, 1),
        "backoff": (0, 1),
        "deadline": (1, 0),
    }[how]
    assert not sim.step().delete  # applied again on the finished job: nothing more


def test_the_failure_that_ends_a_job_is_in_its_replica_failure_condition() -> None:
    sim = Sim(tiny_job(replicas=2, restart="Never"))
    sim.step()
    sim.set("tiny-worker-0", "Running")
    sim.set("tiny-worker-1", "Failed", 3)
    p = sim.step()  # the failure is seen and ends the job in the same reconcile
    assert p.status.phase == "Failed"
    failure = p.status.condition("ReplicaFailure")
    assert failure is not None and failure.status == "True"
    assert failure.message == "tiny-worker-1 failed with exit code 3 (container main)"


def test_a_replica_failure_condition_names_the_failure_that_ended_the_job() -> None:
    sim = Sim(tiny_job(replicas=2, restart="ExitCode", run_policy={"backoffLimit": 5}))
    sim.step()
    sim.set("tiny-worker-0", "Failed", 137)  # retried: ReplicaFailure names worker-0
    sim.set("tiny-worker-1", "Running")
    sim.step()
    sim.step()
    sim.set("tiny-worker-0", "Running")
    assert sim.step().status.condition("ReplicaFailure").status == "False"  # type: ignore[union-attr]
    sim.set("tiny-worker-1", "Failed", 2)  # not retried: the job fails
    p = sim.step()
    failure = p.status.condition("ReplicaFailure")
    assert p.status.phase == "Failed" and failure is not None
    assert (failure.status, failure.message) == (
        "True",
        "tiny-worker-1 failed with exit code 2 (container main)",
    )


def test_a_finished_job_keeps_the_counts_of_the_pods_its_cleanup_deleted() -> None:
    sim = Sim(tiny_job(replicas=2, run_policy={"cleanUpPolicy": "All"}))
    sim.step()
    sim.set("tiny-worker-0", "Succeeded")
    sim.set("tiny-worker-1", "Succeeded")
    p = sim.step()
    assert {d.name for d in p.delete} == {"tiny-worker-0", "tiny-worker-1"}
    sim.step()  # the pods are gone: a finished job's status does not move
    assert sim.status["aggregate"]["succeeded"] == 2
    assert {r["phase"] for t in sim.status["tasks"] for r in t["replicas"]} == {"Succeeded"}


@pytest.mark.parametrize("policy", ["None", "Unfinished"])
def test_a_replica_still_running_when_the_job_finished_is_counted_as_it_ends(policy: str) -> None:
    """A job can finish while a pod runs on (a PyTorchTrainingJob succeeds with its master):
    its replica gets the phase the pod ends in, and a final phase is never rewritten."""
    sim = Sim(tiny_job(replicas=3, restart="Never", run_policy={"cleanUpPolicy": policy}))
    sim.step()
    sim.set("tiny-worker-0", "Failed", 2)
    sim.set("tiny-worker-1", "Running")
    sim.set("tiny-worker-2", "Running")
    p = sim.step()
    assert p.status.phase == "Failed"
    kept = policy == "None"  # Unfinished: the cleanup stops the running pods (Deleted)
    assert (p.status.aggregate.failed, p.status.aggregate.running) == (1, 2 if kept else 0)
    if not kept:
        return
    finished = sim.status["completionTime"], sim.condition("Failed")
    sim.set("tiny-worker-1", "Succeeded")
    p = sim.step()
    assert p.status_changed
    aggregate = p.status.aggregate
    assert (aggregate.failed, aggregate.succeeded, aggregate.running) == (1, 1, 1)
    phases = {r.name: r.phase for t in p.status.tasks for r in t.replicas}
    assert phases == {
        "tiny-worker-0": "Failed",
        "tiny-worker-1": "Succeeded",
        "tiny-worker-2": "Running",
    }
    del sim.objects[("Pod", "tiny-worker-2")]  # gone without ending: a user deleted it
    sim.set("tiny-worker-1", "Failed", 1)  # a final phase recorded is kept
    p = sim.step()
    phases = {r.name: r.phase for t in p.status.tasks for r in t.replicas}
    assert phases == {
        "tiny-worker-0": "Failed",
        "tiny-worker-1": "Succeeded",
        "tiny-worker-2": "Deleted",
    }
    assert (p.status.aggregate.succeeded, p.status.aggregate.deleted) == (1, 1)
    assert (sim.status["completionTime"], sim.condition("Failed")) == finished
    assert p.status.phase == "Failed" and not sim.step().status_changed
