"""The pure parts of the recovery rules, table by table: `failures.classify` (which reason a
failed pod is) and `rules.matches`/`rules.decide` (which rule decides, and the fall-through
once the infrastructure budget is spent)."""

from __future__ import annotations

from typing import Any

import pytest

from t9kjobs.models import RecoveryPolicy, RecoveryRule
from t9kjobs.planner.failures import classify
from t9kjobs.planner.rules import BUILTIN_LABEL, RESTART_POLICY, decide, matches
from t9kjobs.vocabulary import Obj


def _pod(
    code: int | None = 1,
    reason: str = "Error",
    disruption: str | None = None,
    pod_reason: str | None = None,
    status: str = "True",
    sidecar: int | None = None,
) -> Obj:
    containers: list[Obj] = []
    if code is not None:
        terminated = {"exitCode": code, "reason": reason}
        containers.append({"name": "main", "state": {"terminated": terminated}})
    else:
        containers.append({"name": "main", "state": {"running": {}}})
    if sidecar is not None:
        containers.append({"name": "side", "state": {"terminated": {"exitCode": sidecar}}})
    out: Obj = {
        "metadata": {"name": "p"},
        "status": {"phase": "Failed", "containerStatuses": containers},
    }
    if disruption is not None:
        out["status"]["conditions"] = [
            {"type": "DisruptionTarget", "status": status, "reason": disruption}
        ]
    if pod_reason is not None:
        out["status"]["reason"] = pod_reason
    return out


def _kueue_failed() -> Obj:
    pod = _pod(None)
    pod["status"]["conditions"] = [
        {"type": "TerminatedByKueue", "status": "True", "reason": "UnschedulableOnAssignedNode"}
    ]
    return pod


CLASSIFY = [
    (_pod(1), "Error", 1),
    (_pod(137, "OOMKilled"), "OOMKilled", 137),
    (_pod(137, disruption="DeletionByTaintManager"), "NodeLost", 137),
    (_pod(None, disruption="DeletionByPodGC"), "NodeLost", None),
    (_pod(None, pod_reason="NodeLost"), "NodeLost", None),
    # Kueue's TAS failed it, ungated onto a failed node's slot: it never ran
    (_kueue_failed(), "NodeLost", None),
    (_pod(137, "OOMKilled", disruption="PreemptionByScheduler"), "Preempted", 137),
    (_pod(143, disruption="EvictionByEvictionAPI"), "Evicted", 143),
    (_pod(137, disruption="TerminationByKubelet"), "Evicted", 137),
    (_pod(None, pod_reason="Evicted"), "Evicted", None),
    (_pod(0, pod_reason="NodeShutdown"), "Evicted", 0),
    # a condition that is not True says no disruption
    (_pod(3, disruption="EvictionByEvictionAPI", status="False"), "Error", 3),
    (_pod(3, disruption="SomethingElse"), "Error", 3),
]


@pytest.mark.parametrize(("pod", "reason", "code"), CLASSIFY)
def test_classify(pod: Obj, reason: str, code: int | None) -> None:
    failure = classify(pod, "main")
    assert (failure.reason, failure.exit_code) == (reason, code)


def _rule(**rule: Any) -> RecoveryRule:
    return RecoveryRule.model_validate({"action": "FailJob", **rule})


