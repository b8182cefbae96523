"""The networkpolicy feature plugin: with the operator's `--network-policy`, a NetworkPolicy per
job of any kind, owned by the job, selecting its pods and admitting only them (and the peers
the operator names); nothing at all without it. The operator's options, the settings they
become and the child kind the controller then watches."""

from __future__ import annotations

import copy
import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from t9kjobs.cli.main import _parser
from t9kjobs.controller.operator import Operator, Options
from t9kjobs.kube.resources import CHILD_RESOURCES
from t9kjobs.loading import parse_job
from t9kjobs.manager import PluginManager
from t9kjobs.planner import Observed, Plan, plan
from t9kjobs.plugins.networkpolicy import plugin as networkpolicy
from t9kjobs.plugins.networkpolicy.plugin import NetworkPolicySettings
from t9kjobs.validation import parse_labels
from t9kjobs.vocabulary import Obj
from tests.repo import REPO
from tests.unit.configuring import configured
from tests.unit.conftest import NOW
from tests.unit.core.planner.sim import Sim
from tests.unit.core.planner.tinyjob import tiny_job, tiny_manager

ON = {"network-policy": True}
OWNER = {"tensorstack.dev/owner-kind": "GenericJob", "tensorstack.dev/owner-name": "generic-mlp"}
# What every allowPods peer adds: no pod of a job (issue #47).
NR = [{"key": "tensorstack.dev/replica-type", "operator": "DoesNotExist"}]


def _example(path: str) -> Obj:
    doc: Obj = yaml.safe_load((REPO / path).read_text())
    doc["metadata"].update(namespace="ns", uid="job-uid")
    return doc


def _plan(manager: PluginManager, doc: Obj) -> Plan:
    """The first reconcile of `doc`."""
    job = parse_job(copy.deepcopy(doc), manager)
    return plan(job, Observed({}), NOW, manager.hooks_for(job.kind))


def _policies(p: Plan) -> list[Obj]:
    return [o for o in p.create if o["kind"] == "NetworkPolicy"]


def test_off_by_default_no_policy_and_nothing_else_changes(manager: PluginManager) -> None:
    doc = _example("examples/genericjob/mlp-cpu.yaml")
    off = _plan(manager, doc)
    assert not _policies(off)
    with configured(manager, ON):
        on = _plan(manager, doc)
    # The policy is all the option adds: the pods and the other children are the same.
    assert [o for o in on.create if o["kind"] != "NetworkPolicy"] == list(off.create)


def test_a_policy_owned_by_the_job_admitting_only_its_own_pods(manager: PluginManager) -> None:
    with configured(manager, ON):
        p = _plan(manager, _example("examples/genericjob/mlp-cpu.yaml"))
    [policy] = _policies(p)
    assert policy["apiVersion"] == "networking.k8s.io/v1"
    meta = policy["metadata"]
    assert (meta["name"], meta["namespace"]) == ("generic-mlp", "ns")
    assert meta["labels"] == OWNER  # the controller's informer selects children by them
    assert meta["ownerReferences"] == [
        {
            "apiVersion": "batch.tensorstack.dev/v1beta1",
            "kind": "GenericJob",
            "name": "generic-mlp",
            "uid": "job-uid",
            "controller": True,
            "blockOwnerDeletion": True,
        }
    ]
    assert policy["spec"] == {
        "podSelector": {"matchLabels": OWNER},
        "policyTypes": ["Ingress"],
        "ingress": [{"from": [{"podSelector": {"matchLabels": OWNER}}]}],
    }
    # It selects every pod of the job, and exists before any of them.
    pods = [o for o in p.create if o["kind"] == "Pod"]
    assert len(pods) == 3
    for pod in pods:
        assert OWNER.items() <= pod["metadata"]["labels"].items()
    kinds = [o["kind"] for o in p.create]
    assert kinds.index("NetworkPolicy") < kinds.index("Pod")


