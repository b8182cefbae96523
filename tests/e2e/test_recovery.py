"""Recovery rules (`spec.recoveryPolicy`, docs/lifecycle.md "Recovery rules") on the real
control plane with KWOK, one job per rule and action, all at once (their waits overlap):

- exit 42 matched by a FailJob rule: the job Fails, reason RecoveryPolicy, nothing restarted;
- exit 3 matched by an Ignore rule: the replica is restarted, charged to the infrastructure
  budget (`infrastructureRestartCount` 1, `backoffCount` 0), and the job Succeeds although its
  restartPolicy is Never;
- a pod made Failed with a `DisruptionTarget` condition (patched on its status, as the
  eviction API and the taint manager write it): an Ignore rule on the condition restarts it,
  charged to the infrastructure budget;
- exit 3 of one of 4 workers matched by a RestartJob rule: every worker is stopped, none is
  created before all 4 are gone, then all 4 are created again with incarnation 1, together,
  so that they join the job's one PodGroup (kube-scheduler's gang, which the test cluster
  serves); the job Succeeds and its `restartHistory` says so.

Exit codes are simulated the way docs/cluster.md describes (`sim.t9kjobs.dev/exit-code` and
`run-seconds`, here patched onto one running pod so that its replacement, built from the
template, exits 0). KWOK drives only Pending and Running pods, so a status patched to Failed
stays as written.
"""

from __future__ import annotations

from tests.e2e.jobs import (
    INCARNATION,
    Kube,
    Obj,
    Recorder,
    condition,
    job,
    phase,
    replica,
    replicas,
    until,
)

IGNORE_3 = {"onExitCodes": {"operator": "In", "values": [3]}, "action": "Ignore"}
FAIL_42 = {
    "name": "bad-input",
    "onExitCodes": {"operator": "In", "values": [42]},
    "action": "FailJob",
}
IGNORE_DISRUPTION = {"onPodConditions": [{"type": "DisruptionTarget"}], "action": "Ignore"}
RESTART_JOB_3 = {
    "name": "gang",
    "onExitCodes": {"operator": "In", "values": [3]},
    "action": "RestartJob",
}
GANG = [f"rec-gang-worker-{i}" for i in range(4)]
NATIVE_GROUPS = "/apis/scheduling.k8s.io/v1alpha2"  # kube-scheduler's PodGroups


def _disrupt(kube: Kube, name: str) -> None:
    """Make a running pod Failed as an eviction leaves it: phase Failed and a True
    DisruptionTarget condition, written on its status subresource."""
    pod = kube.pods()[name]
    conditions = [
        c for c in pod["status"].get("conditions") or [] if c["type"] != "DisruptionTarget"
    ]
    conditions.append(
        {
            "type": "DisruptionTarget",
            "status": "True",
            "reason": "EvictionByEvictionAPI",
            "message": "Eviction API: evicting",
        }
    )
    kube.http.request(
        "PATCH",
        f"/api/v1/namespaces/{kube.ns}/pods/{name}/status",
        body={"status": {"phase": "Failed", "conditions": conditions}},
        content_type="application/merge-patch+json",
    )


def _replaced(kube: Kube, name: str, uid: str) -> Obj:
    def found() -> Obj | None:
        pod = kube.pods().get(name)
        return pod if pod is not None and pod["metadata"]["uid"] != uid else None

    return until(found, f"{name} replaced by a new pod")


