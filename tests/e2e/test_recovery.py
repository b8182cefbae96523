"""Recovery rules (`spec.recoveryPolicy`, docs/lifecycle.md "Recovery rules") on the real
control plane with KWOK, one job per rule and action, all at once (their waits overlap):

- exit 42 matched by a FailJob rule: the job Fails, reason RecoveryPolicy, nothing restarted;
- exit 3 matched by an Ignore rule: the replica is restarted, charged to the infrastructure
  budget (`infrastructureRestartCount` 1, `backoffCount` 0), and the job Succeeds although its
  restartPolicy is Never;
- a pod made Failed with a `DisruptionTarget` condition (patched on its status, as the
  eviction API and the taint manager write it): an Ignore rule on the condition restarts it,
  charged to the infrastructure budget.

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
    condition,
    job,
    kube,
    operators,
    phase,
    replica,
    replicas,
    until,
)

__all__ = ["kube", "operators"]  # the fixtures, imported for this module

IGNORE_3 = {"onExitCodes": {"operator": "In", "values": [3]}, "action": "Ignore"}
FAIL_42 = {
    "name": "bad-input",
    "onExitCodes": {"operator": "In", "values": [42]},
    "action": "FailJob",
}
IGNORE_DISRUPTION = {"onPodConditions": [{"type": "DisruptionTarget"}], "action": "Ignore"}


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
    for doc in (failing, ignored, disrupted):
        kube.create(doc)

    kube.wait_phase(ignored, "Running")
    kube.wait_phase(disrupted, "Running")
    workers = ("rec-ignore-worker-0", "rec-disrupt-worker-0")

    def both_running() -> dict[str, Obj] | None:
        pods = kube.pods()
        return pods if all(phase(pods.get(n) or {}) == "Running" for n in workers) else None

    pods = until(both_running, "both workers running")
    first_ignore = pods["rec-ignore-worker-0"]["metadata"]["uid"]
    first_disrupt = pods["rec-disrupt-worker-0"]["metadata"]["uid"]
    # Their template's exit 0 comes 30 s after they run: both fail long before.
    kube.fail("rec-ignore-worker-0", 3)
    _disrupt(kube, "rec-disrupt-worker-0")

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