@pytest.mark.parametrize("example", sorted(REPO.glob("examples/*/mlp-cpu.yaml")), ids=str)
def test_every_bundled_kind_gets_one(manager: PluginManager, example: Path) -> None:
    doc = _example(str(example.relative_to(REPO)))
    with configured(manager, ON):
        p = _plan(manager, doc)
    [policy] = _policies(p)
    labels = {
        "tensorstack.dev/owner-kind": doc["kind"],
        "tensorstack.dev/owner-name": doc["metadata"]["name"],
    }
    assert policy["spec"]["podSelector"] == {"matchLabels": labels}
    for pod in (o for o in p.create if o["kind"] == "Pod"):
        assert labels.items() <= pod["metadata"]["labels"].items()


def test_a_third_party_kind_gets_one_too() -> None:
    manager = tiny_manager()
    manager.register(networkpolicy, "networkpolicy")
    with configured(manager, ON):
        p = _plan(manager, tiny_job())
    [policy] = _policies(p)
    assert policy["spec"]["podSelector"] == {
        "matchLabels": {
            "tensorstack.dev/owner-kind": "TinyJob",
            "tensorstack.dev/owner-name": "tiny",
        }
    }


def test_the_peers_the_operator_admits() -> None:
    settings = NetworkPolicySettings.of(
        True, ["monitoring,team-tools", "monitoring"], ["app=notebook,tier=ui", "role=tb"]
    )
    assert settings.allow_namespaces == ("monitoring", "team-tools")
    manager = tiny_manager()
    job = parse_job(tiny_job(), manager)
    peers = networkpolicy.network_policy(job, settings)["spec"]["ingress"][0]["from"]
    own = {"tensorstack.dev/owner-kind": "TinyJob", "tensorstack.dev/owner-name": "tiny"}
    assert peers == [
        {"podSelector": {"matchLabels": own}},
        {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "monitoring"}}},
        {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "team-tools"}}},
        {"podSelector": {"matchLabels": {"app": "notebook", "tier": "ui"}, "matchExpressions": NR}},
        {"podSelector": {"matchLabels": {"role": "tb"}, "matchExpressions": NR}},
    ]


def _selects(selector: Obj, labels: dict[str, str]) -> bool:
    """Whether a label selector (matchLabels, and matchExpressions of the operators a peer
    uses) selects a pod of these labels, as the API's selectors do."""
    if any(labels.get(k) != v for k, v in (selector.get("matchLabels") or {}).items()):
        return False
    for expression in selector.get("matchExpressions") or []:
        assert expression["operator"] in ("Exists", "DoesNotExist"), expression
        if (expression["key"] in labels) != (expression["operator"] == "Exists"):
            return False
    return True


def test_a_jobs_template_cannot_make_its_pods_allowed_peers(manager: PluginManager) -> None:
    # Issue #47: a template labelled like an allowPods peer (`app: notebook`) made its pods
    # peers of every job of the namespace. Every job's pod carries the replica-type label,
    # which templates cannot remove; peers must lack it.
    options = {**ON, "network-policy-allow-pods": (parse_labels("app=notebook"),)}
    doc = _example("examples/genericjob/mlp-cpu.yaml")
    for spec in doc["spec"]["replicaSpecs"]:
        spec["template"].setdefault("metadata", {})["labels"] = {"app": "notebook"}
    with configured(manager, options):
        p = _plan(manager, doc)
    [policy] = _policies(p)
    peers = [f["podSelector"] for f in policy["spec"]["ingress"][0]["from"] if "podSelector" in f]
    allowed = peers[1]
    pods = [o for o in p.create if o["kind"] == "Pod"]
    assert pods
    for pod in pods:
        assert pod["metadata"]["labels"]["app"] == "notebook"
        assert not _selects(allowed, pod["metadata"]["labels"])
    # A notebook beside the jobs stays a peer, even one another controller of the domain made.
    notebook = {"app": "notebook", "tensorstack.dev/owner-kind": "Notebook"}
    assert _selects(allowed, notebook)
    assert _selects(peers[0], pods[0]["metadata"]["labels"])  # the job's own pods


def test_a_policy_whose_peers_changed_is_updated_not_recreated() -> None:
    manager = tiny_manager()
    manager.register(networkpolicy, "networkpolicy")
    sim = Sim(tiny_job(), manager)
    with configured(manager, ON):
        first = sim.step()
        assert len(_policies(first)) == 1
        assert not _policies(sim.step())  # it exists: nothing to do
    wider = {**ON, "network-policy-allow-namespace": ("monitoring",)}
    with configured(manager, wider):
        p = sim.step()
    [updated] = [o for o in p.update if o["kind"] == "NetworkPolicy"]
    assert len(updated["spec"]["ingress"][0]["from"]) == 2
    assert not _policies(p) and not p.delete


