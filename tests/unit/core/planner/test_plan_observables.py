"""What a plan says, word for word: its events, the job's conditions, what it deletes (with which
uid and grace period) and updates, through a job's life on the engine's minimal test kind."""

from __future__ import annotations

import copy
from collections.abc import Sequence
from datetime import timedelta
from typing import Any

import pytest

from t9kjobs.kinds import ReplicaState, Verdict
from t9kjobs.loading import parse_job
from t9kjobs.models import dump
from t9kjobs.objects import ANNOTATION_INCARNATION, DesiredPod
from t9kjobs.planner import Event, ObjectRef, Observed, plan
from t9kjobs.vocabulary import Obj
from tests.unit.conftest import NOW
from tests.unit.core.planner.sim import Sim
from tests.unit.core.planner.tinyjob import KIND, tiny_job, tiny_manager

T = "2026-01-01T12:00:{:02d}Z"


def conditions(sim: Sim) -> list[tuple[str, str, str, str, str]]:
    """(type, status, reason, message, lastTransitionTime) of each condition, in order."""
    return [
        (c["type"], c["status"], c["reason"], c["message"], c["lastTransitionTime"])
        for c in sim.status["conditions"]
    ]


def at(sim: Sim, seconds: int) -> None:
    sim.now = NOW + timedelta(seconds=seconds)


def pod_ref(name: str, exited: bool) -> ObjectRef:
    return ObjectRef("v1", "Pod", name, f"uid-{name}", 0 if exited else None)


def test_a_job_from_creation_to_success() -> None:
    sim = Sim(tiny_job(replicas=2, restart="OnFailure"))
    p = sim.step()
    # The first pods' Event is routine: the status says the same (posted with --routine-events).
    assert p.events == (
        Event("Normal", "PodsCreated", "created tiny-worker-0, tiny-worker-1", routine=True),
    )
    assert conditions(sim) == [
        ("Initialized", "False", "CreatingPods", "creating pods", T.format(0))
    ]
    assert p.status_changed
    at(sim, 10)
    sim.set("tiny-worker-0", "Pending")
    sim.set("tiny-worker-1", "Pending")
    p = sim.step()
    assert (p.status.phase, p.events) == ("Pending", ())
    assert conditions(sim) == [
        ("Initialized", "True", "PodsCreated", "all pods are created", T.format(10))
    ]
    assert not sim.plan().status_changed  # nothing new: nothing to write
    at(sim, 20)
    sim.set("tiny-worker-0", "Running")
    sim.set("tiny-worker-1", "Running")
    p = sim.step()
    assert conditions(sim)[1:] == [
        ("Running", "True", "PodsRunning", "all pods are running", T.format(20))
    ]
    at(sim, 30)
    sim.set("tiny-worker-1", "Failed", 1)
    p = sim.step()
    assert p.delete == (pod_ref("tiny-worker-1", exited=True),)
    assert p.events == (
        Event("Warning", "Restarting", "tiny-worker-1 failed with exit code 1; restart 1"),
    )
    assert p.status.phase == "Running"  # a replica being replaced keeps the job running
    assert conditions(sim)[2:] == [
        (
            "ReplicaFailure",
            "True",
            "ReplicaFailed",
            "tiny-worker-1 failed with exit code 1 (container main)",
            T.format(30),
        )
    ]
    at(sim, 40)
    p = sim.step()
    assert p.events == (Event("Normal", "PodsCreated", "created tiny-worker-1"),)
    assert conditions(sim)[2:] == [
        ("ReplicaFailure", "False", "NoFailure", "no replica is failing", T.format(40))
    ]
    at(sim, 50)
    sim.set("tiny-worker-0", "Succeeded")
    sim.set("tiny-worker-1", "Succeeded")
    p = sim.step()
    assert p.events == (Event("Normal", "Succeeded", "all replicas succeeded", routine=True),)
    assert conditions(sim) == [
        ("Initialized", "True", "PodsCreated", "all pods are created", T.format(10)),
        ("Running", "False", "AllSucceeded", "all replicas succeeded", T.format(50)),
        ("ReplicaFailure", "False", "NoFailure", "no replica is failing", T.format(40)),
        ("Completed", "True", "AllSucceeded", "all replicas succeeded", T.format(50)),
    ]


def test_a_failed_job_says_so_in_a_warning() -> None:
    sim = Sim(tiny_job(replicas=2, restart="Never"))
    sim.step()
    sim.set("tiny-worker-0", "Failed", 2)
    sim.set("tiny-worker-1", "Failed", 3)
    p = sim.step()
    message = "tiny-worker-0 failed with exit code 2"
    assert p.events == (Event("Warning", "Failed", message),)
    *_, failed, replica_failure = conditions(sim)
    assert failed == ("Failed", "True", "ReplicaFailed", message, T.format(0))
    assert replica_failure[:3] == ("ReplicaFailure", "True", "ReplicaFailed")


