"""Success, failure and restarts of a PyTorchTrainingJob, through the planner."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from t9kjobs.kinds import ReplicaState
from t9kjobs.manager import PluginManager
from t9kjobs.models import Job
from t9kjobs.planner import Observed, plan
from t9kjobs.plugins.pytorch.spec import PyTorchTrainingJobStatus
from t9kjobs.testing.fixtures import pod_in_phase, reconcile_with
from tests.unit.plugins.pytorch.helpers import NOW, Obj, example, manifest, replica

MakeJob = Callable[[Any], Job]


def _job(make_job: MakeJob, restart: str = "Never") -> Job:
    return make_job(
        manifest(
            replica("master", 1, restartPolicy=restart), replica("worker", 2, restartPolicy=restart)
        )
    )


def test_master_success_succeeds_the_job(manager: PluginManager, make_job: MakeJob) -> None:
    result = reconcile_with(_job(make_job), {"job-master-0": ("Succeeded", 0)}, manager=manager)
    assert result.status.phase == "Succeeded"
    completed = result.status.condition("Completed")
    assert completed is not None and completed.status == "True"
    assert completed.reason == "MasterSucceeded"
    assert completed.message == "job-master-0 succeeded"


def test_workers_succeeding_do_not_finish_the_job(
    manager: PluginManager, make_job: MakeJob
) -> None:
    done = ("Succeeded", 0)
    result = reconcile_with(
        _job(make_job), {"job-worker-0": done, "job-worker-1": done}, manager=manager
    )
    assert result.status.phase == "Running"


def test_worker_failing_for_good_fails_the_job(manager: PluginManager, make_job: MakeJob) -> None:
    result = reconcile_with(_job(make_job), {"job-worker-1": ("Failed", 137)}, manager=manager)
    assert result.status.phase == "Failed"
    failed = result.status.condition("Failed")
    assert failed is not None and failed.reason == "ReplicaFailed"
    assert failed.message == "job-worker-1 failed with exit code 137 (container pytorch)"


def test_non_retryable_exit_code_fails_the_job(manager: PluginManager, make_job: MakeJob) -> None:
    result = reconcile_with(
        _job(make_job, "ExitCode"), {"job-worker-0": ("Failed", 1)}, manager=manager
    )
    assert result.status.phase == "Failed"
    failed = result.status.condition("Failed")
    assert (
        failed is not None
        and failed.message == "job-worker-0 failed with exit code 1 (container pytorch)"
    )


def test_restarting_worker_does_not_fail_the_job(manager: PluginManager, make_job: MakeJob) -> None:
    result = reconcile_with(
        _job(make_job, "ExitCode"), {"job-worker-0": ("Failed", 137)}, manager=manager
    )
    assert result.status.phase == "Running"
    assert result.status.backoff_count == 1
    assert [r.name for r in result.delete] == ["job-worker-0"]  # replaced by the next reconcile
    failing = result.status.condition("ReplicaFailure")
    assert failing is not None and failing.status == "True"
    assert failing.message == "job-worker-0 failed with exit code 137 (container pytorch)"


def test_master_failing_with_restarts_left_restarts(
    manager: PluginManager, make_job: MakeJob
) -> None:
    result = reconcile_with(
        _job(make_job, "OnFailure"), {"job-master-0": ("Failed", 2)}, manager=manager
    )
    assert result.status.phase == "Running"
    assert [r.name for r in result.delete] == ["job-master-0"]


def test_without_master_type_the_first_pod_decides(
    manager: PluginManager, make_job: MakeJob
) -> None:
    job = make_job(manifest(replica("ps", 1), replica("worker", 2)))
    hooks = manager.hooks_for(job.kind)
    worker_done = ReplicaState("worker", 0, "job-worker-0", "Succeeded", 0, True)
    ps_done = ReplicaState("ps", 0, "job-ps-0", "Succeeded", 0, True)
    assert hooks.compute_status(job, [worker_done]) is None
    verdict = hooks.compute_status(job, [ps_done, worker_done])
    assert verdict is not None and verdict.outcome == "Succeeded"


def test_master_to_be_restarted_has_not_finished(manager: PluginManager, make_job: MakeJob) -> None:
    job = _job(make_job, "Always")
    restarting = ReplicaState("master", 0, "job-master-0", "Succeeded", 0, final=False)
    assert manager.hooks_for(job.kind).compute_status(job, [restarting]) is None


def test_master_success_wins_over_a_straggler_failure(
    manager: PluginManager, make_job: MakeJob
) -> None:
    job = _job(make_job)
    states = [
        ReplicaState("master", 0, "job-master-0", "Succeeded", 0, True),
        ReplicaState("worker", 0, "job-worker-0", "Failed", 1, True),
    ]
    verdict = manager.hooks_for(job.kind).compute_status(job, states)
    assert verdict is not None and verdict.outcome == "Succeeded"


def test_missing_tensorboard_crd_degrades_but_trains(
    manager: PluginManager, make_job: MakeJob
) -> None:
    job = make_job(example("master-worker"))
    result = plan(
        job, Observed(absent_kinds=frozenset({"TensorBoard"})), NOW, manager.hooks_for(job.kind)
    )
    kinds = [o["kind"] for o in result.create]
    assert "TensorBoard" not in kinds
    assert kinds.count("Pod") == 4 and kinds.count("Service") == 1
    degraded = result.status.condition("Degraded")
    assert degraded is not None and degraded.status == "True"
    assert "TensorBoard" in (degraded.message or "")


def test_tensorboard_is_owned_by_the_job(manager: PluginManager, make_job: MakeJob) -> None:
    job = make_job(example("master-worker"))
    result = plan(job, Observed(), NOW, manager.hooks_for(job.kind))
    (board,) = [o for o in result.create if o["kind"] == "TensorBoard"]
    assert board["apiVersion"] == "tensorstack.dev/v1beta1"
    assert board["metadata"]["name"] == "torch-mnist-trainingjob"
    owner = board["metadata"]["ownerReferences"][0]
    assert (owner["kind"], owner["name"], owner["controller"]) == (
        "PyTorchTrainingJob",
        "torch-mnist-trainingjob",
        True,
    )
    assert board["spec"] == example("master-worker")["spec"]["tensorboardSpec"]


def test_removing_the_tensorboard_spec_deletes_it(
    manager: PluginManager, make_job: MakeJob
) -> None:
    doc = example("master-worker")
    first = plan(make_job(doc), Observed(), NOW, manager.hooks_for("PyTorchTrainingJob"))
    children = [pod_in_phase(o, "Running") if o["kind"] == "Pod" else o for o in first.create]
    del doc["spec"]["tensorboardSpec"]
    job = make_job(doc)
    result = plan(job, Observed.of(children), NOW, manager.hooks_for(job.kind))
    assert [(r.kind, r.name) for r in result.delete] == [("TensorBoard", "torch-mnist-trainingjob")]


def test_status_reports_the_tensorboard(manager: PluginManager, make_job: MakeJob) -> None:
    doc = example("master-worker")
    doc["status"] = {
        "phase": "Running",
        "tensorboard": {
            "action": "NOP",
            "dependent": {"apiVersion": "tensorstack.dev/v1beta1", "kind": "TensorBoard"},
            "note": "TensorBoard [torch-mnist-trainingjob] is ready",
            "ready": True,
            "reason": "DependentReady",
            "type": "Normal",
        },
    }
    job = make_job(doc)
    assert isinstance(job.status, PyTorchTrainingJobStatus)
    assert job.status.tensorboard is not None and job.status.tensorboard.ready
    result = plan(job, Observed(), NOW, manager.hooks_for(job.kind))
    assert isinstance(result.status, PyTorchTrainingJobStatus)
    # No TensorBoard in the cluster (yet): reported as such, not kept as it was.
    assert result.status.tensorboard is not None
    assert (result.status.tensorboard.ready, result.status.tensorboard.reason) == (
        False,
        "NotFound",
    )
    name = doc["metadata"]["name"]
    tensorboard = {
        "apiVersion": "tensorstack.dev/v1beta1",
        "kind": "TensorBoard",
        "metadata": {"name": name, "uid": "tb-uid"},
        "status": {"conditions": [{"type": "Ready", "status": "True"}]},
    }
    result = plan(job, Observed.of([tensorboard]), NOW, manager.hooks_for(job.kind))
    assert isinstance(result.status, PyTorchTrainingJobStatus)
    assert result.status.tensorboard is not None and result.status.tensorboard.ready
    assert result.status.tensorboard.dependent == {
        "apiVersion": "tensorstack.dev/v1beta1",
        "kind": "TensorBoard",
        "name": name,
        "namespace": job.namespace,
        "uid": "tb-uid",
    }


def _board_status(manager: PluginManager, job: Job, *children: Obj) -> Any:
    result = plan(job, Observed.of(list(children)), NOW, manager.hooks_for(job.kind))
    assert isinstance(result.status, PyTorchTrainingJobStatus)
    board = result.status.tensorboard
    return None if board is None else board.model_dump(exclude={"dependent"})


def _board(*conditions: Obj) -> Obj:
    return {
        "apiVersion": "tensorstack.dev/v1beta1",
        "kind": "TensorBoard",
        "metadata": {"name": "torch-mnist-trainingjob", "uid": "tb-uid"},
        "status": {"conditions": list(conditions)},
    }


def test_the_tensorboard_status_word_for_word(manager: PluginManager, make_job: MakeJob) -> None:
    job = make_job(example("master-worker"))
    assert _board_status(manager, job) == {
        "name": "tensorboard",
        "ready": False,
        "reason": "NotFound",
        "action": "Create",
        "note": "the TensorBoard is created when the cluster serves tensorstack.dev/v1beta1",
        "type": "Warning",
    }
    ready = {"type": "Ready", "status": "True"}
    assert _board_status(manager, job, _board(ready)) == {
        "name": "tensorboard",
        "ready": True,
        "reason": "Ready",
        "action": "None",
        "note": None,
        "type": "Normal",
    }
    for conditions in (
        [{"type": "Ready", "status": "False"}],
        [{"type": "Synced", "status": "True"}],
    ):
        found = _board_status(manager, job, _board(*conditions))
        assert (found["ready"], found["reason"]) == (False, "NotReady")
    assert _board_status(manager, make_job(manifest(replica("worker", 1)))) is None


def test_every_replica_failed_for_good_is_named(manager: PluginManager, make_job: MakeJob) -> None:
    job = _job(make_job)
    states = [
        ReplicaState("master", 0, "job-master-0", "Running"),
        ReplicaState("worker", 0, "job-worker-0", "Failed", 1, True),
        ReplicaState("worker", 1, "job-worker-1", "Failed", 2, True),
    ]
    verdict = manager.hooks_for(job.kind).compute_status(job, states)
    assert verdict is not None
    assert (verdict.reason, verdict.message) == (
        "ReplicaFailed",
        "job-worker-0 failed with exit code 1; job-worker-1 failed with exit code 2",
    )