@pytest.mark.parametrize(
    ("namespaces", "pods", "wrong"),
    [
        (["Team_A"], [], "'Team_A' is not a namespace name"),
        (["a" * 64], [], "is not a namespace name"),
        ([], ["app"], "'app' is not KEY=VALUE"),
        ([], ["=x"], "'' is not a label key"),
        ([], ["app=no spaces"], "'no spaces' (label app) is not a label value"),
        ([], ["-bad/app=x"], "'-bad/app' is not a label key"),
    ],
)
def test_bad_peers_are_refused_before_any_policy_is_made(
    namespaces: list[str], pods: list[str], wrong: str
) -> None:
    with pytest.raises(ValueError, match=re.escape(wrong)):
        NetworkPolicySettings.of(True, namespaces, pods)


def test_labels_parse_sorted_and_deduplicated() -> None:
    assert parse_labels("b=2, a=1,example.com/role=tb,a=1") == (
        ("a", "1"),
        ("b", "2"),
        ("example.com/role", "tb"),
    )
    assert parse_labels("empty=") == (("empty", ""),)


def _operator_args(*argv: str) -> Any:
    return _parser().parse_args(["operator", *argv])


def test_the_operators_options() -> None:
    args = _operator_args()
    assert (args.network_policy, args.network_policy_allow_namespace) == (False, [])
    args = _operator_args(
        "--network-policy",
        "--network-policy-allow-namespace=monitoring,tools",
        "--network-policy-allow-namespace",
        "other",
        "--network-policy-allow-pods=app=notebook,tier=ui",
    )
    assert args.network_policy is True
    assert args.network_policy_allow_namespace == ["monitoring", "tools", "other"]
    assert args.network_policy_allow_pods == [(("app", "notebook"), ("tier", "ui"))]


@pytest.mark.parametrize(
    "argv",
    [
        ["--network-policy-allow-namespace=Bad_Name"],
        ["--network-policy-allow-pods=app"],
    ],
)
def test_a_bad_peer_is_a_usage_error(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        _operator_args("--network-policy", *argv)
    assert exit_.value.code == 2
    assert "operator: error: argument --network-policy-allow-" in capsys.readouterr().err


def test_peers_without_the_option_are_refused(
    manager: PluginManager, capsys: pytest.CaptureFixture[str]
) -> None:
    args = _operator_args("--network-policy-allow-namespace=monitoring")
    assert args.func(args, manager) == 2
    assert "need --network-policy" in capsys.readouterr().err


def _operator(tmp_path: Path, manager: PluginManager) -> Operator:
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [{"name": "c", "cluster": {"server": "https://127.0.0.1:9"}}],
                "users": [{"name": "u", "user": {"token": "t"}}],
                "contexts": [{"name": "x", "context": {"cluster": "c", "user": "u"}}],
                "current-context": "x",
            }
        )
    )
    return Operator(Options(kubeconfig=str(kubeconfig)), manager)


def test_the_operator_watches_network_policies_only_with_the_option(
    tmp_path: Path, manager: PluginManager
) -> None:
    ops = [_operator(tmp_path, manager)]
    with configured(manager, {**ON, "network-policy-allow-namespace": ("monitoring",)}):
        # The plugin the manager holds is configured with the option's values.
        held = manager.held("networkpolicy")
        assert isinstance(held, networkpolicy.NetworkPolicies)
        assert held.settings.allow_namespaces == ("monitoring",)
        ops.append(_operator(tmp_path, manager))
    try:
        off, on = (set(op.child_resources) for op in ops)
        assert "NetworkPolicy" not in off and set(CHILD_RESOURCES) <= off
        assert on == off | {"NetworkPolicy"}
        assert ops[1].child_resources["NetworkPolicy"].path("ns") == (
            "/apis/networking.k8s.io/v1/namespaces/ns/networkpolicies"
        )
    finally:
        for op in ops:
            op.jobs.stop()
            op.events.close()
            op.creator.shutdown()