def test_every_failing_replica_is_named() -> None:
    sim = Sim(tiny_job(replicas=2, restart="OnFailure"))
    sim.step()
    sim.set("tiny-worker-0", "Failed", 2)
    sim.set("tiny-worker-1", "Failed", 3)
    sim.step()
    failure = sim.condition("ReplicaFailure")
    assert failure is not None and failure["message"] == (
        "tiny-worker-0 failed with exit code 2 (container main);"
        " tiny-worker-1 failed with exit code 3 (container main)"
    )


def test_a_restart_of_a_pod_without_an_exit_code() -> None:
    sim = Sim(tiny_job(replicas=1, restart="OnFailure"))
    sim.step()
    sim.pod("tiny-worker-0")["status"] = {"phase": "Failed"}  # evicted: no container status
    p = sim.step()
    assert p.events == (Event("Warning", "Restarting", "tiny-worker-0 failed; restart 1"),)


def test_pause_and_resume_word_for_word() -> None:
    sim = Sim(tiny_job(replicas=2))
    sim.step()
    sim.set("tiny-worker-0", "Running")
    sim.set("tiny-worker-1", "Running")
    sim.pod("tiny-worker-1")["metadata"]["deletionTimestamp"] = T.format(1)
    sim.step()
    sim.manifest["spec"]["runMode"] = {"pause": {"enabled": True}}
    at(sim, 10)
    p = sim.step()
    assert p.delete == (pod_ref("tiny-worker-0", exited=False),)  # the other is going already
    assert p.events == (Event("Normal", "Paused", "deleted 1 pod(s)"),)
    assert conditions(sim)[1:] == [
        ("Paused", "True", "PauseEnabled", "spec.runMode.pause is enabled", T.format(10)),
        ("Running", "False", "Paused", "the job is paused", T.format(10)),
    ]
    assert [r.phase for r in p.status.tasks[0].replicas] == ["Deleted", "Deleted"]
    assert (p.status.aggregate.deleted, p.status.aggregate.running) == (2, 0)
    sim.objects.clear()
    assert sim.step().events == ()  # nothing left to delete
    sim.manifest["spec"]["runMode"]["pause"]["enabled"] = False
    at(sim, 20)
    p = sim.step()
    assert p.status.phase == "Resuming"
    # Written before the pods are created: pods that run at once must not skip `Resuming`.
    assert len(p.create) == 2 and not p.status_after_creations and p.status_due_in is None
    assert sim.condition("Paused") == {
        "type": "Paused",
        "status": "False",
        "reason": "Resumed",
        "message": "spec.runMode.pause is disabled",
        "lastTransitionTime": T.format(20),
    }


@pytest.mark.parametrize(
    "run_mode",
    [
        {"debug": {"enabled": False, "replicaSpecs": [{"type": "worker", "command": ["dbg"]}]}},
        {"pause": {"enabled": False, "resumeSpecs": [{"type": "worker", "command": ["resume"]}]}},
    ],
    ids=["debug-disabled", "pause-never-enabled"],
)
def test_overrides_of_a_mode_that_is_off_change_nothing(run_mode: Obj) -> None:
    sim = Sim(tiny_job(replicas=1, runMode=run_mode))
    sim.step()
    pod = sim.pod("tiny-worker-0")
    assert pod["spec"]["containers"][0]["command"] == ["train"]
    assert "initContainers" in pod["spec"]


def test_debug_mode_says_where_the_launch_command_is() -> None:
    sim = Sim(tiny_job(replicas=1, runMode={"debug": {"enabled": True}}))
    sim.step()
    assert conditions(sim)[-1] == (
        "Running",
        "True",
        "DebugMode",
        "the job is in debug mode (spec.runMode.debug): pods run the debug command and their"
        " exits do not finish the job; a pod's launch command is in its annotation"
        " batch.tensorstack.dev/launch-command and in $T9KJOBS_LAUNCH_COMMAND",
        T.format(0),
    )


