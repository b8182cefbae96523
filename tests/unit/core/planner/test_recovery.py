"""Recovery rules (`spec.recoveryPolicy`, docs/lifecycle.md "Recovery rules") on the engine's
minimal test kind: each failure reason x action x budget, the fall-through once the
infrastructure budget is spent, and the crash window (status written, pod not deleted yet)."""

from __future__ import annotations

from typing import Any

import pytest

from t9kjobs.objects import ANNOTATION_INCARNATION
from t9kjobs.vocabulary import Obj
from tests.unit.configuring import NO_GANGS
from tests.unit.core.planner.sim import Sim
from tests.unit.core.planner.tinyjob import tiny_job

W0 = "tiny-worker-0"


def _job(rules: list[dict[str, Any]] | None, limit: int = 20, **kw: Any) -> Obj:
    policy: dict[str, Any] = {"infrastructureRestartLimit": limit}
    if rules is not None:
        policy["rules"] = rules
    return tiny_job(replicas=1, recoveryPolicy=policy, **kw)


def _fail(sim: Sim, how: str, code: int = 1) -> None:
    """Fail worker-0 the way `how` says: a plain exit, an OOM kill, or a disruption."""
    sim.set(W0, "Failed", code)
    status = sim.pod(W0)["status"]
    if how == "OOMKilled":
        status["containerStatuses"][0]["state"]["terminated"]["reason"] = "OOMKilled"
    elif how == "Evicted":
        status["reason"] = "Evicted"
        status["message"] = "The node was low on resource: memory."
    elif how in ("EvictionByEvictionAPI", "PreemptionByScheduler", "DeletionByTaintManager"):
        status["conditions"] = [{"type": "DisruptionTarget", "status": "True", "reason": how}]


def _started(manifest: Obj) -> Sim:
    sim = Sim(manifest)
    sim.step()
    sim.set(W0, "Running")
    sim.step()
    return sim


# (how it fails, code, rules, restartPolicy) -> (phase, backoffCount, infra, failed reason)
CASES = [
    # no rule matches: the restartPolicy decides, charged to the user, as without a policy
    ("exit", 1, [], "OnFailure", "Running", 1, None, None),
    ("exit", 1, [], "Never", "Failed", 0, None, "ReplicaFailed"),
    # exit-code rules, each action
    ("exit", 42, [{"onExitCodes": {"operator": "In", "values": [42]}, "action": "FailJob"}],
     "OnFailure", "Failed", 0, None, "RecoveryPolicy"),
    ("exit", 3, [{"onExitCodes": {"operator": "In", "values": [3]}, "action": "Ignore"}],
     "Never", "Running", 0, 1, None),
    ("exit", 3, [{"onExitCodes": {"operator": "In", "values": [3]}, "action": "RestartReplica"}],
     "Never", "Running", 1, None, None),
    ("exit", 3, [{"onExitCodes": {"operator": "In", "values": [3]}, "action": "RestartReplica",
                  "budget": "Infrastructure"}], "Never", "Running", 0, 1, None),
    ("exit", 3, [{"onExitCodes": {"operator": "NotIn", "values": [3]}, "action": "FailJob"}],
     "OnFailure", "Running", 1, None, None),
    # OOMKilled: a user failure unless a rule says otherwise
    ("OOMKilled", 137, [], "OnFailure", "Running", 1, None, None),
    ("OOMKilled", 137, [{"onReasons": ["OOMKilled"], "action": "FailJob"}], "OnFailure",
     "Failed", 0, None, "RecoveryPolicy"),
    # disruptions: the built-in rule charges the infrastructure, even under Never
    ("Evicted", 137, [], "Never", "Running", 0, 1, None),
    ("EvictionByEvictionAPI", 143, [], "OnFailure", "Running", 0, 1, None),
    ("PreemptionByScheduler", 137, [], "OnFailure", "Running", 0, 1, None),
    ("DeletionByTaintManager", 137, [], "OnFailure", "Running", 0, 1, None),
    # a user rule before the built-in one
    ("Evicted", 137, [{"onReasons": ["Evicted"], "action": "FailJob"}], "OnFailure",
     "Failed", 0, None, "RecoveryPolicy"),
    ("EvictionByEvictionAPI", 143, [{"onPodConditions": [{"type": "DisruptionTarget",
     "reasons": ["EvictionByEvictionAPI"]}], "action": "RestartReplica"}], "OnFailure",
     "Running", 1, None, None),
    # replicaTypes: a rule for another type does not match
    ("exit", 42, [{"onExitCodes": {"operator": "In", "values": [42]}, "action": "FailJob",
                   "replicaTypes": ["launcher"]}], "OnFailure", "Running", 1, None, None),
]  # fmt: skip


