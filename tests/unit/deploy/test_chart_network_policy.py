"""The chart's NetworkPolicy values, as `helm template` renders them: a policy per job (the
operator's `--network-policy` and the right to manage NetworkPolicies, only when asked for) and
a policy for the operator's metrics port (off by default)."""

from __future__ import annotations

import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from t9kjobs.vocabulary import Obj
from tests.unit.deploy.chart import (
    CHART,
    CLUSTER_WIDE,
    NAMESPACE,
    by_kind,
    install_tool,
    one,
    operator_args,
    render_chart,
)

NETWORKING = "networking.k8s.io"


@pytest.fixture(scope="module")
def render() -> Callable[..., list[Obj]]:
    helm = install_tool("helm")
    return lambda values=None: render_chart(helm, {**CLUSTER_WIDE, **(values or {})})


def network_policy_rules(objects: list[Obj]) -> list[Obj]:
    return [
        rule
        for rule in one(objects, "ClusterRole")["rules"]
        if NETWORKING in rule["apiGroups"] or "networkpolicies" in rule["resources"]
    ]


def test_off_by_default_no_policy_no_flag_no_right(render: Callable[..., list[Obj]]) -> None:
    objects = render()
    assert not by_kind(objects, "NetworkPolicy")
    assert network_policy_rules(objects) == []
    args = operator_args(objects)
    assert args.network_policy is False
    assert (args.network_policy_allow_namespace, args.network_policy_allow_pods) == ([], [])


def test_jobs_policies_reach_the_operator_with_their_rights(
    render: Callable[..., list[Obj]],
) -> None:
    jobs = {
        "enabled": True,
        "allowNamespaces": ["monitoring", "tools"],
        "allowPods": [{"tier": "ui", "app": "notebook"}, {"role": "tb"}],
    }
    objects = render({"networkPolicy": {"jobs": jobs}})
    args = operator_args(objects)
    assert args.network_policy is True
    assert args.network_policy_allow_namespace == ["monitoring", "tools"]
    assert args.network_policy_allow_pods == [
        (("app", "notebook"), ("tier", "ui")),
        (("role", "tb"),),
    ]
    # The operator watches, creates, updates and deletes them: the one rule it gets, exactly.
    assert network_policy_rules(objects) == [
        {
            "apiGroups": [NETWORKING],
            "resources": ["networkpolicies"],
            "verbs": ["list", "watch", "create", "update", "delete"],
        }
    ]
    assert not by_kind(objects, "NetworkPolicy")  # the jobs' own are the operator's to make


def test_the_metrics_policy_opens_the_metrics_port_to_the_chosen_peers_only(
    render: Callable[..., list[Obj]],
) -> None:
    objects = render({"networkPolicy": {"metrics": {"enabled": True}}})
    policy = one(objects, "NetworkPolicy")
    assert policy["metadata"]["namespace"] == NAMESPACE
    assert policy["metadata"]["name"] == "t9k-jobs-metrics"
    pod_labels = one(objects, "Deployment")["spec"]["template"]["metadata"]["labels"]
    assert policy["spec"]["podSelector"]["matchLabels"].items() <= pod_labels.items()
    assert policy["spec"]["policyTypes"] == ["Ingress"]
    # By default any pod may scrape, and nothing else may connect but the API server to the
    # admission webhook (from its own address, which no selector names).
    assert policy["spec"]["ingress"] == [
        {
            "from": [{"namespaceSelector": {}, "podSelector": {}}],
            "ports": [{"port": "metrics", "protocol": "TCP"}],
        },
        {"ports": [{"port": "webhook", "protocol": "TCP"}]},
    ]
    without = render(
        {"networkPolicy": {"metrics": {"enabled": True}}, "webhook": {"enabled": False}}
    )
    assert len(one(without, "NetworkPolicy")["spec"]["ingress"]) == 1
    # The named port is the operator container's metrics port.
    ports = one(objects, "Deployment")["spec"]["template"]["spec"]["containers"][0]["ports"]
    assert "metrics" in {p["name"] for p in ports}
    assert network_policy_rules(objects) == []  # the chart makes it, not the operator

    chosen = {
        "enabled": True,
        "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "monitoring"}},
        "podSelector": {"matchLabels": {"app": "prometheus"}},
    }
    policy = one(render({"networkPolicy": {"metrics": chosen}}), "NetworkPolicy")
    assert policy["spec"]["ingress"][0]["from"] == [
        {
            "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "monitoring"}},
            "podSelector": {"matchLabels": {"app": "prometheus"}},
        }
    ]


def test_lint_strict_with_every_policy_on(tmp_path: Path) -> None:
    helm = install_tool("helm")
    values = tmp_path / "values.yaml"
    values.write_text(
        "clusterWide: true\n"
        "networkPolicy:\n"
        "  jobs: {enabled: true, allowNamespaces: [monitoring], allowPods: [{app: notebook}]}\n"
        "  metrics: {enabled: true}\n"
    )
    proc = subprocess.run(
        [str(helm), "lint", "--strict", str(CHART), "--values", str(values)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
