"""Jobs that fail for real: a rank that raises, and a deadline shorter than the training.

A failure must say which pod, which container and which exit code, post a Warning Event, and
leave exactly what `cleanUpPolicy` keeps; a deadline must stop everything still running.
"""

from __future__ import annotations

from typing import Any

from tests.cluster import Cluster
from tests.operators import OperatorProcess
from tests.real.jobs import apply, container, events_of, job_logs, mlp, pods_of, wait_finished

KIND = "PyTorchTrainingJob"


def ptj(name: str, args: list[str], run_policy: dict[str, Any]) -> dict[str, Any]:
    """A master and two workers, one process each, without torchrun."""

    def replica(type_: str, replicas: int) -> dict[str, Any]:
        return {
            "type": type_,
            "replicas": replicas,
            "restartPolicy": "Never",
            "template": {
                "spec": {
                    "terminationGracePeriodSeconds": 5,
                    "containers": [container("pytorch", command=mlp(*args))],
                }
            },
        }

    return {
        "apiVersion": "batch.tensorstack.dev/v1beta1",
        "kind": KIND,
        "metadata": {"name": name},
        "spec": {
            "runPolicy": run_policy,
            "replicaSpecs": [replica("master", 1), replica("worker", 2)],
        },
    }


def test_a_rank_that_raises_fails_the_job_naming_pod_container_and_exit_code(
    cluster: Cluster, namespace: str, operator: OperatorProcess
) -> None:
    # rank 1 is worker-0 (the master is rank 0); it raises after 5 steps
    job = ptj(
        "raise-mlp",
        ["--steps=300", "--sleep=0.05", "--fail-rank=1", "--fail-after=5"],
        {"cleanUpPolicy": "Unfinished"},
    )
    apply(cluster, namespace, job)
    final = wait_finished(cluster, namespace, KIND, "raise-mlp")
    status = final["status"]
    assert status["phase"] == "Failed", status
    failed = next(c for c in status["conditions"] if c["type"] == "Failed")
    assert failed["status"] == "True" and failed["reason"] == "ReplicaFailed"
    # the rank that raised is named; ranks that died of it afterwards may be named too
    assert "raise-mlp-worker-0 failed with exit code 1 (container pytorch)" in failed["message"]
    warnings = [e for e in events_of(cluster, namespace, "raise-mlp") if e["type"] == "Warning"]
    assert any(
        e["reason"] == "Failed" and "raise-mlp-worker-0 failed with exit code 1" in e["message"]
        for e in warnings
    ), warnings

    # Unfinished: the pods still running when the job failed are deleted, the finished ones
    # kept, the one that raised among them, with its traceback.
    def settled() -> dict[str, Any] | None:
        pods = pods_of(cluster, namespace, "raise-mlp")
        deleting = [p for p in pods.values() if p["metadata"].get("deletionTimestamp")]
        return None if deleting else pods

    pods = cluster.poll(settled, timeout=120, interval=2, message="cleanup of running pods")
    assert "raise-mlp-worker-0" in pods
    assert {p["status"]["phase"] for p in pods.values()} <= {"Succeeded", "Failed"}, pods
    log = job_logs(cluster, namespace, "raise-mlp")["raise-mlp-worker-0"]
    assert "RuntimeError: rank 1 fails on purpose at step 6 (--fail-rank)" in log, log


def test_a_deadline_shorter_than_the_training_fails_the_job_and_stops_every_pod(
    cluster: Cluster, namespace: str, operator: OperatorProcess
) -> None:
    # about 100 s of training against a 15 s deadline; None keeps finished pods, so only the
    # deadline deletes
    job = ptj(
        "late-mlp",
        ["--steps=1000", "--sleep=0.1"],
        {"activeDeadlineSeconds": 15, "cleanUpPolicy": "None"},
    )
    apply(cluster, namespace, job)
    final = wait_finished(cluster, namespace, KIND, "late-mlp", timeout=300)
    status = final["status"]
    assert status["phase"] == "Failed", status
    failed = next(c for c in status["conditions"] if c["type"] == "Failed")
    assert failed["reason"] == "DeadlineExceeded"
    assert "activeDeadlineSeconds (15s)" in failed["message"]
    events = events_of(cluster, namespace, "late-mlp")
    assert any(e["reason"] == "Failed" and e["type"] == "Warning" for e in events), events
    cluster.poll(
        lambda: not pods_of(cluster, namespace, "late-mlp"),
        timeout=120,
        interval=2,
        message="every late-mlp pod stopped and gone",
    )