IN_3 = {"operator": "In", "values": [3]}
MATCHES = [
    (_rule(onExitCodes=IN_3), _pod(3), "worker", True),
    (_rule(onExitCodes=IN_3), _pod(4), "worker", False),
    (_rule(onExitCodes={"operator": "NotIn", "values": [3]}), _pod(4), "worker", True),
    (_rule(onExitCodes={"operator": "NotIn", "values": [3]}), _pod(3), "worker", False),
    (_rule(onExitCodes={"operator": "NotIn", "values": [3]}), _pod(None, pod_reason="Evicted"), "worker", False),
    (_rule(onExitCodes={**IN_3, "containerName": "side"}), _pod(1, sidecar=3), "worker", True),
    (_rule(onExitCodes={**IN_3, "containerName": "side"}), _pod(3, sidecar=1), "worker", False),
    (_rule(onExitCodes={**IN_3, "containerName": "gone"}), _pod(3), "worker", False),
    (_rule(onReasons=["OOMKilled"]), _pod(137, "OOMKilled"), "worker", True),
    (_rule(onReasons=["OOMKilled"]), _pod(137), "worker", False),
    (_rule(onExitCodes=IN_3, onReasons=["Error"]), _pod(3), "worker", True),
    (_rule(onExitCodes=IN_3, onReasons=["OOMKilled"]), _pod(3), "worker", False),
    (_rule(onPodConditions=[{"type": "DisruptionTarget"}]), _pod(1, disruption="X"), "worker", True),
    (_rule(onPodConditions=[{"type": "DisruptionTarget"}]), _pod(1), "worker", False),
    (_rule(onPodConditions=[{"type": "DisruptionTarget", "status": "False"}]),
     _pod(1, disruption="X"), "worker", False),
    (_rule(onPodConditions=[{"type": "DisruptionTarget", "reasons": ["A", "B"]}]),
     _pod(1, disruption="B"), "worker", True),
    (_rule(onPodConditions=[{"type": "DisruptionTarget", "reasons": ["A"]}]),
     _pod(1, disruption="B"), "worker", False),
    (_rule(onReasons=["Error"], replicaTypes=["worker"]), _pod(1), "worker", True),
    (_rule(onReasons=["Error"], replicaTypes=["master"]), _pod(1), "worker", False),
]  # fmt: skip


@pytest.mark.parametrize(("rule", "pod", "type_", "want"), MATCHES)
def test_matches(rule: RecoveryRule, pod: Obj, type_: str, want: bool) -> None:
    assert matches(rule, classify(pod, "main"), type_, pod) is want


def _policy(*rules: dict[str, Any]) -> RecoveryPolicy:
    return RecoveryPolicy.model_validate({"rules": list(rules)})


IGNORE_3 = {"onExitCodes": IN_3, "action": "Ignore"}
DECIDE = [
    # first match decides
    (_policy({"name": "a", "onReasons": ["Error"], "action": "FailJob"}, IGNORE_3), _pod(3), True,
     ("FailJob", None, "a (spec.recoveryPolicy.rules[0])", None)),
    (_policy(IGNORE_3), _pod(3), True,
     ("Ignore", "Infrastructure", "spec.recoveryPolicy.rules[0]", None)),
    # spent: the next matching rule, then the restartPolicy
    (_policy(IGNORE_3, {"onReasons": ["Error"], "action": "RestartReplica"}), _pod(3), False,
     ("RestartReplica", "User", "spec.recoveryPolicy.rules[1]", "spec.recoveryPolicy.rules[0]")),
    (_policy(IGNORE_3), _pod(3), False,
     (RESTART_POLICY, "User", RESTART_POLICY, "spec.recoveryPolicy.rules[0]")),
    # the built-in rule after the user's
    (_policy(), _pod(137, disruption="EvictionByEvictionAPI"), True,
     ("Ignore", "Infrastructure", BUILTIN_LABEL, None)),
    (_policy(), _pod(137, disruption="EvictionByEvictionAPI"), False,
     (RESTART_POLICY, "User", RESTART_POLICY, BUILTIN_LABEL)),
    (_policy(), _pod(1), True, (RESTART_POLICY, "User", RESTART_POLICY, None)),
    # FailJob charges nothing: it applies whatever the budget
    (_policy({"onExitCodes": IN_3, "action": "FailJob"}), _pod(3), False,
     ("FailJob", None, "spec.recoveryPolicy.rules[0]", None)),
]  # fmt: skip


@pytest.mark.parametrize(("policy", "pod", "left", "want"), DECIDE)
def test_decide(policy: RecoveryPolicy, pod: Obj, left: bool, want: tuple[Any, ...]) -> None:
    d = decide(policy, classify(pod, "main"), "worker", pod, infra_left=left)
    assert (d.action, d.budget, d.rule, d.spent) == want