@pytest.mark.parametrize(
    ("policy", "deleted"),
    [
        ("Unfinished", ["tiny-worker-1", "tiny-worker-2"]),
        ("All", ["tiny-worker-0", "tiny-worker-1", "tiny-worker-2", "tiny-worker-3"]),
    ],
)
def test_cleanup_deletes_pending_and_unknown_pods_as_unfinished(
    policy: str, deleted: list[str]
) -> None:
    sim = Sim(tiny_job(replicas=5, restart="Never", run_policy={"cleanUpPolicy": policy}))
    sim.step()
    for i, phase in enumerate(["Failed", "Pending", "Unknown", "Succeeded", "Running"]):
        sim.set(f"tiny-worker-{i}", phase)
    sim.pod("tiny-worker-4")["metadata"]["deletionTimestamp"] = T.format(1)  # going already
    exited = {"tiny-worker-0", "tiny-worker-3"}
    p = sim.step()
    assert p.status.phase == "Failed"
    assert p.delete == tuple(pod_ref(n, exited=n in exited) for n in deleted)


def test_a_pod_listed_without_its_api_version_is_deleted_as_v1() -> None:
    sim = Sim(tiny_job(replicas=2))
    sim.step()
    del sim.pod("tiny-worker-1")["apiVersion"]
    sim.manifest["spec"]["replicaSpecs"][0]["replicas"] = 1
    assert sim.step().delete == (pod_ref("tiny-worker-1", exited=False),)


def test_a_terminating_pod_is_not_deleted_again_when_scaled_down() -> None:
    sim = Sim(tiny_job(replicas=3))
    sim.step()
    sim.set("tiny-worker-1", "Running")
    sim.pod("tiny-worker-2")["metadata"]["deletionTimestamp"] = T.format(1)
    sim.manifest["spec"]["replicaSpecs"][0]["replicas"] = 1
    p = sim.step()
    assert p.delete == (pod_ref("tiny-worker-1", exited=False),)


def test_the_backoff_count_of_a_finished_job_is_what_the_pods_prove() -> None:
    """A status restored from a backup says no restart; the pod's incarnation says two."""
    sim = Sim(tiny_job(replicas=1, restart="OnFailure", run_policy={"backoffLimit": 2}))
    sim.step()
    sim.pod("tiny-worker-0")["metadata"]["annotations"][ANNOTATION_INCARNATION] = "2"
    sim.set("tiny-worker-0", "Failed", 1)
    p = sim.step()
    assert p.status.phase == "Failed"
    assert p.status.backoff_count == 2


def test_a_pod_in_a_phase_of_its_own_counts_as_unknown() -> None:
    sim = Sim(tiny_job(replicas=2))
    sim.step()
    sim.pod("tiny-worker-0")["status"] = {"phase": "Evicting"}
    p = sim.step()
    assert (p.status.aggregate.unknown, p.status.aggregate.creating) == (1, 0)
    assert p.status.aggregate.pending == 1


class Hooks:
    """The test kind's hooks with some changed: its verdict, auxiliary objects, pods replaced
    when their spec changes."""

    def __init__(
        self,
        verdict: Verdict | None = None,
        aux: Sequence[Obj] = (),
        recreate: bool = False,
    ) -> None:
        self.base = tiny_manager().hooks_for(KIND)
        self.info = self.base.info
        self.child_kinds = self.base.child_kinds
        self.verdict = verdict
        self.aux = list(aux)
        self.recreate = recreate
        self.build_launch_command = self.base.build_launch_command
        self.mutate_pod = self.base.mutate_pod
        self.update_status = self.base.update_status

    def build_pods(self, job: Any) -> list[DesiredPod]:
        pods = self.base.build_pods(job)
        for pod in pods:
            pod.recreate_on_change = self.recreate
        return pods

    def compute_status(self, job: Any, replicas: Sequence[ReplicaState]) -> Verdict | None:
        return self.verdict

    def auxiliary_objects(self, job: Any, pods: Any, absent_kinds: Any) -> list[Obj]:
        return copy.deepcopy(self.aux)


def _plan(hooks: Hooks, manifest: Obj, objects: Sequence[Obj], absent: Sequence[str] = ()) -> Any:
    job = parse_job(manifest, tiny_manager())
    return plan(job, Observed.of(objects, absent), NOW, hooks)


def _pod(sim: Sim, name: str) -> Obj:
    return copy.deepcopy(sim.pod(name))


@pytest.mark.parametrize(
    ("verdict", "phase", "reason"),
    [
        (None, "Failed", "BackoffLimitExceeded"),
        (Verdict("Failed", "ReplicaFailed", "x"), "Failed", "BackoffLimitExceeded"),
        (Verdict("Succeeded", "Done", "done"), "Succeeded", "Done"),
    ],
    ids=["framework-waits", "framework-fails", "framework-succeeds"],
)
def test_an_exhausted_backoff_fails_the_job_unless_the_framework_says_it_succeeded(
    verdict: Verdict | None, phase: str, reason: str
) -> None:
    manifest = tiny_job(replicas=1, restart="OnFailure", run_policy={"backoffLimit": 0})
    sim = Sim(copy.deepcopy(manifest))
    sim.step()
    sim.set("tiny-worker-0", "Failed", 1)
    manifest["status"] = sim.manifest["status"]
    p = _plan(Hooks(verdict), manifest, [_pod(sim, "tiny-worker-0")])
    assert p.status.phase == phase
    assert p.status.condition("Running").reason == reason  # type: ignore[union-attr]