@pytest.mark.parametrize(
    ("how", "code", "rules", "restart", "phase", "backoff", "infra", "reason"), CASES
)
def test_reason_action_budget(
    how: str,
    code: int,
    rules: list[dict[str, Any]],
    restart: str,
    phase: str,
    backoff: int,
    infra: int | None,
    reason: str | None,
) -> None:
    sim = _started(_job(rules, restart=restart))
    _fail(sim, how, code)
    p = sim.step()
    assert p.status.phase == phase
    assert p.status.backoff_count == backoff
    assert p.status.infrastructure_restart_count == infra
    failed = p.status.condition("Failed")
    assert (failed.reason if failed is not None else None) == reason
    restarted = phase == "Running"
    assert [d.name for d in p.delete] == ([W0] if restarted else [])
    if restarted:
        p = sim.step()
        assert sim.pod(W0)["metadata"]["annotations"][ANNOTATION_INCARNATION] == "1"
        replica = sim.status["tasks"][0]["replicas"][0]
        assert replica["restartCount"] == 1
        assert replica.get("countedRestarts", 1) == backoff


def test_fail_job_names_the_rule_and_what_matched() -> None:
    rules = [
        {"name": "other", "onReasons": ["Evicted"], "action": "FailJob"},
        {
            "name": "bad-input",
            "onExitCodes": {"operator": "In", "values": [42]},
            "action": "FailJob",
        },
    ]
    sim = _started(_job(rules))
    _fail(sim, "exit", 42)
    failed = sim.step().status.condition("Failed")
    assert failed is not None and failed.reason == "RecoveryPolicy"
    assert failed.message == (
        "tiny-worker-0 failed with exit code 42 (container main); rule bad-input"
        " (spec.recoveryPolicy.rules[1]) fails the job"
    )
    assert sim.status["reason"] == "RecoveryPolicy"


def test_fail_job_on_a_disruption_says_who_disrupted() -> None:
    sim = _started(_job([{"onPodConditions": [{"type": "DisruptionTarget"}], "action": "FailJob"}]))
    _fail(sim, "PreemptionByScheduler", 137)
    failed = sim.step().status.condition("Failed")
    assert failed is not None and failed.message == (
        "tiny-worker-0 failed: Preempted (DisruptionTarget PreemptionByScheduler);"
        " rule spec.recoveryPolicy.rules[0] fails the job"
    )


def test_ignore_is_bounded_by_the_infrastructure_budget_then_falls_to_the_policy() -> None:
    ignore = [{"onExitCodes": {"operator": "In", "values": [3]}, "action": "Ignore"}]
    sim = _started(_job(ignore, limit=2, restart="OnFailure"))
    for n in (1, 2):
        _fail(sim, "exit", 3)
        p = sim.step()
        assert p.status.infrastructure_restart_count == n and p.status.backoff_count == 0
        sim.step()
    _fail(sim, "exit", 3)  # the budget is spent: OnFailure, charged to the user
    p = sim.step()
    assert p.status.infrastructure_restart_count == 2 and p.status.backoff_count == 1
    said = [e for e in p.events if e.reason == "InfrastructureBudgetSpent"]
    assert [e.message for e in said] == [
        "tiny-worker-0: rule spec.recoveryPolicy.rules[0] matched its failure, but the"
        " infrastructure budget is spent (2 restarts,"
        " spec.recoveryPolicy.infrastructureRestartLimit): the next rule or its restartPolicy"
        " decides, charged to the user"
    ]
    sim.step()
    assert sim.status["tasks"][0]["replicas"][0]["restartCount"] == 3
    assert sim.status["tasks"][0]["replicas"][0]["countedRestarts"] == 1


