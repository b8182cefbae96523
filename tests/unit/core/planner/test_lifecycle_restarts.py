"""Restart policies, per-replica limits and the shared backoff budget, line by line of
docs/lifecycle.md ("Restarts"), on the engine's minimal test kind."""

from __future__ import annotations

import pytest

from t9kjobs.models import dump
from t9kjobs.objects import ANNOTATION_INCARNATION
from tests.unit.core.planner.sim import Sim
from tests.unit.core.planner.tinyjob import tiny_job


def _restart(sim: Sim, name: str, code: int) -> None:
    """Fail `name` with `code`, then let the engine delete and recreate it."""
    sim.set(name, "Failed", code)
    sim.step()
    sim.step()


@pytest.mark.parametrize("code", [130, 137, 143, 138])
def test_exit_code_retries_each_signal_exit(code: int) -> None:
    sim = Sim(tiny_job(replicas=1, restart="ExitCode"))
    sim.step()
    sim.set("tiny-worker-0", "Failed", code)
    p = sim.step()
    assert [d.name for d in p.delete] == ["tiny-worker-0"]
    assert p.status.phase == "Pending" and p.status.backoff_count == 1


@pytest.mark.parametrize("code", [1, 2, 139, 255])
def test_exit_code_fails_the_job_at_once_on_other_codes(code: int) -> None:
    sim = Sim(tiny_job(replicas=2, restart="ExitCode"))
    sim.step()
    sim.set("tiny-worker-1", "Failed", code)
    p = sim.step()
    assert p.status.phase == "Failed" and p.status.backoff_count == 0
    assert not [d for d in p.delete if d.name == "tiny-worker-1"]
    failed = p.status.condition("Failed")
    assert failed is not None and failed.message == f"tiny-worker-1 failed with exit code {code}"


def test_137_then_1_restarts_once_then_fails_naming_the_new_pod() -> None:
    sim = Sim(tiny_job(replicas=1, restart="ExitCode"))
    sim.step()
    _restart(sim, "tiny-worker-0", 137)
    assert sim.pod("tiny-worker-0")["metadata"]["annotations"][ANNOTATION_INCARNATION] == "1"
    sim.set("tiny-worker-0", "Failed", 1)
    p = sim.step()
    assert p.status.phase == "Failed"
    assert p.status.backoff_count == 1 and p.status.tasks[0].restart_count == 1
    assert p.status.condition("Failed").message == "tiny-worker-0 failed with exit code 1"  # type: ignore[union-attr]


def test_default_backoff_limit_is_three_restarts() -> None:
    sim = Sim(tiny_job(replicas=1, restart="OnFailure"))
    sim.step()
    for _ in range(3):
        _restart(sim, "tiny-worker-0", 1)
    assert sim.status["backoffCount"] == 3 and sim.status["phase"] != "Failed"
    sim.set("tiny-worker-0", "Failed", 1)
    p = sim.step()
    assert p.status.phase == "Failed" and p.status.backoff_count == 3
    failed = p.status.condition("Failed")
    assert failed is not None and failed.reason == "BackoffLimitExceeded"
    assert failed.message == (
        "tiny-worker-0 failed with exit code 1 (container main); restarts exhausted (spec.runPolicy.backoffLimit=3)"
    )


def test_backoff_limit_zero_fails_at_the_first_failure() -> None:
    sim = Sim(tiny_job(replicas=1, restart="OnFailure", run_policy={"backoffLimit": 0}))
    sim.step()
    sim.set("tiny-worker-0", "Failed", 143)
    p = sim.step()
    assert p.status.phase == "Failed" and not p.delete
    assert p.status.condition("Failed").reason == "BackoffLimitExceeded"  # type: ignore[union-attr]


