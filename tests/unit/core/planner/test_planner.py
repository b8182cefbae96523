"""The lifecycle engine on its own (a minimal test kind): restarts, budgets, deadlines,
cleanup, run modes, determinism, crash safety."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from t9kjobs.loading import parse_job
from t9kjobs.models import dump
from t9kjobs.objects import ANNOTATION_INCARNATION
from t9kjobs.planner import Observed, Plan, plan
from t9kjobs.testing.fixtures import apply_plan
from t9kjobs.vocabulary import Obj
from tests.unit.conftest import NOW
from tests.unit.core.planner.sim import Sim
from tests.unit.core.planner.tinyjob import KIND, tiny_job, tiny_manager


def _pods(p: Plan) -> list[str]:
    return [o["metadata"]["name"] for o in p.create if o["kind"] == "Pod"]


def test_first_plan_creates_every_pod_and_reports_pending() -> None:
    sim = Sim(tiny_job(replicas=3))
    p = sim.step()
    assert _pods(p) == ["tiny-worker-0", "tiny-worker-1", "tiny-worker-2"]
    assert p.status.phase == "Pending"
    assert p.status.start_time == "2026-01-01T12:00:00Z"
    assert p.status.aggregate.creating == 3
    assert [r.name for r in p.status.tasks[0].replicas] == _pods(p)
    assert any(e.reason == "PodsCreated" for e in p.events)
    pod = sim.pod("tiny-worker-0")
    assert pod["spec"]["restartPolicy"] == "Never"
    assert pod["metadata"]["ownerReferences"][0]["uid"] == "job-uid"
    assert pod["metadata"]["ownerReferences"][0]["controller"] is True
    assert pod["metadata"]["annotations"][ANNOTATION_INCARNATION] == "0"
    # What an autoscaler reads through the scale subresource.
    assert p.status.selector == "tensorstack.dev/owner-kind=TinyJob,tensorstack.dev/owner-name=tiny"


def test_same_input_same_plan() -> None:
    sim = Sim(tiny_job(replicas=2))
    sim.step()
    sim.set("tiny-worker-0", "Failed", 1)
    assert sim.plan() == sim.plan()


def test_running_then_succeeded_with_conditions_that_move_only_on_transition() -> None:
    sim = Sim(tiny_job(replicas=2))
    sim.step()
    sim.set("tiny-worker-0", "Running")
    sim.set("tiny-worker-1", "Running")
    sim.now = NOW + timedelta(seconds=10)
    p = sim.step()
    assert p.status.phase == "Running"
    running = sim.condition("Running")
    assert running is not None and running["status"] == "True"
    assert running["lastTransitionTime"] == "2026-01-01T12:00:10Z"
    assert sim.condition("Initialized")["status"] == "True"  # type: ignore[index]
    sim.now = NOW + timedelta(seconds=20)
    sim.step()
    assert sim.condition("Running")["lastTransitionTime"] == "2026-01-01T12:00:10Z"  # type: ignore[index]
    sim.set("tiny-worker-0", "Succeeded")
    sim.set("tiny-worker-1", "Succeeded")
    p = sim.step()
    assert p.status.phase == "Succeeded"
    assert sim.condition("Completed")["status"] == "True"  # type: ignore[index]
    assert sim.condition("Running")["status"] == "False"  # type: ignore[index]
    assert p.status.completion_time == "2026-01-01T12:00:20Z"
    assert [e.reason for e in p.events] == ["Succeeded"]


def test_a_finished_job_never_regresses() -> None:
    sim = Sim(tiny_job(replicas=1))
    sim.step()
    sim.set("tiny-worker-0", "Succeeded")
    sim.step()
    finished = sim.status
    del sim.objects[("Pod", "tiny-worker-0")]  # even a vanished pod is not recreated
    p = sim.step()
    assert not p.create and not p.status_changed
    assert sim.status == finished


def test_on_failure_restarts_a_replica_as_a_new_pod_with_the_same_name() -> None:
    sim = Sim(tiny_job(replicas=2, restart="OnFailure"))
    sim.step()
    sim.set("tiny-worker-1", "Failed", 1)
    p = sim.step()
    assert [d.name for d in p.delete] == ["tiny-worker-1"]
    assert p.delete[0].uid == "uid-tiny-worker-1"
    assert p.delete[0].grace_period_seconds == 0  # its containers have exited
    assert p.status.backoff_count == 1
    assert p.status.tasks[0].restart_count == 1
    assert p.status.phase != "Failed"
    assert (
        sim.condition("ReplicaFailure")["message"]
        == "tiny-worker-1 failed with exit code 1 (container main)"
    )  # type: ignore[index]
    assert any(e.reason == "Restarting" for e in p.events)
    p = sim.step()
    assert _pods(p) == ["tiny-worker-1"]
    assert sim.pod("tiny-worker-1")["metadata"]["annotations"][ANNOTATION_INCARNATION] == "1"
    assert p.status.backoff_count == 1  # creating the replacement counts nothing


def test_a_restart_recorded_before_a_crash_is_not_counted_twice() -> None:
    sim = Sim(tiny_job(replicas=1, restart="OnFailure"))
    sim.step()
    sim.set("tiny-worker-0", "Failed", 137)
    first = sim.plan()
    # The controller wrote the status, then died before deleting the failed pod.
    sim.manifest["status"] = dump(first.status)
    again = sim.plan()
    assert [d.name for d in again.delete] == ["tiny-worker-0"]
    assert again.status.backoff_count == 1
    assert again.status.tasks[0].replicas[0].restart_count == 1


def test_backoff_limit_fails_the_job_naming_the_pod_and_exit_code() -> None:
    sim = Sim(tiny_job(replicas=1, restart="OnFailure", run_policy={"backoffLimit": 2}))
    sim.step()
    for _ in range(2):
        sim.set("tiny-worker-0", "Failed", 3)
        sim.step()  # restart: delete
        sim.step()  # recreate
    sim.set("tiny-worker-0", "Failed", 3)
    p = sim.step()
    assert p.status.phase == "Failed"
    assert p.status.backoff_count == 2
    failed = sim.condition("Failed")
    assert failed is not None and failed["reason"] == "BackoffLimitExceeded"
    assert "tiny-worker-0 failed with exit code 3" in failed["message"]


def test_exit_code_policy_retries_signals_and_fails_on_program_errors() -> None:
    sim = Sim(tiny_job(replicas=1, restart="ExitCode"))
    sim.step()
    sim.set("tiny-worker-0", "Failed", 137)
    p = sim.step()
    assert [d.name for d in p.delete] == ["tiny-worker-0"] and p.status.phase != "Failed"
    sim.step()
    sim.set("tiny-worker-0", "Failed", 1)
    p = sim.step()
    assert p.status.phase == "Failed"
    assert "exit code 1" in sim.condition("Failed")["message"]  # type: ignore[index]


def test_never_fails_at_the_first_failure() -> None:
    sim = Sim(tiny_job(replicas=2, restart="Never"))
    sim.step()
    sim.set("tiny-worker-0", "Failed", 2)
    p = sim.step()
    assert p.status.phase == "Failed" and p.status.backoff_count == 0


def test_restart_limit_of_the_object_form() -> None:
    sim = Sim(tiny_job(replicas=1, restart={"policy": "OnFailure", "limit": 1}))
    sim.step()
    sim.set("tiny-worker-0", "Failed", 1)
    sim.step()
    sim.step()
    sim.set("tiny-worker-0", "Failed", 1)
    p = sim.step()
    assert p.status.phase == "Failed"
    assert p.status.tasks[0].restart_count == 1


def test_always_restarts_a_succeeded_replica_until_the_verdict() -> None:
    sim = Sim(tiny_job(replicas=2, restart="Always"))
    sim.step()
    sim.set("tiny-worker-0", "Succeeded")
    sim.set("tiny-worker-1", "Running")
    p = sim.step()
    assert [d.name for d in p.delete] == ["tiny-worker-0"]
    assert p.status.phase != "Succeeded"


def test_deadline_fails_the_job_and_deletes_active_pods_whatever_the_policy() -> None:
    sim = Sim(tiny_job(replicas=2, run_policy={"activeDeadlineSeconds": 5}))
    p = sim.step()
    assert p.requeue_after == 5
    sim.set("tiny-worker-0", "Running")
    sim.set("tiny-worker-1", "Succeeded")
    sim.now = NOW + timedelta(seconds=6)
    p = sim.step()
    assert p.status.phase == "Failed"
    assert sim.condition("Failed")["reason"] == "DeadlineExceeded"  # type: ignore[index]
    assert [d.name for d in p.delete] == ["tiny-worker-0"]  # cleanUpPolicy None keeps the rest


def test_cleanup_policies_when_the_job_fails() -> None:
    expected = {
        "All": ["tiny-worker-0", "tiny-worker-1"],
        "Unfinished": ["tiny-worker-1"],
        "None": [],
    }
    for policy, deleted in expected.items():
        sim = Sim(tiny_job(replicas=2, restart="Never", run_policy={"cleanUpPolicy": policy}))
        sim.step()
        sim.set("tiny-worker-0", "Failed", 1)
        sim.set("tiny-worker-1", "Running")
        p = sim.step()
        assert p.status.phase == "Failed"
        assert [d.name for d in p.delete] == deleted, policy
        # Applied again on the finished job, the cleanup deletes nothing more.
        assert not sim.step().delete


def test_pause_deletes_pods_and_resume_goes_through_resuming_with_overrides() -> None:
    sim = Sim(tiny_job(replicas=1))
    sim.step()
    sim.set("tiny-worker-0", "Running")
    sim.step()
    sim.manifest["spec"]["runMode"] = {
        "pause": {
            "enable": True,
            "resumeSpecs": [{"type": "worker", "command": ["resume"], "skipInitContainer": True}],
        }
    }
    p = sim.step()
    assert p.status.phase == "Paused"
    assert [d.name for d in p.delete] == ["tiny-worker-0"]
    assert sim.condition("Paused")["status"] == "True"  # type: ignore[index]
    assert not sim.step().create  # stays paused
    sim.manifest["spec"]["runMode"]["pause"]["enabled"] = False
    sim.manifest["spec"]["runMode"]["pause"].pop("enable")
    p = sim.step()
    assert p.status.phase == "Resuming"
    pod = sim.pod("tiny-worker-0")
    assert pod["spec"]["containers"][0]["command"] == ["resume"]
    assert "initContainers" not in pod["spec"]
    sim.set("tiny-worker-0", "Running")
    assert sim.step().status.phase == "Running"
    assert sim.condition("Paused")["status"] == "False"  # type: ignore[index]


def test_debug_mode_overrides_the_command_and_pod_exits_do_not_finish_the_job() -> None:
    sim = Sim(
        tiny_job(
            replicas=1,
            restart="Never",
            runMode={
                "debug": {
                    "enabled": True,
                    "replicaSpecs": [{"type": "worker", "skipInitContainer": True}],
                }
            },
        )
    )
    p = sim.step()
    pod = sim.pod("tiny-worker-0")
    assert pod["spec"]["containers"][0]["command"] == ["sleep", "inf"]
    assert "initContainers" not in pod["spec"]
    assert p.status.phase == "Running"
    assert sim.condition("Running")["reason"] == "DebugMode"  # type: ignore[index]
    sim.set("tiny-worker-0", "Failed", 1)
    assert sim.step().status.phase == "Running"


def test_pods_not_desired_any_more_are_deleted() -> None:
    sim = Sim(tiny_job(replicas=3))
    sim.step()
    sim.manifest["spec"]["replicaSpecs"][0]["replicas"] = 1
    p = sim.step()
    assert sorted(d.name for d in p.delete) == ["tiny-worker-1", "tiny-worker-2"]


def test_absent_child_kinds_are_left_out_with_a_condition() -> None:
    manager = tiny_manager()
    job = parse_job(tiny_job(replicas=1), manager)
    hooks = manager.hooks_for(KIND)

    class WithPodGroup:
        info = hooks.info
        child_kinds = hooks.child_kinds
        build_pods = hooks.build_pods
        build_launch_command = hooks.build_launch_command
        compute_status = hooks.compute_status
        mutate_pod = hooks.mutate_pod
        update_status = hooks.update_status

        def auxiliary_objects(self, job: Any, pods: Any, absent_kinds: Any) -> list[Obj]:
            return [
                {
                    "apiVersion": "scheduler.tensorstack.dev/v1beta1",
                    "kind": "PodGroup",
                    "metadata": {"name": "tiny"},
                }
            ]

    p = plan(job, Observed({}, frozenset({"PodGroup"})), NOW, WithPodGroup())
    assert [o["kind"] for o in p.create] == ["Pod"]
    degraded = p.status.condition("Degraded")
    assert degraded is not None and "PodGroup" in (degraded.message or "")


def test_pods_marked_stop_when_finished_are_deleted_whatever_the_policy() -> None:
    sim = Sim(tiny_job(replicas=2, restart="Never"))
    sim.step()
    sim.pod("tiny-worker-1")["metadata"]["annotations"][
        "batch.tensorstack.dev/stop-when-finished"
    ] = "true"
    sim.set("tiny-worker-1", "Running")
    sim.set("tiny-worker-0", "Failed", 1)
    p = sim.step()
    assert p.status.phase == "Failed"  # cleanUpPolicy None, yet the sshd-like pod goes
    assert [d.name for d in p.delete] == ["tiny-worker-1"]


def test_a_name_held_by_another_object_holds_every_pod_and_is_reported_once() -> None:
    sim = Sim(tiny_job(replicas=2))
    held = {("Pod", "tiny-worker-1"): "its controller is TinyJob tiny (uid old)"}

    def step() -> Plan:
        job = parse_job(sim.manifest, sim.manager)
        p = plan(
            job, Observed(dict(sim.objects), conflicts=held), sim.now, sim.manager.hooks_for(KIND)
        )
        sim.manifest["status"] = dump(p.status)
        sim.objects = apply_plan(sim.objects, p)
        return p

    p = step()
    assert _pods(p) == []  # ownership before use: no pod while any name is held
    message = (
        "Pod tiny-worker-1 exists and this job does not control it (its controller is TinyJob"
        " tiny (uid old)): no pod of the job is created while it exists"
    )
    initialized = p.status.condition("Initialized")
    assert initialized is not None
    assert (initialized.status, initialized.reason, initialized.message) == (
        "False",
        "NameConflict",
        message,
    )
    assert [(e.type, e.reason, e.message) for e in p.events] == [
        ("Warning", "NameConflict", message),
    ]
    assert p.requeue_after == 10.0  # looked at again: the holder may go without a word
    step()
    again = step()  # nothing new: nothing to do, nothing to say
    assert not again.create and not again.events and not again.status_changed
    held.clear()
    sim.now = NOW + timedelta(seconds=5)
    p = step()  # the name is free: created, and the condition says so
    assert _pods(p) == ["tiny-worker-0", "tiny-worker-1"]
    assert p.status.condition("Initialized").reason == "CreatingPods"  # type: ignore[union-attr]
