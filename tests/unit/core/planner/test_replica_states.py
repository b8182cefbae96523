"""Each replica's state as the engine judges it (`assess`) and as the job's status shows it:
final at its restart limit or the backoff budget, terminating pods, container states, uids,
and which container's exit code a failure is reported with."""

from __future__ import annotations

from datetime import timedelta

import pytest

from t9kjobs.kinds import ReplicaState
from t9kjobs.manager import load_plugins
from t9kjobs.models import ContainerStatus, Lifecycle, RestartRule, RunMode
from t9kjobs.objects import ANNOTATION_INCARNATION, DesiredPod
from t9kjobs.planner.replicas import assess
from t9kjobs.testing.fixtures import pod_in_phase
from t9kjobs.vocabulary import Obj
from tests.unit.conftest import NOW
from tests.unit.core.planner.sim import Sim
from tests.unit.core.planner.tinyjob import tiny_job
from tests.unit.plugins.pytorch.helpers import container, manifest, replica


def _desired(policy: str, limit: int | None = None) -> DesiredPod:
    pod = {"metadata": {"name": "j-worker-0"}, "spec": {"containers": [{"name": "main"}]}}
    return DesiredPod("worker", 0, RestartRule(policy=policy, limit=limit), pod, "main")


def _observed(phase: str, code: int | None = None, incarnation: str | None = None) -> Obj:
    pod = pod_in_phase(_desired("Never").manifest, phase, code)
    if incarnation is not None:
        pod["metadata"]["annotations"] = {ANNOTATION_INCARNATION: incarnation}
    return pod


def _life(backoff_limit: int | None = None) -> Lifecycle:
    return Lifecycle(RunMode(), backoff_limit, None, "None")


def _state(state: str, code: int | None, final: bool, restarts: int) -> ReplicaState:
    return ReplicaState("worker", 0, "j-worker-0", state, code, final, restarts, "main")


@pytest.mark.parametrize(
    ("policy", "limit", "phase", "code", "restarts", "expected"),
    [
        # Within the limit: replaced, not final.
        ("OnFailure", 2, "Failed", 1, 1, _state("Restarting", 1, False, 2)),
        # At the limit: the failure is final, nothing restarts.
        ("OnFailure", 2, "Failed", 1, 2, _state("Failed", 1, True, 2)),
        ("ExitCode", 1, "Failed", 137, 1, _state("Failed", 137, True, 1)),
        ("Always", 1, "Succeeded", 0, 1, _state("Succeeded", 0, True, 1)),
        # Limit 0: never restarted.
        ("OnFailure", 0, "Failed", 2, 0, _state("Failed", 2, True, 0)),
        # No restart wanted: final as it ended.
        ("OnFailure", None, "Succeeded", 0, 0, _state("Succeeded", 0, True, 0)),
        ("ExitCode", None, "Failed", 1, 0, _state("Failed", 1, True, 0)),
        ("Never", None, "Running", None, 0, ReplicaState("worker", 0, "j-worker-0", "Running")),
    ],
)
def test_a_replica_is_final_at_its_restart_limit(
    policy: str,
    limit: int | None,
    phase: str,
    code: int | None,
    restarts: int,
    expected: ReplicaState,
) -> None:
    desired = _desired(policy, limit)
    pod = _observed(phase, code, incarnation=str(restarts))
    found = assess([desired], {desired.name: pod}, {desired.name: restarts}, restarts, _life())
    assert found.states == [expected]
    assert [d.name for d, _ in found.restart] == (
        ["j-worker-0"] if expected.state == "Restarting" else []
    )
    assert found.backoff_exceeded is None  # a replica's own limit is not the job's budget