def test_the_budget_is_shared_and_a_refused_restart_is_not_counted() -> None:
    sim = Sim(tiny_job(replicas=2, restart="OnFailure", run_policy={"backoffLimit": 2}))
    sim.step()
    _restart(sim, "tiny-worker-0", 1)
    # One restart left and two replicas fail at once: the first gets it... but the job fails
    # on the second, so the first is not performed either.
    sim.set("tiny-worker-0", "Failed", 1)
    sim.set("tiny-worker-1", "Failed", 2)
    p = sim.step()
    assert p.status.phase == "Failed"
    assert p.status.backoff_count == 1
    assert [t.restart_count for t in p.status.tasks] == [1]
    assert "tiny-worker-1 failed with exit code 2" in p.status.condition("Failed").message  # type: ignore[union-attr, operator]


def test_restart_counts_per_replica_and_per_type() -> None:
    sim = Sim(tiny_job(replicas=2, restart="OnFailure", run_policy={"backoffLimit": 10}))
    sim.step()
    _restart(sim, "tiny-worker-0", 1)
    _restart(sim, "tiny-worker-0", 1)
    _restart(sim, "tiny-worker-1", 1)
    status = sim.status
    assert status["backoffCount"] == 3
    assert status["tasks"][0]["restartCount"] == 3
    assert [r["restartCount"] for r in status["tasks"][0]["replicas"]] == [2, 1]


def test_object_form_limit_defaults_to_zero_restarts() -> None:
    sim = Sim(tiny_job(replicas=1, restart={"policy": "OnFailure"}))
    sim.step()
    sim.set("tiny-worker-0", "Failed", 1)
    p = sim.step()
    assert p.status.phase == "Failed" and p.status.backoff_count == 0


def test_object_form_limit_is_per_replica() -> None:
    sim = Sim(tiny_job(replicas=2, restart={"policy": "OnFailure", "limit": 1}))
    sim.step()
    _restart(sim, "tiny-worker-0", 1)
    _restart(sim, "tiny-worker-1", 1)  # worker-0's restart did not use worker-1's
    assert sim.status["backoffCount"] == 2 and sim.status["phase"] != "Failed"
    sim.set("tiny-worker-1", "Failed", 1)
    p = sim.step()
    assert p.status.phase == "Failed"
    assert p.status.condition("Failed").message == "tiny-worker-1 failed with exit code 1"  # type: ignore[union-attr]


def test_always_restarts_a_success_without_reporting_a_failure() -> None:
    sim = Sim(tiny_job(replicas=1, restart={"policy": "Always", "limit": 2}))
    sim.step()
    sim.set("tiny-worker-0", "Succeeded")
    p = sim.step()
    # Being restarted, the replica is not finished: the kind must not see a success.
    assert [d.name for d in p.delete] == ["tiny-worker-0"]
    assert p.status.phase == "Pending"
    assert p.status.condition("ReplicaFailure") is None
    assert next(e for e in p.events if e.reason == "Restarting").message == (
        "tiny-worker-0 succeeded with exit code 0; restart 1"
    )
    assert p.status.tasks[0].replicas[0].phase == "Succeeded"
    sim.step()
    sim.set("tiny-worker-0", "Succeeded")
    sim.step()
    sim.step()
    # Its limit reached, the replica stays succeeded and the job succeeds.
    sim.set("tiny-worker-0", "Succeeded")
    p = sim.step()
    assert p.status.phase == "Succeeded" and p.status.backoff_count == 2


def test_always_with_the_backoff_budget_spent_ends_a_success_as_a_success() -> None:
    sim = Sim(tiny_job(replicas=1, restart="Always", run_policy={"backoffLimit": 1}))
    sim.step()
    sim.set("tiny-worker-0", "Succeeded")
    sim.step()
    sim.step()
    sim.set("tiny-worker-0", "Succeeded")
    p = sim.step()
    assert p.status.phase == "Succeeded"
    assert p.status.condition("Failed") is None


