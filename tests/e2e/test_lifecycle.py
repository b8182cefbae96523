"""Run policies on the real control plane, one scenario per line of the table in
docs/lifecycle.md: restarts under each policy and budget, the deadline, cleanup, and the operator
killed while it restarts pods. Run modes, elastic scaling and gang scheduling are in
test_lifecycle_modes.py; what both share (jobs, the namespace, watches, the operator) in jobs.py.

Failures are injected the way docs/cluster.md describes: an exit code in a pod template (every
pod of the type exits), or patched onto one running pod. The tests talk to the API server
through the operator's own HTTP client (plain dicts; cheap enough to poll), and watch what
they must not miss (every pod created, every phase a job went through) instead of sampling.
"""

from __future__ import annotations

from datetime import datetime

import yaml

from t9kjobs.testing.harness.simulation import without_claims
from tests.e2e.jobs import (
    ACTIVE,
    INCARNATION,
    Kube,
    Obj,
    condition,
    finished_lives,
    job,
    phase,
    replica,
    replicas,
    until,
)
from tests.operators import Operators
from tests.repo import REPO


def _time(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


# -- restart policies ------------------------------------------------------------------------


def test_exit_code_retries_137_then_fails_the_job_on_1(kube: Kube) -> None:
    doc = job("PyTorchTrainingJob", "exitcode", replica("worker", 2, "ExitCode"))
    kube.create(doc)
    kube.wait_phase(doc, "Running")
    first = kube.running("exitcode-worker-0", "exitcode-worker-1")["exitcode-worker-1"]

    kube.fail("exitcode-worker-1", 137)

    def replaced() -> Obj | None:
        pod = kube.pods().get("exitcode-worker-1")
        new = pod is not None and pod["metadata"]["uid"] != first["metadata"]["uid"]
        return pod if new and pod is not None and phase(pod) == "Running" else None

    second = until(replaced, "worker-1 replaced by a new pod of the same name")
    assert second["metadata"]["annotations"][INCARNATION] == "1"
    status = kube.status(doc)
    assert status["phase"] == "Running"
    assert status["backoffCount"] == 1
    assert replicas(status)["exitcode-worker-1"]["restartCount"] == 1
    assert replicas(status)["exitcode-worker-0"]["restartCount"] == 0
    assert status["tasks"][0]["restartCount"] == 1
    restarting = until(
        lambda: [e for e in kube.events(doc) if e["reason"] == "Restarting"], "Restarting event"
    )
    assert [e["message"] for e in restarting] == [
        "exitcode-worker-1 failed with exit code 137; restart 1"
    ]

    kube.fail("exitcode-worker-1", 1)
    status = kube.wait_phase(doc, "Failed")
    failed = condition(status, "Failed")
    assert failed["reason"] == "ReplicaFailed"
    assert failed["message"] == "exitcode-worker-1 failed with exit code 1 (container python)"
    assert status["backoffCount"] == 1
    # cleanUpPolicy None (the default): every pod is kept as it is.
    pods = kube.pods()
    assert phase(pods["exitcode-worker-0"]) == "Running"
    assert phase(pods["exitcode-worker-1"]) == "Failed"


def test_on_failure_with_backoff_limit_2_fails_on_the_third_failure_and_cleans_up(
    kube: Kube,
) -> None:
    doc = job(
        "PyTorchTrainingJob",
        "backoff",
        replica("worker", 1, "OnFailure", exit_code=3),
        runPolicy={"backoffLimit": 2, "cleanUpPolicy": "All"},
    )
    pods = kube.record_pods()
    try:
        kube.create(doc)
        status = kube.wait_phase(doc, "Failed")
        until(lambda: not kube.pods(), "cleanUpPolicy All deleting every pod")
    finally:
        pods.stop()
    failed = condition(status, "Failed")
    assert failed["reason"] == "BackoffLimitExceeded"
    assert failed["message"] == (
        "backoff-worker-0 failed with exit code 3 (container python); restarts exhausted"
        " (spec.runPolicy.backoffLimit=2)"
    )
    assert status["backoffCount"] == 2
    assert status["tasks"][0]["restartCount"] == 2
    assert replicas(status)["backoff-worker-0"] == {
        **replicas(status)["backoff-worker-0"],
        "restartCount": 2,
        "phase": "Failed",  # how it ended, though the cleanup deleted its pod
    }
    # Three pods of one name, one after the other: the first and two restarts.
    assert finished_lives(pods) == {"backoff-worker-0": ["0", "1", "2"]}
    reasons = [e["reason"] for e in kube.events(doc)]
    assert reasons.count("Restarting") == 2 and "Failed" in reasons


# -- deadline and cleanup --------------------------------------------------------------------


def test_generic_job_replicas_that_keep_failing_end_it_by_their_limits_and_rules(
    kube: Kube,
) -> None:
    """GenericJob has no backoffLimit: each replica's `limit` (default 0, the string form's
    too) is what ends a failing replica, and then `failureRules` can match."""
    doc = job(
        "GenericJob",
        "gjfail",
        replica("a", 1, "OnFailure", exit_code=1),
        replica("b", 1, {"policy": "OnFailure", "limit": 2}, exit_code=1),
        replica("c", 1, "OnFailure"),
        failureRules=[{"a": [0], "b": [0]}],
    )
    with kube.record_pods() as pods:
        kube.create(doc)
        status = kube.wait_phase(doc, "Failed")
    failed = condition(status, "Failed")
    assert failed["reason"] == "FailureRuleMatched"
    assert failed["message"] == (
        "gjfail-a-0 failed with exit code 1 (container python); gjfail-b-0 failed with exit"
        " code 1 (container python) (failureRules[0] is fulfilled)"
    )
    counts = {name: r["restartCount"] for name, r in replicas(status).items()}
    assert counts == {"gjfail-a-0": 0, "gjfail-b-0": 2, "gjfail-c-0": 0}
    lives = finished_lives(pods)
    assert lives["gjfail-a-0"] == ["0"]  # `OnFailure` alone: limit 0, never restarted
    assert lives["gjfail-b-0"] == ["0", "1", "2"]
    assert phase(kube.pods()["gjfail-c-0"]) == "Running"  # cleanUpPolicy None keeps it


def test_deadline_of_5s_fails_the_job_mid_restart_and_deletes_its_running_pods(
    kube: Kube,
) -> None:
    doc = job(
        "PyTorchTrainingJob",
        "deadline",
        replica("master"),
        replica("worker", 1, "OnFailure", exit_code=137),
        runPolicy={"activeDeadlineSeconds": 5, "backoffLimit": 100},
    )
    pods = kube.record_pods()
    history = kube.record_job(doc)
    try:
        kube.create(doc)
        status = kube.wait_phase(doc, "Failed")
        until(
            lambda: not [p for p in kube.pods().values() if phase(p) in ACTIVE],
            "the running pods deleted",
        )
    finally:
        pods.stop()
        history.stop()
    failed = condition(status, "Failed")
    assert failed["reason"] == "DeadlineExceeded"
    assert failed["message"] == (
        "the job was active longer than spec.runPolicy.activeDeadlineSeconds (5s)"
    )
    assert (_time(status["completionTime"]) - _time(status["startTime"])).total_seconds() >= 5
    assert status["backoffCount"] >= 1  # the worker was being restarted all along
    assert "deadline-master-0" not in kube.pods()  # it was running: deleted despite policy None
    # No pod was created once the job had failed.
    failed_rv = min(
        int(o["metadata"]["resourceVersion"]) for _, o in history.snapshot() if phase(o) == "Failed"
    )
    assert all(int(p["metadata"]["resourceVersion"]) < failed_rv for p in pods.created())


def test_cleanup_unfinished_after_failure_keeps_the_finished_pods(kube: Kube) -> None:
    doc = job(
        "GenericJob",
        "unfinished",
        replica("a", 1, "Never", exit_code=2),
        replica("b", 2, {"policy": "OnFailure", "limit": 3}),
        cleanUpPolicy="Unfinished",
    )
    kube.create(doc)
    status = kube.wait_phase(doc, "Failed")
    assert condition(status, "Failed")["message"] == (
        "unfinished-a-0 failed with exit code 2 (container python)"
    )
    pods = until(
        lambda: (pods := kube.pods()) and set(pods) == {"unfinished-a-0"} and pods,
        "the running pods of b deleted",
    )
    assert phase(pods["unfinished-a-0"]) == "Failed"
    phases = {n: r["phase"] for n, r in replicas(status).items()}
    assert phases == {
        "unfinished-a-0": "Failed",
        "unfinished-b-0": "Deleted",
        "unfinished-b-1": "Deleted",
    }


def test_a_succeeded_worker_whose_pod_is_deleted_is_not_run_again(kube: Kube) -> None:
    """kube-controller-manager's pod GC deletes terminated pods of any owner once 12,500
    exist: a worker that finished before its master must not run its work a second time."""
    doc = job("PyTorchTrainingJob", "gone", replica("master"), replica("worker", 2, "OnFailure"))
    with kube.record_pods() as pods:
        kube.create(doc)
        first = kube.running("gone-master-0", "gone-worker-0", "gone-worker-1")
        uid = first["gone-worker-0"]["metadata"]["uid"]
        kube.fail("gone-worker-0", 0)
        until(
            lambda: replicas(kube.status(doc)).get("gone-worker-0", {}).get("phase") == "Succeeded",
            "worker-0's success in the status",
        )
        kube.http.request(
            "DELETE",
            f"/api/v1/namespaces/{kube.ns}/pods/gone-worker-0",
            body={"kind": "DeleteOptions", "apiVersion": "v1", "gracePeriodSeconds": 0},
        )
        until(lambda: "gone-worker-0" not in kube.pods(), "worker-0's pod deleted")
        # The watch reports the deletion before worker-1's end: the reconcile that writes
        # worker-1's end has seen worker-0 gone (before the fix, it created worker-0 again).
        kube.fail("gone-worker-1", 0)
        status = until(
            lambda: (
                (s := kube.status(doc))
                and replicas(s)["gone-worker-1"]["phase"] == "Succeeded"
                and s
            ),
            "worker-1's success in the status",
        )
        assert "gone-worker-0" not in kube.pods()
        worker = replicas(status)["gone-worker-0"]
        assert (worker["phase"], worker["uid"]) == ("Succeeded", uid)
        assert status["phase"] == "Running"
        kube.fail("gone-master-0", 0)
        kube.wait_phase(doc, "Succeeded")
    created = [
        p["metadata"]["uid"] for p in pods.created() if p["metadata"]["name"] == "gone-worker-0"
    ]
    assert created == [uid]


def test_colossalai_clean_up_workers_keeps_the_launcher(kube: Kube) -> None:
    path = REPO / "examples/colossalaijob/colossalai-example.yaml"
    doc = without_claims(yaml.safe_load(path.read_text()))
    assert doc["spec"]["runPolicy"] == {"cleanUpWorkers": True}
    doc["spec"]["replicaSpecs"][0]["restartPolicy"] = "Never"  # the launcher
    kube.create(doc)
    name = doc["metadata"]["name"]
    kube.running(f"{name}-launcher", f"{name}-worker-0", f"{name}-worker-1")
    kube.fail(f"{name}-launcher", 5)
    status = kube.wait_phase(doc, "Failed")
    assert condition(status, "Failed")["message"] == (
        f"{name}-launcher failed with exit code 5 (container launcher)"
    )
    pods = until(
        lambda: (pods := kube.pods()) and set(pods) == {f"{name}-launcher"} and pods,
        "the workers deleted",
    )
    assert phase(pods[f"{name}-launcher"]) == "Failed"


# -- crash safety ----------------------------------------------------------------------------


def _active(kube: Kube) -> bool:
    return any(phase(p) in ACTIVE for p in kube.pods().values())


def _finished(kube: Kube) -> set[str]:
    return {
        p["metadata"]["uid"] for p in kube.pods().values() if phase(p) in ("Succeeded", "Failed")
    }


def test_operator_killed_during_restarts_loses_and_doubles_nothing(
    kube: Kube, operators: Operators
) -> None:
    jobs = [
        # Runs out of its shared budget: exactly backoffLimit restarts, then Failed.
        job(
            "PyTorchTrainingJob",
            "budget",
            replica("worker", 1, "OnFailure", exit_code=1),
            runPolicy={"backoffLimit": 6},
        ),
        # Per-replica limits, failing only when both replicas failed for good.
        job(
            "GenericJob",
            "limits",
            replica("a", 2, {"policy": "OnFailure", "limit": 4}, exit_code=2),
            failureRules=[{"a": [0, 1]}],
        ),
        # Always: every success is restarted until the limit, then the job succeeds.
        job("GenericJob", "always", replica("a", 2, {"policy": "Always", "limit": 3}, exit_code=0)),
    ]
    expected = {
        "budget": ("Failed", {"budget-worker-0": 6}),
        "limits": ("Failed", {"limits-a-0": 4, "limits-a-1": 4}),
        "always": ("Succeeded", {"always-a-0": 3, "always-a-1": 3}),
    }
    pods = kube.record_pods()
    try:
        for doc in jobs:
            kube.create(doc)
        for restarts_seen in (3, 10):
            # Kill it in the middle of restarting, let pods finish while it is away, restart it.
            until(
                lambda n=restarts_seen: (
                    sum(kube.status(d).get("backoffCount", 0) for d in jobs) >= n
                ),
                f"{restarts_seen} restarts",
            )
            operators.kill()
            done_before = _finished(kube)
            until(
                lambda before=done_before: _finished(kube) - before or not _active(kube),
                "a pod finishing while no operator runs (unless none can)",
            )
            operators.start()
        finals = {
            d["metadata"]["name"]: kube.wait_phase(d, expected[d["metadata"]["name"]][0])
            for d in jobs
        }
    finally:
        pods.stop()

    lives = finished_lives(pods)
    for name, (_, counts) in expected.items():
        status = finals[name]
        assert {n: r["restartCount"] for n, r in replicas(status).items()} == counts, name
        assert status["backoffCount"] == sum(counts.values()), name
        for pod_name, restarts in counts.items():
            # Each incarnation ran to its end exactly once: no restart performed twice or
            # skipped, none counted twice.
            assert lives[pod_name] == [str(i) for i in range(restarts + 1)], (pod_name, lives)
    assert condition(finals["budget"], "Failed")["reason"] == "BackoffLimitExceeded"
    assert condition(finals["limits"], "Failed")["reason"] == "FailureRuleMatched"
    assert condition(finals["always"], "Completed")["reason"] == "AllSucceeded"


def test_a_restart_half_done_by_a_dead_operator_is_finished_once(
    kube: Kube, operators: Operators
) -> None:
    """The two windows a random kill rarely hits, made on purpose: the operator died after
    recording a restart in the status, before deleting the failed pod (restart 1), or after
    deleting it, before creating its replacement (restart 2)."""
    doc = job(
        "PyTorchTrainingJob",
        "half",
        replica("worker", 1, "OnFailure"),
        runPolicy={"backoffLimit": 5},
    )
    name = "half-worker-0"
    pods = kube.record_pods()
    try:
        kube.create(doc)
        kube.running(name)
        kube.wait_phase(doc, "Running")
        for restart in (1, 2):
            operators.kill()
            kube.fail(name, 1)
            failed = until(
                lambda: (p := kube.pods()[name]) and phase(p) == "Failed" and p, "the pod failed"
            )
            # What the dead operator wrote before it died: the restart, counted.
            current = kube.get(doc)
            status = current["status"]
            status["backoffCount"] = restart
            status["tasks"][0]["restartCount"] = restart
            status["tasks"][0]["replicas"][0]["restartCount"] = restart
            kube.http.request("PUT", kube.path(doc, "status"), body=current)
            if restart == 2:
                uid = failed["metadata"]["uid"]
                kube.http.request(
                    "DELETE",
                    f"/api/v1/namespaces/{kube.ns}/pods/{name}",
                    body={"preconditions": {"uid": uid}},
                )
                until(lambda: name not in kube.pods(), "the failed pod gone")
            operators.start()
            pod = kube.running(name)[name]
            assert pod["metadata"]["annotations"][INCARNATION] == str(restart)
            status = kube.status(doc)
            assert status["backoffCount"] == restart
            assert replicas(status)[name]["restartCount"] == restart
            assert status["phase"] == "Running"
    finally:
        pods.stop()
    assert finished_lives(pods) == {name: ["0", "1"]}  # and incarnation 2 runs