@pytest.mark.parametrize(
    ("phase", "code", "exceeded"),
    [("Failed", 1, True), ("Succeeded", 0, False)],
    ids=["a failure exhausts the budget", "a success under Always just stops"],
)
def test_the_backoff_budget_makes_a_replica_final(phase: str, code: int, exceeded: bool) -> None:
    desired = _desired("Always")
    pod = _observed(phase, code, incarnation="2")
    found = assess([desired], {desired.name: pod}, {desired.name: 2}, 2, _life(backoff_limit=2))
    assert found.states == [_state(phase, code, True, 2)]
    assert found.restart == []
    assert found.backoff_exceeded == (_state(phase, code, True, 2) if exceeded else None)
    assert (found.backoff_performed, found.backoff_count) == (2, 2)


def test_a_restart_counted_before_a_crash_is_replaced_without_counting_again() -> None:
    desired = _desired("OnFailure", 5)
    pod = _observed("Failed", 1, incarnation="0")  # the status already counts its restart
    found = assess([desired], {desired.name: pod}, {desired.name: 1}, 1, _life(backoff_limit=1))
    assert found.states == [_state("Restarting", 1, False, 1)]
    assert [d.name for d, _ in found.restart] == ["j-worker-0"]
    assert found.backoff_exceeded is None and found.backoff_count == 1


@pytest.mark.parametrize("annotation", ["garbage", None])
def test_a_pod_without_a_readable_incarnation_is_the_first(annotation: str | None) -> None:
    desired = _desired("OnFailure")
    pod = _observed("Failed", 1, incarnation=annotation)
    found = assess([desired], {desired.name: pod}, {}, 0, _life(3))
    assert found.states == [_state("Restarting", 1, False, 1)]
    assert (found.performed, found.backoff_performed, found.backoff_count) == (
        {"j-worker-0": 0},
        0,
        1,
    )


@pytest.mark.parametrize(
    ("limit", "backoff_limit", "restarted"),
    [
        (None, None, False),  # neither limit: never restarted (GenericJob's string form)
        (None, 3, True),  # the job's backoffLimit alone bounds it (PyTorchTrainingJob)
        (2, None, True),  # its own limit alone (the object form)
        (0, 3, False),  # its own limit 0 wins over the backoffLimit
    ],
)
def test_one_restart_rule_for_every_kind(
    limit: int | None, backoff_limit: int | None, restarted: bool
) -> None:
    """RestartRule: within the replica's own limit and the job's backoffLimit, where each
    exists; with neither, never."""
    desired = _desired("OnFailure", limit)
    pod = _observed("Failed", 1)
    found = assess([desired], {desired.name: pod}, {}, 0, _life(backoff_limit))
    assert [s.state for s in found.states] == ["Restarting" if restarted else "Failed"]


def test_a_replica_without_a_pod_is_creating_with_no_restarts() -> None:
    found = assess([_desired("OnFailure")], {}, {}, 0, _life())
    assert found.states == [ReplicaState("worker", 0, "j-worker-0", "Creating")]
    assert found.restarts_recorded == {}


def test_last_transition_time_moves_when_a_conditions_status_flips() -> None:
    sim = Sim(tiny_job(replicas=2, restart="OnFailure"))
    sim.step()
    sim.now = NOW + timedelta(seconds=10)
    sim.set("tiny-worker-0", "Failed", 1)
    sim.step()  # worker-0 restarts
    failure = sim.condition("ReplicaFailure")
    assert failure is not None
    assert (failure["status"], failure["lastTransitionTime"]) == ("True", "2026-01-01T12:00:10Z")
    assert failure["message"] == "tiny-worker-0 failed with exit code 1 (container main)"
    sim.now = NOW + timedelta(seconds=20)
    sim.set("tiny-worker-1", "Failed", 2)
    sim.step()  # worker-0 is recreated, worker-1 restarts
    failure = sim.condition("ReplicaFailure")
    assert failure is not None
    # Still True, with a new message: the time stays.
    assert (failure["status"], failure["lastTransitionTime"]) == ("True", "2026-01-01T12:00:10Z")
    assert failure["message"] == "tiny-worker-1 failed with exit code 2 (container main)"
    sim.now = NOW + timedelta(seconds=30)
    sim.step()  # worker-1 is recreated: no replica is failing any more
    assert sim.condition("ReplicaFailure") == {
        "type": "ReplicaFailure",
        "status": "False",
        "reason": "NoFailure",
        "message": "no replica is failing",
        "lastTransitionTime": "2026-01-01T12:00:30Z",
    }