def test_fail_job_ignore_and_disruption_rules_at_once(kube: Kube) -> None:
    failing = job(
        "PyTorchTrainingJob",
        "rec-fail",
        replica("worker", 1, "OnFailure", exit_code=42, seconds=1),
        recoveryPolicy={"rules": [FAIL_42]},
    )
    ignored = job(
        "GenericJob",
        "rec-ignore",
        replica("worker", 1, "Never", exit_code=0, seconds=30),
        recoveryPolicy={"rules": [IGNORE_3]},
    )
    disrupted = job(
        "GenericJob",
        "rec-disrupt",
        replica("worker", 1, "Never", exit_code=0, seconds=30),
        recoveryPolicy={"rules": [IGNORE_DISRUPTION]},
    )
    gang = job(
        "GenericJob",
        "rec-gang",
        # Its pods reserve some CPU: pods that reserve nothing are no gang (#50).
        replica(
            "worker",
            4,
            {"policy": "OnFailure", "limit": 1},
            exit_code=0,
            seconds=30,
            resources={"requests": {"cpu": "10m"}},
        ),
        recoveryPolicy={"rules": [RESTART_JOB_3]},
    )
    recorder = kube.record_pods()
    groups = Recorder(kube.http, f"{NATIVE_GROUPS}/namespaces/{kube.ns}/podgroups")
    for doc in (failing, ignored, disrupted, gang):
        kube.create(doc)

    kube.wait_phase(ignored, "Running")
    kube.wait_phase(disrupted, "Running")
    kube.wait_phase(gang, "Running")
    workers = ("rec-ignore-worker-0", "rec-disrupt-worker-0", *GANG)

    def both_running() -> dict[str, Obj] | None:
        pods = kube.pods()
        return pods if all(phase(pods.get(n) or {}) == "Running" for n in workers) else None

    pods = until(both_running, "every worker running")
    first_ignore = pods["rec-ignore-worker-0"]["metadata"]["uid"]
    first_disrupt = pods["rec-disrupt-worker-0"]["metadata"]["uid"]
    # Their template's exit 0 comes 30 s after they run: both fail long before.
    kube.fail("rec-ignore-worker-0", 3)
    _disrupt(kube, "rec-disrupt-worker-0")
    kube.fail("rec-gang-worker-2", 3)

    # exit 42 -> FailJob
    status = kube.wait_phase(failing, "Failed")
    failed = condition(status, "Failed")
    assert failed["reason"] == "RecoveryPolicy"
    assert failed["message"] == (
        "rec-fail-worker-0 failed with exit code 42 (container python); rule bad-input"
        " (spec.recoveryPolicy.rules[0]) fails the job"
    )
    assert status["backoffCount"] == 0 and status["reason"] == "RecoveryPolicy"

    # exit 3 -> Ignore: restarted under Never, charged to the infrastructure only
    second = _replaced(kube, "rec-ignore-worker-0", first_ignore)
    assert second["metadata"]["annotations"][INCARNATION] == "1"
    status = kube.wait_phase(ignored, "Succeeded")
    assert status["backoffCount"] == 0 and status["infrastructureRestartCount"] == 1
    worker = replicas(status)["rec-ignore-worker-0"]
    assert worker["restartCount"] == 1 and worker["countedRestarts"] == 0
    restarting = [e["message"] for e in kube.events(ignored) if e["reason"] == "Restarting"]
    assert restarting == [
        "rec-ignore-worker-0 failed with exit code 3; restart 1"
        " (rule spec.recoveryPolicy.rules[0], infrastructure budget)"
    ]

    # DisruptionTarget -> Ignore
    third = _replaced(kube, "rec-disrupt-worker-0", first_disrupt)
    assert third["metadata"]["annotations"][INCARNATION] == "1"
    status = kube.wait_phase(disrupted, "Succeeded")
    assert status["backoffCount"] == 0 and status["infrastructureRestartCount"] == 1

    # exit 3 of worker-2 -> RestartJob: all 4 stopped, then all 4 created with incarnation 1
    status = kube.wait_phase(gang, "Succeeded")
    recorder.stop()
    groups.stop()
    _all_stopped_before_any_created(recorder.snapshot())
    # One PodGroup all along, and every pod of the new incarnation is in it: created together.
    added = [o["metadata"]["name"] for kind, o in groups.snapshot() if kind == "ADDED"]
    assert added.count("rec-gang") == 1
    joined = {
        o["metadata"]["name"]: (o["spec"].get("schedulingGroup") or {}).get("podGroupName")
        for kind, o in recorder.snapshot()
        if kind == "ADDED" and o["metadata"]["annotations"].get(INCARNATION) == "1"
    }
    assert {n: g for n, g in joined.items() if n in GANG} == dict.fromkeys(GANG, "rec-gang")
    assert status["backoffCount"] == 1
    assert {n: r["restartCount"] for n, r in replicas(status).items()} == dict.fromkeys(GANG, 1)
    assert replicas(status)["rec-gang-worker-2"].get("countedRestarts", 1) == 1
    [entry] = status["restartHistory"]
    assert {k: entry.get(k) for k in ("replica", "action", "reason", "exitCode", "rule")} == {
        "replica": "rec-gang-worker-2",
        "action": "RestartJob",
        "reason": "Error",
        "exitCode": 3,
        "rule": "gang",
    }
    assert entry["budget"] == "User" and entry["recoveredTime"] >= entry["time"]
    assert status["lastRecoverySeconds"] >= 0
    [restarting] = [e["message"] for e in kube.events(gang) if e["reason"] == "RestartingJob"]
    assert restarting.startswith("rec-gang-worker-2 failed with exit code 3 (container python);")


def _all_stopped_before_any_created(changes: list[tuple[str, Obj]]) -> None:
    """In the watch of the namespace's pods: every rec-gang pod of incarnation 0 was deleted
    before the first of incarnation 1 was created, and each name has one pod of each."""
    lives: dict[str, list[str]] = {}
    last_gone = first_new = None
    for i, (kind, pod) in enumerate(changes):
        name = pod["metadata"]["name"]
        if name not in GANG:
            continue
        life = pod["metadata"]["annotations"][INCARNATION]
        if kind == "ADDED":
            lives.setdefault(name, []).append(life)
            if life == "1" and first_new is None:
                first_new = i
        elif kind == "DELETED" and life == "0":
            last_gone = i
    assert lives == {name: ["0", "1"] for name in GANG}
    assert last_gone is not None and first_new is not None and last_gone < first_new


def test_a_spent_infrastructure_budget_falls_through_to_the_restart_policy(kube: Kube) -> None:
    """infrastructureRestartLimit 1: the first exit 3 is ignored (charged to the
    infrastructure), the second falls through to `{OnFailure, limit: 1}` (charged to the
    user, with a Warning Event), the third finds the limit reached: the job Fails."""
    doc = job(
        "GenericJob",
        "rec-spent",
        replica("worker", 1, {"policy": "OnFailure", "limit": 1}, exit_code=3, seconds=1),
        recoveryPolicy={"infrastructureRestartLimit": 1, "rules": [IGNORE_3]},
    )
    kube.create(doc)
    status = kube.wait_phase(doc, "Failed")
    assert condition(status, "Failed")["reason"] == "ReplicaFailed"
    assert status["infrastructureRestartCount"] == 1 and status["backoffCount"] == 1
    worker = replicas(status)["rec-spent-worker-0"]
    assert worker["restartCount"] == 2 and worker["countedRestarts"] == 1
    spent = [e["message"] for e in kube.events(doc) if e["reason"] == "InfrastructureBudgetSpent"]
    assert spent == [
        "rec-spent-worker-0: rule spec.recoveryPolicy.rules[0] matched its failure, but the"
        " infrastructure budget is spent (1 restarts,"
        " spec.recoveryPolicy.infrastructureRestartLimit): the next rule or its restartPolicy"
        " decides, charged to the user"
    ]
