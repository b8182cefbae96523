"""The job follows its launcher; workers are reported and restarted, but decide nothing.

Planner-level: `plan` on hand-built observed pods, as the controller would call it.
"""

from __future__ import annotations

from typing import Any

from t9kjobs.manager import PluginManager
from t9kjobs.models import Job
from t9kjobs.objects import Obj
from t9kjobs.planner import Observed, Plan, plan
from t9kjobs.render import render_job
from tests.unit.configuring import NO_GANGS
from tests.unit.conftest import NOW
from tests.unit.plugins.colossalai.jobs import example

LAUNCHER = "colossalai-example-launcher"
WORKER_0 = "colossalai-example-worker-0"
WORKER_1 = "colossalai-example-worker-1"


def with_phase(pod: Obj, phase: str, exit_code: int | None = None, uid: str = "") -> Obj:
    pod = {**pod, "metadata": {**pod["metadata"], "uid": uid or f"uid-{pod['metadata']['name']}"}}
    name = pod["spec"]["containers"][0]["name"]
    state: dict[str, Any] = (
        {"running": {}} if exit_code is None else {"terminated": {"exitCode": exit_code}}
    )
    pod["status"] = {"phase": phase, "containerStatuses": [{"name": name, "state": state}]}
    return pod


class Cluster:
    """A job and the children the cluster holds; pods get phases set by the test."""

    def __init__(self, job: Job, manager: PluginManager) -> None:
        self.job = job
        self.hooks = manager.hooks_for(job.kind)
        self.objects = {o["metadata"]["name"]: o for o in render_job(job, manager)}
        for name, obj in self.objects.items():
            if obj["kind"] == "Pod":
                self.objects[name] = with_phase(obj, "Running")

    def set(self, name: str, phase: str, exit_code: int | None = None) -> None:
        self.objects[name] = with_phase(self.objects[name], phase, exit_code)

    def reconcile(self) -> Plan:
        result = plan(self.job, Observed.of(self.objects.values(), NO_GANGS), NOW, self.hooks)
        self.job = self.job.model_copy(update={"status": result.status})
        for ref in result.delete:
            self.objects.pop(ref.name, None)
        for obj in result.create:
            self.objects[obj["metadata"]["name"]] = with_phase(obj, "Running", uid="new")
        return result


def cluster(make_job: Any, manager: PluginManager, doc: dict[str, Any] | None = None) -> Cluster:
    c = Cluster(make_job(doc or example()), manager)
    c.reconcile()
    return c


def condition(result: Plan, type_: str) -> tuple[str, str | None, str | None] | None:
    found = result.status.condition(type_)  # type: ignore[arg-type]
    return None if found is None else (found.status, found.reason, found.message)


def deleted(result: Plan) -> list[str]:
    return sorted(ref.name for ref in result.delete)


def test_running(make_job: Any, manager: PluginManager) -> None:
    result = cluster(make_job, manager).reconcile()
    assert result.status.phase == "Running"
    assert [t.type for t in result.status.tasks] == ["launcher", "worker"]
    assert [r.name for r in result.status.tasks[0].replicas] == [LAUNCHER]
    assert result.status.aggregate.running == 3
    assert result.delete == () and result.create == ()


def test_launcher_success_completes_the_job(make_job: Any, manager: PluginManager) -> None:
    c = cluster(make_job, manager)
    c.set(LAUNCHER, "Succeeded", 0)
    result = c.reconcile()
    assert result.status.phase == "Succeeded"
    assert condition(result, "Completed") == (
        "True",
        "LauncherSucceeded",
        f"{LAUNCHER} succeeded",
    )


def test_worker_success_alone_decides_nothing(make_job: Any, manager: PluginManager) -> None:
    c = cluster(make_job, manager)
    c.set(WORKER_0, "Succeeded", 0)
    c.set(WORKER_1, "Succeeded", 0)
    assert c.reconcile().status.phase == "Running"


def test_launcher_failure_within_its_limit_restarts_it(
    make_job: Any, manager: PluginManager
) -> None:
    c = cluster(make_job, manager)  # the example's launcher: OnFailure, limit 1
    c.set(LAUNCHER, "Failed", 1)
    result = c.reconcile()
    assert result.status.phase == "Running"
    assert deleted(result) == [LAUNCHER]
    assert result.status.tasks[0].replicas[0].restart_count == 1
    assert condition(result, "ReplicaFailure") == (
        "True",
        "ReplicaFailed",
        f"{LAUNCHER} failed with exit code 1 (container launcher)",
    )
    # The replacement is created on the next reconcile, as incarnation 1.
    result = c.reconcile()
    assert [o["metadata"]["name"] for o in result.create] == [LAUNCHER]
    assert result.create[0]["metadata"]["annotations"]["batch.tensorstack.dev/restart-count"] == "1"


