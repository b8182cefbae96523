"""Planner-level behaviour: the job follows worker-0; elastic scaling rewrites the hostfile and
relaunches worker-0. Observed pods are built by hand from what the first reconcile creates."""

from __future__ import annotations

import copy
from typing import Any

from t9kjobs.models import Job
from t9kjobs.planner import Observed, Plan, plan
from t9kjobs.render import render_job
from tests.unit.configuring import NO_GANGS
from tests.unit.conftest import NOW
from tests.unit.plugins.deepspeed.jobs import base_manifest, with_spec


def _pod_status(phase: str, exit_code: int | None) -> dict[str, Any]:
    status: dict[str, Any] = {"phase": phase}
    if exit_code is not None:
        status["containerStatuses"] = [
            {"name": "worker", "state": {"terminated": {"exitCode": exit_code}}}
        ]
    return status


def cluster(
    job: Job, manager: Any, states: dict[str, tuple[str, int | None]] | None = None
) -> list[dict[str, Any]]:
    """The job's children as the cluster holds them after the first reconcile, pods Running
    unless `states` says otherwise (pod name -> (phase, exit code))."""
    out = []
    for obj in render_job(job, manager):
        obj = copy.deepcopy(obj)
        obj["metadata"]["uid"] = f"uid-{obj['metadata']['name']}"
        obj["metadata"]["resourceVersion"] = "1"
        if obj["kind"] == "Pod":
            phase, code = (states or {}).get(obj["metadata"]["name"], ("Running", None))
            obj["status"] = _pod_status(phase, code)
        out.append(obj)
    return out


def run(job: Job, manager: Any, objects: list[dict[str, Any]]) -> Plan:
    return plan(job, Observed.of(objects, NO_GANGS), NOW, manager.hooks_for("DeepSpeedJob"))


def condition(result: Plan, type_: str) -> Any:
    return result.status.condition(type_)  # type: ignore[arg-type]


def test_all_running(make_job: Any, manager: Any) -> None:
    job = make_job(base_manifest())
    result = run(job, manager, cluster(job, manager))
    assert result.status.phase == "Running"
    assert (result.create, result.delete, result.update) == ((), (), ())


def test_worker0_success_is_the_job_success(make_job: Any, manager: Any) -> None:
    job = make_job(base_manifest())
    result = run(job, manager, cluster(job, manager, {"ds-worker-0": ("Succeeded", 0)}))
    assert result.status.phase == "Succeeded"
    completed = condition(result, "Completed")
    assert (completed.status, completed.reason) == ("True", "LauncherSucceeded")
    assert completed.message == "ds-worker-0 succeeded"


def test_worker0_failure_is_the_job_failure(make_job: Any, manager: Any) -> None:
    doc = base_manifest()
    doc["spec"]["worker"]["restartPolicy"] = "Never"
    job = make_job(doc)
    result = run(job, manager, cluster(job, manager, {"ds-worker-0": ("Failed", 137)}))
    assert result.status.phase == "Failed"
    failed = condition(result, "Failed")
    assert (failed.reason, failed.message) == (
        "LauncherFailed",
        "ds-worker-0 failed with exit code 137 (container worker)",
    )


def test_worker0_failure_is_retried_under_on_failure(make_job: Any, manager: Any) -> None:
    job = make_job(base_manifest())
    result = run(job, manager, cluster(job, manager, {"ds-worker-0": ("Failed", 1)}))
    assert result.status.phase != "Failed"
    assert [d.name for d in result.delete] == ["ds-worker-0"]
    assert result.status.backoff_count == 1


def test_worker0_failure_under_exit_code_policy(make_job: Any, manager: Any) -> None:
    doc = base_manifest()
    doc["spec"]["worker"]["restartPolicy"] = "ExitCode"
    job = make_job(doc)
    retried = run(job, manager, cluster(job, manager, {"ds-worker-0": ("Failed", 143)}))
    assert retried.status.phase != "Failed"
    final = run(job, manager, cluster(job, manager, {"ds-worker-0": ("Failed", 2)}))
    assert final.status.phase == "Failed"
    assert (
        condition(final, "Failed").message
        == "ds-worker-0 failed with exit code 2 (container worker)"
    )


def test_another_worker_failed_for_good_fails_the_job(make_job: Any, manager: Any) -> None:
    """Its sshd is gone, and the launcher's ssh session to it may never end by itself."""
    doc = base_manifest()
    doc["spec"]["worker"]["restartPolicy"] = "Never"
    job = make_job(doc)
    running = run(job, manager, cluster(job, manager)).status
    assert running.phase == "Running"
    job = job.model_copy(update={"status": running})
    result = run(job, manager, cluster(job, manager, {"ds-worker-1": ("Failed", 255)}))
    assert result.status.phase == "Failed"
    failed = condition(result, "Failed")
    assert (failed.reason, failed.message) == (
        "ReplicaFailed",
        "ds-worker-1 failed with exit code 255 (container worker)",
    )
    assert result.status.aggregate.failed == 1