def test_spent_infrastructure_budget_under_never_fails_as_today() -> None:
    sim = _started(_job([], limit=0, restart="Never"))
    _fail(sim, "Evicted", 137)
    p = sim.step()
    assert p.status.phase == "Failed" and p.status.infrastructure_restart_count is None


def test_user_budget_spent_fails_backoff_limit_exceeded_after_infrastructure_restarts() -> None:
    sim = _started(_job([], restart="OnFailure", run_policy={"backoffLimit": 1}))
    _fail(sim, "Evicted", 137)
    sim.step()
    sim.step()
    _fail(sim, "exit", 1)  # charged to the user: 1 of 1
    sim.step()
    sim.step()
    _fail(sim, "exit", 1)
    p = sim.step()
    failed = p.status.condition("Failed")
    assert failed is not None and failed.reason == "BackoffLimitExceeded"
    assert p.status.backoff_count == 1 and p.status.infrastructure_restart_count == 1


def test_own_limit_compares_counted_restarts_only() -> None:
    manifest = _job([], restart={"policy": "OnFailure", "limit": 1})
    sim = _started(manifest)
    for how in ("Evicted", "Evicted", "exit"):
        _fail(sim, how, 137 if how == "Evicted" else 1)
        assert sim.step().delete
        sim.step()
    _fail(sim, "exit", 1)  # its limit of 1 user restart is reached
    p = sim.step()
    assert p.status.phase == "Failed" and not p.delete


@pytest.mark.parametrize("restart", ["Never", "OnFailure"])
def test_crash_window_counts_nothing_twice(restart: str) -> None:
    """The status with the charge is written, the operator dies before deleting the pod: the
    next reconcile deletes it (its incarnation is below the count) and charges nothing."""
    ignore = [{"onExitCodes": {"operator": "In", "values": [3]}, "action": "Ignore"}]
    sim = _started(_job(ignore, restart=restart))
    _fail(sim, "exit", 3)
    p = sim.plan()
    assert p.status.infrastructure_restart_count == 1
    sim.manifest["status"] = __import__("t9kjobs.models", fromlist=["dump"]).dump(p.status)
    # ... crash: the deletion is never applied; the pod is still there, Failed
    again = sim.step()
    assert again.status.infrastructure_restart_count == 1 and again.status.backoff_count == 0
    assert [d.name for d in again.delete] == [W0]
    sim.step()
    assert sim.pod(W0)["metadata"]["annotations"][ANNOTATION_INCARNATION] == "1"
    assert sim.status["tasks"][0]["replicas"][0]["restartCount"] == 1
    assert sim.status["infrastructureRestartCount"] == 1 and sim.status["backoffCount"] == 0


def test_crash_window_after_the_delete_recreates_a_never_replica() -> None:
    """Under Never, the replica a rule restarts is recorded Deleted: once its pod is gone it
    is created again, never kept as ended for good (`remembered`)."""
    sim = _started(_job([{"onExitCodes": {"operator": "In", "values": [3]}, "action": "Ignore"}],
                        restart="Never"))  # fmt: skip
    _fail(sim, "exit", 3)
    p = sim.step()  # status written, pod deleted
    assert sim.status["tasks"][0]["replicas"][0]["phase"] == "Deleted"
    p = sim.step()
    assert [o["metadata"]["name"] for o in p.create] == [W0]
    assert p.status.infrastructure_restart_count == 1