def test_always_with_the_budget_spent_waits_for_the_other_replicas() -> None:
    sim = Sim(tiny_job(replicas=2, restart="Always", run_policy={"backoffLimit": 1}))
    sim.step()
    sim.set("tiny-worker-1", "Running")
    sim.set("tiny-worker-0", "Succeeded")
    sim.step()
    sim.step()
    sim.set("tiny-worker-0", "Succeeded")  # no budget left: it stays succeeded
    p = sim.step()
    assert p.status.phase == "Running" and not p.delete
    assert p.status.condition("Failed") is None
    sim.set("tiny-worker-1", "Succeeded")
    assert sim.step().status.phase == "Succeeded"


def test_always_restarts_a_failure_and_exhausts_the_budget() -> None:
    sim = Sim(tiny_job(replicas=1, restart="Always", run_policy={"backoffLimit": 1}))
    sim.step()
    _restart(sim, "tiny-worker-0", 3)
    sim.set("tiny-worker-0", "Failed", 3)
    p = sim.step()
    assert p.status.phase == "Failed"
    assert p.status.condition("Failed").reason == "BackoffLimitExceeded"  # type: ignore[union-attr]


def test_a_pod_incarnation_proves_restarts_the_status_lost() -> None:
    sim = Sim(tiny_job(replicas=1, restart="OnFailure", run_policy={"backoffLimit": 3}))
    sim.step()
    _restart(sim, "tiny-worker-0", 1)
    _restart(sim, "tiny-worker-0", 1)
    # The status is restored from an old backup; the pod still says it is incarnation 2.
    sim.manifest["status"] = {}
    sim.set("tiny-worker-0", "Running")
    p = sim.step()
    assert p.status.backoff_count == 2
    assert p.status.tasks[0].replicas[0].restart_count == 2
    _restart(sim, "tiny-worker-0", 1)
    sim.set("tiny-worker-0", "Failed", 1)
    p = sim.step()
    assert p.status.phase == "Failed" and p.status.backoff_count == 3


def test_every_step_of_a_restart_can_be_replayed_without_counting_twice() -> None:
    """The controller may die after any write; replaying the plan on what it left is safe."""
    sim = Sim(tiny_job(replicas=1, restart="OnFailure", run_policy={"backoffLimit": 5}))
    sim.step()
    sim.set("tiny-worker-0", "Failed", 137)
    first = sim.plan()
    for _ in range(3):  # status written each time, the pod never deleted
        sim.manifest["status"] = dump(first.status)
        first = sim.plan()
        assert first.status.backoff_count == 1
        assert [d.name for d in first.delete] == ["tiny-worker-0"]
    sim.step()  # deleted now
    p = sim.step()  # recreated
    assert [o["metadata"]["name"] for o in p.create] == ["tiny-worker-0"]
    again = sim.plan()  # the create is replayed: nothing more to do
    assert not again.create and not again.delete and again.status.backoff_count == 1


def test_a_types_restart_count_never_goes_back_when_it_scales_down() -> None:
    sim = Sim(tiny_job(replicas=3, restart="OnFailure", run_policy={"backoffLimit": 9}))
    sim.step()
    sim.set("tiny-worker-2", "Failed", 1)
    sim.step()  # restart 1 recorded, the pod deleted
    sim.step()  # and created again
    assert sim.status["tasks"][0]["restartCount"] == 1
    sim.manifest["spec"]["replicaSpecs"][0]["replicas"] = 2  # worker-2 scaled away
    p = sim.step()
    assert [d.name for d in p.delete] == ["tiny-worker-2"]
    assert p.status.tasks[0].restart_count == 1 and p.status.backoff_count == 1
    sim.set("tiny-worker-0", "Failed", 1)
    assert sim.step().status.tasks[0].restart_count == 2  # and later restarts add to it
    sim.manifest["spec"]["replicaSpecs"][0]["replicas"] = 0  # the whole type scaled away
    p = sim.step()
    assert [(t.type, t.restart_count, t.replicas) for t in p.status.tasks] == [("worker", 2, [])]
