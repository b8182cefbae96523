"""`spec.recoveryPolicy` (t9kjobs.models.recovery): every kind has it, `t9kjobs validate` and a
real API server (the CRD's CEL rules, on the unit tier's kube-apiserver) refuse the same
manifests at the same field path, and the CRDs carry it."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from t9kjobs.crds import crd_for
from t9kjobs.loading import check_job, parse_job
from t9kjobs.manager import PluginManager
from t9kjobs.models import RecoveryPolicy, recovery_of
from t9kjobs.testing.kit.admission import AdmissionTier, refusal_names
from tests.unit.core.refusals import (
    BUILDERS,
    Obj,
    generic,
    problems,
    template,
)

RP = "spec.recoveryPolicy"


def _with(policy: Obj, kind: str = "GenericJob") -> Obj:
    doc = BUILDERS[kind](template())
    doc["spec"]["recoveryPolicy"] = policy
    return doc


def _rule(**rule: Any) -> Obj:
    return {"rules": [rule]}


EXIT_42 = {"operator": "In", "values": [42]}

# (case, policy, the path both refuse it at, words of validate's message); "" path: accepted
CASES: list[tuple[str, Obj, str, str]] = [
    ("empty", {}, "", ""),
    ("fail-42", _rule(name="bad", onExitCodes=EXIT_42, action="FailJob"), "", ""),
    ("ignore-disruption", _rule(onPodConditions=[{"type": "DisruptionTarget"}], action="Ignore"), "", ""),
    ("restart-infra", _rule(onReasons=["Evicted"], action="RestartReplica", budget="Infrastructure"), "", ""),
    ("restart-job", _rule(onExitCodes=EXIT_42, action="RestartJob"), "", ""),
    ("restart-job-infra", _rule(onReasons=["NodeLost"], action="RestartJob", budget="Infrastructure"), "", ""),
    ("exit-and-oom", _rule(onExitCodes=EXIT_42, onReasons=["OOMKilled", "Error"], action="FailJob"), "", ""),
    ("not-in-0", _rule(onExitCodes={"operator": "NotIn", "values": [0, 1]}, action="Ignore"), "", ""),
    ("no-matcher", _rule(action="FailJob"), f"{RP}.rules[0]", "a rule needs onExitCodes"),
    ("budget-on-ignore", _rule(onReasons=["Evicted"], action="Ignore", budget="User"),
     f"{RP}.rules[0]", "budget is for actions RestartReplica and RestartJob only"),
    ("budget-on-fail", _rule(onReasons=["Evicted"], action="FailJob", budget="Infrastructure"),
     f"{RP}.rules[0]", "budget is for actions RestartReplica and RestartJob only"),
    ("exit-with-evicted", _rule(onExitCodes=EXIT_42, onReasons=["Evicted"], action="FailJob"),
     f"{RP}.rules[0]", "onExitCodes combines only with the reasons OOMKilled and Error"),
    ("repeated-codes", _rule(onExitCodes={"operator": "In", "values": [3, 3]}, action="Ignore"),
     f"{RP}.rules[0].onExitCodes", "values must be unique"),
    ("in-zero", _rule(onExitCodes={"operator": "In", "values": [0]}, action="Ignore"),
     f"{RP}.rules[0].onExitCodes", "values may not hold 0 with operator In"),
    ("names-unique", {"rules": [{"name": "a", "onReasons": ["Error"], "action": "FailJob"},
                                {"name": "a", "onReasons": ["Evicted"], "action": "Ignore"}]},
     f"{RP}.rules", "rule names must be unique"),
    ("kueue-fail", _rule(onReasons=["PreemptedByKueue"], action="FailJob"), "", ""),
    ("kueue-restart", _rule(onReasons=["PreemptedByKueue"], action="RestartReplica"),
     f"{RP}.rules[0]", "PreemptedByKueue goes with action FailJob only"),
    ("kueue-of-a-type", _rule(onReasons=["PreemptedByKueue"], action="FailJob", replicaTypes=["a"]),
     f"{RP}.rules[0]", "PreemptedByKueue goes with action FailJob only"),
    ("restart-job-unknown-action", _rule(onReasons=["Evicted"], action="RestartGang"),
     f"{RP}.rules[0].action", ""),
    ("stalled", _rule(onReasons=["Stalled"], action="RestartReplica"), "", ""),
    ("stall-off", {"stall": {"enable": False}}, "", ""),
    ("stall-factor-0", {"stall": {"factor": 0}}, f"{RP}.stall.factor", ""),
    ("stall-floor-5", {"stall": {"floorSeconds": 5}}, f"{RP}.stall.floorSeconds", ""),
    ("stall-startup-short", {"stall": {"floorSeconds": 60, "startupSeconds": 30}},
     f"{RP}.stall", "startupSeconds must be at least floorSeconds"),
    ("code-256", _rule(onExitCodes={"operator": "In", "values": [256]}, action="Ignore"),
     f"{RP}.rules[0].onExitCodes.values[0]", ""),
    ("negative-limit", {"infrastructureRestartLimit": -1}, f"{RP}.infrastructureRestartLimit", ""),
    ("17-rules", {"rules": [{"onReasons": ["Error"], "action": "FailJob"}] * 17}, f"{RP}.rules", ""),
    ("unknown-field", _rule(onReasons=["Error"], action="FailJob", onMessage="x"),
     f"{RP}.rules[0].onMessage", ""),
    ("lost-node-bound", {"nodeLostAfterSeconds": 0}, "", ""),
    ("lost-node-negative", {"nodeLostAfterSeconds": -1}, f"{RP}.nodeLostAfterSeconds", ""),
    ("lost-node-over-a-day", {"nodeLostAfterSeconds": 86401}, f"{RP}.nodeLostAfterSeconds", ""),
]  # fmt: skip


@pytest.mark.parametrize(
    ("policy", "path", "says"), [c[1:] for c in CASES], ids=[c[0] for c in CASES]
)
def test_validate_refuses_at_the_field_path(
    manager: PluginManager, policy: Obj, path: str, says: str
) -> None:
    found = problems(manager, _with(policy))
    if not path:
        assert found == {}
        return
    assert list(found) == [path], found
    assert says in found[path]


@pytest.mark.parametrize("kind", list(BUILDERS))
def test_every_kind_has_it_and_the_planner_reads_it(manager: PluginManager, kind: str) -> None:
    doc = _with(_rule(onExitCodes=EXIT_42, action="FailJob"), kind)
    assert problems(manager, doc) == {}
    policy = recovery_of(parse_job(doc, manager).spec)
    assert isinstance(policy, RecoveryPolicy) and policy.infrastructure_restart_limit == 20
    assert policy.rules[0].charges is None
    assert recovery_of(parse_job(BUILDERS[kind](template()), manager).spec) is None


def test_what_each_action_charges() -> None:
    rules = RecoveryPolicy.model_validate(
        {
            "rules": [
                {"onReasons": ["Error"], "action": "RestartReplica"},
                {"onReasons": ["Error"], "action": "RestartReplica", "budget": "Infrastructure"},
                {"onReasons": ["Error"], "action": "Ignore"},
                {"onReasons": ["Error"], "action": "FailJob"},
                {"onReasons": ["Error"], "action": "RestartJob"},
                {"onReasons": ["Error"], "action": "RestartJob", "budget": "Infrastructure"},
            ]
        }
    ).rules
    assert [r.charges for r in rules] == [
        "User",
        "Infrastructure",
        "Infrastructure",
        None,
        "User",
        "Infrastructure",
    ]


def test_every_crd_has_the_rules_with_their_cel(manager: PluginManager) -> None:
    for info in manager.kinds.values():
        spec = crd_for(info)["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]
        policy = spec["spec"]["properties"]["recoveryPolicy"]
        rule = policy["properties"]["rules"]["items"]
        assert policy["properties"]["rules"]["maxItems"] == 16
        assert policy["properties"]["rules"]["x-kubernetes-validations"]
        assert len(rule["x-kubernetes-validations"]) == 4
        assert rule["properties"]["action"]["enum"] == [
            "RestartReplica",
            "RestartJob",
            "FailJob",
            "Ignore",
        ]
        status = spec["status"]["properties"]
        assert status["infrastructureRestartCount"]["type"] == "integer"
        assert status["restartHistory"]["maxItems"] == 16
        entry = status["restartHistory"]["items"]["properties"]
        assert entry["action"]["enum"] == ["RestartReplica", "RestartJob", "Ignore"]
        assert entry["message"]["maxLength"] == 256


@pytest.fixture(scope="module")
def tier(kit_kubeconfig: Path, manager: PluginManager) -> Iterator[AdmissionTier]:
    """The four bundled CRDs, generated now, on the session's API server (deleted after)."""
    tier = AdmissionTier(str(kit_kubeconfig))
    try:
        crds = [crd_for(info) for info in manager.kinds.values()]
        tier.install(crds)
        refused = [p for p in map(tier.problem, crds) if p is not None]
        assert refused == [], "\n".join(refused)
        yield tier
    finally:
        tier.close()