def test_the_incarnation_beyond_the_record_is_charged_to_the_user() -> None:
    sim = _started(_job([]))
    pod = sim.pod(W0)
    pod["metadata"]["annotations"][ANNOTATION_INCARNATION] = "2"
    p = sim.step()
    assert p.status.backoff_count == 2
    assert p.status.tasks[0].replicas[0].counted_restarts is None  # = restartCount (2)


def test_without_a_policy_a_disruption_is_charged_to_the_user_as_today() -> None:
    sim = _started(tiny_job(replicas=1, restart="OnFailure"))
    _fail(sim, "Evicted", 137)
    p = sim.step()
    assert p.status.backoff_count == 1 and p.status.infrastructure_restart_count is None
    assert "infrastructureRestartCount" not in sim.status


def test_a_replica_remembered_from_the_status_is_not_judged_again() -> None:
    """A Never replica that ended for good (evicted, the infrastructure budget spent) and whose
    pod is gone since is planned from the status, which keeps no condition: an Error rule
    must not restart it now."""
    from t9kjobs.loading import parse_job
    from t9kjobs.models import ContainerStatus, ReplicaStatus, recovery_of
    from t9kjobs.planner.desired import desired_pods
    from t9kjobs.planner.replicas import REMEMBERED, assess, remembered

    manifest = _job([{"onReasons": ["Error"], "action": "RestartReplica"}], limit=0)
    manifest["spec"]["replicaSpecs"][0]["restartPolicy"] = "Never"
    sim = Sim(manifest)
    job = parse_job(manifest, sim.manager)
    life = job.spec.lifecycle()
    pods = desired_pods(job, sim.manager.hooks_for(job.kind), life, False, frozenset())
    ended = ReplicaStatus(
        name=W0,
        uid="u0",
        phase="Failed",
        containers=[ContainerStatus(name="main", state="terminated", exit_code=137)],
    )
    kept = remembered(pods, {}, [ended])
    assert kept[W0][REMEMBERED] is True
    found = assess(pods, kept, {W0: 0}, 0, life, recovery=recovery_of(job.spec))
    assert found.restart == [] and found.states[0].final


def test_generic_job_budget_spent_as_the_e2e_tier_runs_it() -> None:
    """tests/e2e/test_recovery.py's rec-spent job, on the GenericJob plugin."""
    from t9kjobs.manager import load_plugins

    manifest = {
        "apiVersion": "batch.tensorstack.dev/v1beta1",
        "kind": "GenericJob",
        "metadata": {"name": "rec-spent", "namespace": "ns", "uid": "u"},
        "spec": {
            "recoveryPolicy": {
                "infrastructureRestartLimit": 1,
                "rules": [{"onExitCodes": {"operator": "In", "values": [3]}, "action": "Ignore"}],
            },
            "replicaSpecs": [
                {
                    "type": "worker",
                    "restartPolicy": {"policy": "OnFailure", "limit": 1},
                    "template": {"spec": {"containers": [{"name": "python", "image": "b"}]}},
                }
            ],
        },
    }
    sim = Sim(manifest, load_plugins())
    sim.step()
    events = []
    for _ in range(3):
        sim.set("rec-spent-worker-0", "Failed", 3)
        events += sim.step().events
        events += sim.step().events
    status = sim.status
    assert status["phase"] == "Failed"
    assert status["infrastructureRestartCount"] == 1 and status["backoffCount"] == 1
    worker = status["tasks"][0]["replicas"][0]
    assert worker["restartCount"] == 2 and worker["countedRestarts"] == 1
    spent = [e.message for e in events if e.reason == "InfrastructureBudgetSpent"]
    assert spent == [
        "rec-spent-worker-0: rule spec.recoveryPolicy.rules[0] matched its failure, but the"
        " infrastructure budget is spent (1 restarts,"
        " spec.recoveryPolicy.infrastructureRestartLimit): the next rule or its restartPolicy"
        " decides, charged to the user"
    ]