def test_a_pod_whose_spec_changed_is_relaunched_unless_it_is_going_already() -> None:
    manifest = tiny_job(replicas=2, restart="Never")
    sim = Sim(copy.deepcopy(manifest))
    sim.step()
    sim.set("tiny-worker-0", "Running")
    sim.set("tiny-worker-1", "Running")
    manifest["status"] = sim.manifest["status"]
    manifest["spec"]["replicaSpecs"][0]["template"]["spec"]["containers"][0]["image"] = "new"
    pods = [_pod(sim, "tiny-worker-0"), _pod(sim, "tiny-worker-1")]
    pods[1]["metadata"]["deletionTimestamp"] = T.format(1)
    p = _plan(Hooks(recreate=True), manifest, pods)
    assert p.delete == (pod_ref("tiny-worker-0", exited=False),)
    assert p.events == (Event("Normal", "Relaunching", "tiny-worker-0: its spec changed"),)
    assert not _plan(Hooks(recreate=False), manifest, pods).delete


_GROUP = {
    "apiVersion": "scheduler.tensorstack.dev/v1beta1",
    "kind": "PodGroup",
    "metadata": {"name": "tiny"},
    "spec": {"minMember": 2, "queues": ["a", "b"]},
}
_BOARD = {
    "apiVersion": "tensorstack.dev/v1beta1",
    "kind": "TensorBoard",
    "metadata": {"name": "tiny"},
}


def _current(obj: Obj, **spec: Any) -> Obj:
    current = copy.deepcopy(obj)
    current["metadata"].update(uid="uid-aux", resourceVersion="7")
    current["spec"] = {**current.get("spec", {}), **spec}
    return current


@pytest.mark.parametrize(
    ("spec", "updated"),
    [
        ({}, False),
        ({"extra": "set by the scheduler"}, False),  # more than desired is fine
        ({"queues": ["a", "c"]}, True),
        ({"queues": ["a"]}, True),
        ({"queues": ["a", "b", "c"]}, True),
        ({"queues": "a,b"}, True),
        ({"minMember": 3}, True),
    ],
)
def test_an_auxiliary_object_is_updated_when_its_spec_lacks_what_is_desired(
    spec: Obj, updated: bool
) -> None:
    p = _plan(Hooks(aux=[_GROUP]), tiny_job(replicas=1), [_current(_GROUP, **spec)])
    assert [o["metadata"].get("resourceVersion") for o in p.update] == (["7"] if updated else [])
    assert [o["kind"] for o in p.create] == ["Pod"]


def test_missing_and_absent_kinds_and_their_return() -> None:
    manifest = tiny_job(replicas=1)
    hooks = Hooks(aux=[_GROUP, _BOARD])
    p = _plan(hooks, manifest, [], absent=["PodGroup", "TensorBoard"])
    degraded = p.status.condition("Degraded")
    assert degraded is not None and (degraded.status, degraded.message) == (
        "True",
        "the cluster does not serve PodGroup, TensorBoard (its CRD is not installed):"
        " PodGroup/tiny, TensorBoard/tiny not created; the job runs without it",
    )
    manifest["status"] = dump(p.status)
    pod = {**p.create[0], "metadata": {**p.create[0]["metadata"], "uid": "uid-pod"}}
    again = _plan(hooks, manifest, [pod, _current(_GROUP), _current(_BOARD)])
    degraded = again.status.condition("Degraded")
    assert degraded is not None
    assert (degraded.status, degraded.reason, degraded.message) == (
        "False",
        "Resolved",
        "every dependency exists, the spec is valid and the API server answers",
    )
    manifest["status"] = dump(again.status)
    lost = _plan(hooks, manifest, [pod, _current(_BOARD)], absent=["PodGroup"])
    assert lost.status.condition("Degraded").status == "True"  # type: ignore[union-attr]
    assert lost.status_changed  # only a condition changed, in place
    gone = _plan(Hooks(), manifest, [pod, _current(_GROUP)])
    assert gone.delete == (
        ObjectRef("scheduler.tensorstack.dev/v1beta1", "PodGroup", "tiny", "uid-aux", None),
    )