MORE_CLASSIFY = [
    (_pod(137, disruption="PreemptionByKubeScheduler"), "Preempted"),
    (_pod(None, pod_reason="Shutdown"), "Evicted"),
    (_pod(None, pod_reason="Terminated"), "Evicted"),
]


@pytest.mark.parametrize(("pod", "reason"), MORE_CLASSIFY)
def test_classify_more_spellings(pod: Obj, reason: str) -> None:
    assert classify(pod, "main").reason == reason


def test_oom_killed_is_read_from_the_last_state_too() -> None:
    pod = _pod(None)
    pod["status"]["containerStatuses"][0]["lastState"] = {
        "terminated": {"exitCode": 137, "reason": "OOMKilled"}
    }
    assert classify(pod, "main").reason == "OOMKilled"


DESCRIBE = [
    (_pod(137, "OOMKilled"), "main", "p failed with exit code 137 (container main), OOMKilled"),
    (_pod(3), "main", "p failed with exit code 3 (container main)"),
    (_pod(None, pod_reason="Evicted"), "main", "p failed: Evicted (status.reason Evicted)"),
    (_pod(None), "main", "p failed: Error"),
    (_pod(143, disruption="EvictionByEvictionAPI"), "main",
     "p failed: Evicted (DisruptionTarget EvictionByEvictionAPI)"),
]  # fmt: skip


@pytest.mark.parametrize(("pod", "container", "says"), DESCRIBE)
def test_describe(pod: Obj, container: str, says: str) -> None:
    assert classify(pod, container).describe("p") == says


def test_describe_without_a_container_name() -> None:
    failure = classify(_pod(3), "main")
    failure = type(failure)("Error", 3, None, None, None)
    assert failure.describe("p") == "p failed with exit code 3"


def test_decisions_and_failures_are_values() -> None:
    import dataclasses

    failure = classify(_pod(3), "main")
    decision = decide(_policy(IGNORE_3), failure, "worker", _pod(3), infra_left=True)
    for value in (failure, decision):
        with pytest.raises(dataclasses.FrozenInstanceError):
            value.reason = "x"  # type: ignore[misc]


def test_labels_as_the_status_says_them() -> None:
    evicted = _pod(137, disruption="EvictionByEvictionAPI")
    built_in = decide(_policy(), classify(evicted, "main"), "worker", evicted, infra_left=True)
    assert built_in.rule == "builtin:infrastructure"
    none = decide(_policy(), classify(_pod(1), "main"), "worker", _pod(1), infra_left=True)
    assert (none.action, none.rule, none.ruled) == ("restartPolicy", "restartPolicy", False)


def test_an_exit_code_rule_reads_another_containers_last_state() -> None:
    rule = _rule(onExitCodes={**IN_3, "containerName": "side"})
    pod = _pod(1)
    pod["status"]["containerStatuses"].append(
        {"name": "side", "state": {"running": {}}, "lastState": {"terminated": {"exitCode": 3}}}
    )
    assert matches(rule, classify(pod, "main"), "worker", pod)


def test_an_exit_code_rule_on_a_container_terminated_without_a_code_does_not_match() -> None:
    rule = _rule(onExitCodes={"operator": "NotIn", "values": [3], "containerName": "side"})
    pod = _pod(1)
    pod["status"]["containerStatuses"].append(
        {"name": "side", "state": {"terminated": {"reason": "Unknown"}}}
    )
    assert not matches(rule, classify(pod, "main"), "worker", pod)


def test_budgets_charge_from_nothing() -> None:
    from t9kjobs.planner.budgets import Budgets

    budgets = Budgets(backoff_count=0, backoff_limit=None, infra_count=0, infra_limit=1)
    budgets.charge_user("w")
    assert budgets.counted == {"w": 1} and budgets.backoff_count == 1
    assert not budgets.backoff_spent and budgets.infra_left
    budgets.charge_infrastructure()
    assert not budgets.infra_left