def test_generic_job_ignore_under_never_succeeds_as_the_e2e_tier_runs_it() -> None:
    """tests/e2e/test_recovery.py's rec-ignore and rec-disrupt jobs, on the GenericJob plugin."""
    from t9kjobs.manager import load_plugins

    for rule, how in (
        ({"onExitCodes": {"operator": "In", "values": [3]}, "action": "Ignore"}, "exit"),
        ({"onPodConditions": [{"type": "DisruptionTarget"}], "action": "Ignore"}, "disrupt"),
    ):
        manifest = {
            "apiVersion": "batch.tensorstack.dev/v1beta1",
            "kind": "GenericJob",
            "metadata": {"name": "rec", "namespace": "ns", "uid": "u"},
            "spec": {
                "recoveryPolicy": {"rules": [rule]},
                "replicaSpecs": [
                    {
                        "type": "worker",
                        "restartPolicy": "Never",
                        "template": {"spec": {"containers": [{"name": "python", "image": "b"}]}},
                    }
                ],
            },
        }
        sim = Sim(manifest, load_plugins())
        sim.step()
        sim.set("rec-worker-0", "Running")
        sim.step()
        if how == "exit":
            sim.set("rec-worker-0", "Failed", 3)
        else:  # as the e2e test patches it: Failed, containers still running, the condition
            pod = sim.pod("rec-worker-0")
            pod["status"]["phase"] = "Failed"
            pod["status"]["conditions"] = [
                {"type": "DisruptionTarget", "status": "True", "reason": "EvictionByEvictionAPI"}
            ]
        p = sim.step()
        restarting = [e.message for e in p.events if e.reason == "Restarting"]
        assert restarting == [
            "rec-worker-0 failed"
            + (" with exit code 3" if how == "exit" else "")
            + "; restart 1 (rule spec.recoveryPolicy.rules[0], infrastructure budget)"
        ]
        sim.step()
        assert sim.pod("rec-worker-0")["metadata"]["annotations"][ANNOTATION_INCARNATION] == "1"
        sim.set("rec-worker-0", "Succeeded")
        p = sim.step()
        assert p.status.phase == "Succeeded"
        assert p.status.backoff_count == 0 and p.status.infrastructure_restart_count == 1
        worker = sim.status["tasks"][0]["replicas"][0]
        assert worker["restartCount"] == 1 and worker["countedRestarts"] == 0


def test_pytorch_fail_job_as_the_e2e_tier_runs_it() -> None:
    """tests/e2e/test_recovery.py's rec-fail job, on the PyTorchTrainingJob plugin."""
    from t9kjobs.manager import load_plugins

    manifest = {
        "apiVersion": "batch.tensorstack.dev/v1beta1",
        "kind": "PyTorchTrainingJob",
        "metadata": {"name": "rec-fail", "namespace": "ns", "uid": "u"},
        "spec": {
            "recoveryPolicy": {
                "rules": [
                    {
                        "name": "bad-input",
                        "onExitCodes": {"operator": "In", "values": [42]},
                        "action": "FailJob",
                    }
                ]
            },
            "replicaSpecs": [
                {
                    "type": "worker",
                    "replicas": 1,
                    "restartPolicy": "OnFailure",
                    "template": {
                        "spec": {
                            "containers": [
                                {"name": "python", "image": "b", "command": ["python", "t.py"]}
                            ]
                        }
                    },
                }
            ],
        },
    }
    sim = Sim(manifest, load_plugins())
    sim.absent = NO_GANGS  # no PodGroup to delete with the pods
    sim.step()
    sim.set("rec-fail-worker-0", "Failed", 42)
    p = sim.step()
    failed = p.status.condition("Failed")
    assert failed is not None and failed.reason == "RecoveryPolicy"
    assert failed.message == (
        "rec-fail-worker-0 failed with exit code 42 (container python); rule bad-input"
        " (spec.recoveryPolicy.rules[0]) fails the job"
    )
    assert p.status.backoff_count == 0 and not p.delete