def test_launcher_failure_past_its_limit_fails_the_job(
    make_job: Any, manager: PluginManager
) -> None:
    c = cluster(make_job, manager)
    c.set(LAUNCHER, "Failed", 1)
    c.reconcile()
    c.reconcile()
    c.set(LAUNCHER, "Failed", 2)
    result = c.reconcile()
    assert result.status.phase == "Failed"
    assert condition(result, "Failed") == (
        "True",
        "LauncherFailed",
        f"{LAUNCHER} failed with exit code 2 (container launcher) after 1 restart(s)",
    )
    # cleanUpWorkers: the workers go, the launcher (and its log) stays.
    assert deleted(result) == [WORKER_0, WORKER_1]


def test_string_restart_policy_has_limit_zero(make_job: Any, manager: PluginManager) -> None:
    doc = example()
    doc["spec"]["replicaSpecs"][0]["restartPolicy"] = "OnFailure"
    c = cluster(make_job, manager, doc)
    c.set(LAUNCHER, "Failed", 1)
    result = c.reconcile()
    assert result.status.phase == "Failed"
    assert condition(result, "Failed") == (
        "True",
        "LauncherFailed",
        f"{LAUNCHER} failed with exit code 1 (container launcher)",
    )


def test_failed_worker_is_reported_and_restarted(make_job: Any, manager: PluginManager) -> None:
    c = cluster(make_job, manager)  # workers: ExitCode, limit 2
    c.set(WORKER_1, "Failed", 137)
    result = c.reconcile()
    assert result.status.phase == "Running"
    assert condition(result, "ReplicaFailure") == (
        "True",
        "ReplicaFailed",
        f"{WORKER_1} failed with exit code 137 (container worker)",
    )
    assert deleted(result) == [WORKER_1]
    assert result.status.backoff_count == 1


def test_worker_failed_for_good_fails_the_job(make_job: Any, manager: PluginManager) -> None:
    """No attempt of the launcher can run without it, and the running one may wait for ever on
    an ssh session to a host that is gone."""
    c = cluster(make_job, manager)
    c.set(WORKER_0, "Failed", 1)  # not retryable under ExitCode
    result = c.reconcile()
    assert result.status.phase == "Failed"
    assert condition(result, "Failed") == (
        "True",
        "ReplicaFailed",
        f"{WORKER_0} failed with exit code 1 (container worker)",
    )
    assert LAUNCHER not in deleted(result)  # ColossalAI keeps its launcher, for its log


def test_clean_up_workers_keeps_the_launcher(make_job: Any, manager: PluginManager) -> None:
    c = cluster(make_job, manager)
    c.set(LAUNCHER, "Succeeded", 0)
    result = c.reconcile()
    assert result.status.phase == "Succeeded"
    assert deleted(result) == [WORKER_0, WORKER_1]
    assert LAUNCHER in c.objects
    # A finished job only cleans up; the launcher is never deleted.
    result = c.reconcile()
    assert result.status.phase == "Succeeded"
    assert result.delete == ()


def test_without_clean_up_workers_nothing_is_deleted(make_job: Any, manager: PluginManager) -> None:
    doc = example()
    doc["spec"]["runPolicy"] = {"cleanUpWorkers": False}
    c = cluster(make_job, manager, doc)
    c.set(LAUNCHER, "Succeeded", 0)
    result = c.reconcile()
    assert result.status.phase == "Succeeded"
    assert result.delete == ()


def test_debug_mode_never_finishes(make_job: Any, manager: PluginManager) -> None:
    doc = example()
    doc["spec"]["runMode"] = {"debug": {"enabled": True}}
    c = cluster(make_job, manager, doc)
    c.set(LAUNCHER, "Succeeded", 0)
    result = c.reconcile()
    assert result.status.phase == "Running"
    assert condition(result, "Running") is not None
    assert condition(result, "Running")[1] == "DebugMode"  # type: ignore[index]


def test_changed_worker_count_relaunches_the_launcher(
    make_job: Any, manager: PluginManager
) -> None:
    c = cluster(make_job, manager)
    doc = example()
    doc["spec"]["replicaSpecs"][1]["replicas"] = 3
    c.job = make_job(doc).model_copy(update={"status": c.job.status})
    result = c.reconcile()
    assert LAUNCHER in deleted(result)
    assert "colossalai-example-worker-2" in [o["metadata"]["name"] for o in result.create]
    hostfile = next(o for o in result.update if o["kind"] == "ConfigMap")
    assert hostfile["data"]["hostfile"].count("\n") == 3