def test_another_worker_being_restarted_does_not_fail_the_job(make_job: Any, manager: Any) -> None:
    job = make_job(base_manifest())  # OnFailure, backoffLimit 3
    result = run(job, manager, cluster(job, manager, {"ds-worker-1": ("Failed", 255)}))
    assert not result.status.finished
    assert "ds-worker-1 failed with exit code 255" in condition(result, "ReplicaFailure").message
    assert [d.name for d in result.delete] == ["ds-worker-1"]


def test_worker0_success_under_always_restarts(make_job: Any, manager: Any) -> None:
    doc = base_manifest()
    doc["spec"]["worker"]["restartPolicy"] = "Always"
    job = make_job(doc)
    result = run(job, manager, cluster(job, manager, {"ds-worker-0": ("Succeeded", 0)}))
    assert result.status.phase not in ("Succeeded", "Failed")
    assert [d.name for d in result.delete] == ["ds-worker-0"]


def test_debug_mode_never_finishes(make_job: Any, manager: Any) -> None:
    job = make_job(with_spec(runMode={"debug": {"enabled": True}}))
    result = run(job, manager, cluster(job, manager, {"ds-worker-0": ("Succeeded", 0)}))
    assert result.status.phase == "Running"
    assert condition(result, "Running").reason == "DebugMode"


# -- elastic ----------------------------------------------------------------------------------


def _elastic(expected: int) -> dict[str, Any]:
    return with_spec(
        elastic={"enabled": True, "minReplicas": 1, "maxReplicas": 4, "expectedReplicas": expected}
    )


def _hosts(configmap: dict[str, Any]) -> list[str]:
    return [line.split()[0] for line in configmap["data"]["hostfile"].splitlines()]


def test_elastic_count_is_clamped(make_job: Any, manager: Any) -> None:
    doc = with_spec(elastic={"enabled": True, "minReplicas": 1, "maxReplicas": 4})
    doc["spec"]["worker"]["replicas"] = 9
    names = [o["metadata"]["name"] for o in render_job(make_job(doc), manager)]
    assert [n for n in names if n.startswith("ds-worker-")] == [f"ds-worker-{i}" for i in range(4)]


def test_scaling_up_rewrites_the_hostfile_and_relaunches_worker0(
    make_job: Any, manager: Any
) -> None:
    before = make_job(_elastic(2))
    objects = cluster(before, manager)
    after = make_job(_elastic(3))
    result = run(after, manager, objects)
    assert [o["metadata"]["name"] for o in result.create] == ["ds-worker-2"]
    assert [(d.kind, d.name) for d in result.delete] == [("Pod", "ds-worker-0")]
    assert any(e.reason == "Relaunching" for e in result.events)
    (configmap,) = result.update
    assert configmap["metadata"]["name"] == "ds-hostfile"
    assert configmap["metadata"]["resourceVersion"] == "1"
    assert _hosts(configmap) == ["ds-worker-0.ds", "ds-worker-1.ds", "ds-worker-2.ds"]


def test_scaling_down_deletes_the_last_workers(make_job: Any, manager: Any) -> None:
    objects = cluster(make_job(_elastic(3)), manager)
    result = run(make_job(_elastic(1)), manager, objects)
    assert sorted(d.name for d in result.delete) == ["ds-worker-0", "ds-worker-1", "ds-worker-2"]
    (configmap,) = result.update
    assert _hosts(configmap) == ["ds-worker-0.ds"]


def test_relaunched_worker0_waits_for_the_new_worker_count(make_job: Any, manager: Any) -> None:
    objects = cluster(make_job(_elastic(2)), manager)
    without_worker0 = [o for o in objects if o["metadata"]["name"] != "ds-worker-0"]
    result = run(make_job(_elastic(3)), manager, without_worker0)
    created = {o["metadata"]["name"]: o for o in result.create}
    script = created["ds-worker-0"]["spec"]["containers"][0]["command"][2]
    assert "for host in ds-worker-0.ds ds-worker-1.ds ds-worker-2.ds; do" in script


def test_an_elastic_job_fails_only_below_its_minimum(make_job: Any, manager: Any) -> None:
    doc = with_spec(
        elastic={"enabled": True, "minReplicas": 2, "maxReplicas": 4, "expectedReplicas": 3}
    )
    doc["spec"]["worker"]["restartPolicy"] = "Never"
    job = make_job(doc)
    one = run(job, manager, cluster(job, manager, {"ds-worker-2": ("Failed", 1)}))
    assert not one.status.finished  # two workers are left: minReplicas
    lost = {"ds-worker-1": ("Failed", 1), "ds-worker-2": ("Failed", 1)}
    two = run(job, manager, cluster(job, manager, lost))
    assert two.status.phase == "Failed"
    assert condition(two, "Failed").reason == "ReplicaFailed"


def test_other_workers_keep_running_when_scaling(make_job: Any, manager: Any) -> None:
    objects = cluster(make_job(_elastic(2)), manager)
    result = run(make_job(_elastic(4)), manager, objects)
    assert "ds-worker-1" not in {d.name for d in result.delete}