def test_a_terminating_pod_counts_as_deleted_and_is_left_to_go() -> None:
    sim = Sim(tiny_job(replicas=2))
    sim.step()
    sim.set("tiny-worker-0", "Running")
    sim.set("tiny-worker-1", "Running")
    sim.pod("tiny-worker-1")["metadata"]["deletionTimestamp"] = "2026-01-01T12:00:05Z"
    p = sim.step()
    replicas = p.status.tasks[0].replicas
    assert [(r.name, r.phase) for r in replicas] == [
        ("tiny-worker-0", "Running"),
        ("tiny-worker-1", "Deleted"),
    ]
    assert (p.status.aggregate.running, p.status.aggregate.deleted) == (1, 1)
    assert not p.delete and not p.create  # neither deleted again nor replaced while it goes


def test_replica_status_has_the_pods_uid_and_container_states() -> None:
    sim = Sim(tiny_job(replicas=3, restart="Never"))
    p = sim.step()
    assert [(r.uid, r.phase, r.containers) for r in p.status.tasks[0].replicas] == [
        (None, "Creating", [])
    ] * 3
    sim.set("tiny-worker-0", "Running")
    sim.set("tiny-worker-1", "Pending")  # worker-2: created, not yet seen by a kubelet
    p = sim.step()
    replicas = p.status.tasks[0].replicas
    assert [(r.uid, r.phase) for r in replicas] == [
        ("uid-tiny-worker-0", "Running"),
        ("uid-tiny-worker-1", "Pending"),
        ("uid-tiny-worker-2", "Pending"),
    ]
    assert [r.containers for r in replicas] == [
        [ContainerStatus(name="main", state="running")],
        [ContainerStatus(name="main", state="waiting", reason="ContainerCreating")],
        [],
    ]
    sim.pod("tiny-worker-1")["status"]["containerStatuses"] = [{"name": "main", "state": {}}]
    sim.set("tiny-worker-0", "Failed", 7)
    p = sim.step()
    replicas = p.status.tasks[0].replicas
    assert replicas[0].containers == [
        ContainerStatus(name="main", state="terminated", exit_code=7, reason="Error")
    ]
    assert replicas[1].containers == [ContainerStatus(name="main", state="waiting")]


def test_a_failure_without_the_training_containers_exit_code_names_another_container() -> None:
    """The sidecar died and took the pod down while the training container never ran."""
    python = container("python", command=["python", "train.py"])
    sidecar = container("sidecar", command=["proxy"])
    doc = manifest(replica("worker", 1, python, sidecar, restartPolicy="OnFailure"))
    sim = Sim(doc, load_plugins())
    sim.step()
    pod = sim.pod("job-worker-0")
    pod["metadata"]["uid"] = "uid-0"
    pod["status"] = {
        "phase": "Failed",
        "containerStatuses": [
            {"name": "python", "state": {"waiting": {"reason": "PodInitializing"}}},
            {"name": "sidecar", "state": {"terminated": {"exitCode": 3, "reason": "Error"}}},
        ],
    }
    p = sim.step()
    assert [e.message for e in p.events if e.reason == "Restarting"] == [
        "job-worker-0 failed with exit code 3; restart 1"
    ]
    failure = sim.condition("ReplicaFailure")
    assert failure is not None
    assert failure["message"] == "job-worker-0 failed with exit code 3 (container sidecar)"


def test_a_replica_state_of_a_few_fields_is_not_final_and_never_restarted() -> None:
    """The defaults a plugin's own tests rely on (the conformance kit builds states so)."""
    state = ReplicaState("worker", 0, "j-worker-0", "Running")
    assert (state.exit_code, state.final, state.restarts, state.container) == (None, False, 0, None)
    assert not state.failed_for_good and not state.succeeded