@pytest.mark.parametrize(
    ("policy", "path", "says"), [c[1:] for c in CASES], ids=[c[0] for c in CASES]
)
def test_the_api_server_agrees(
    tier: AdmissionTier, manager: PluginManager, policy: Obj, path: str, says: str
) -> None:
    answer = tier.dry_run(_with(policy))
    if not path:
        assert answer.admitted, answer.message
        return
    assert refusal_names(answer, (path,)) == [], answer.message
    if says:
        assert says in answer.message, answer.message


def test_generic_builder_is_the_one_used() -> None:
    assert _with({})["kind"] == generic(template())["kind"]


@pytest.mark.parametrize("kind", list(BUILDERS))
def test_replica_types_must_be_the_jobs(manager: PluginManager, kind: str) -> None:
    """Only `t9kjobs validate` knows a kind's types: the CRD admits any name."""
    doc = _with(_rule(onReasons=["Error"], action="FailJob", replicaTypes=["worker", "nope"]), kind)
    assert problems(manager, doc) == {}  # the schema and its rules admit it
    found = {p.path: p.message for p in check_job(parse_job(doc, manager), manager)}
    assert list(found) == [f"{RP}.rules[0].replicaTypes[1]"], found
    assert found[f"{RP}.rules[0].replicaTypes[1]"].startswith("no replica type 'nope' in the job")
