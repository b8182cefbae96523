"""The Helm chart `deploy/helm/t9k-jobs`: `helm lint`, and what `helm template` renders.

helm is built once from its Go module by `hack/install-tools.sh` (about 4.5 min on a fresh
machine, then cached). Whether the rendered RBAC is enough, and no more, is proven on the
local control plane by tests/e2e/test_install_rbac.py.
"""

from __future__ import annotations

import subprocess
import tomllib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from t9kjobs.cli.main import _parser
from t9kjobs.manager import PluginManager
from t9kjobs.vocabulary import Obj
from tests.repo import REPO
from tests.unit.deploy.chart import (
    CHART,
    CLUSTER_WIDE,
    NAMESPACE,
    RELEASE,
    by_kind,
    container,
    named,
    one,
    operator_args,
    render_chart,
)


def test_helm_lint_strict_passes(helm: Path) -> None:
    proc = subprocess.run(
        [str(helm), "lint", "--strict", str(CHART), "--set", "clusterWide=true"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "0 chart(s) failed" in proc.stdout


def test_chart_crds_are_the_generated_crds() -> None:
    """Helm installs `crds/` verbatim: it must be `make crds`'s output (hack/sync_chart_crds.py)."""
    top = {p.name: p.read_text() for p in (REPO / "crds").glob("*.yaml")}
    chart = {p.name: p.read_text() for p in (CHART / "crds").glob("*.yaml")}
    assert sorted(chart) == sorted(top), "run: .venv/bin/python hack/sync_chart_crds.py"
    stale = [name for name in top if chart[name] != top[name]]
    assert not stale, f"stale chart CRDs {stale}; run: .venv/bin/python hack/sync_chart_crds.py"


def test_chart_version_is_the_distributions() -> None:
    chart = yaml.safe_load((CHART / "Chart.yaml").read_text())
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    assert chart["appVersion"] == project["version"]
    assert chart["version"] == project["version"]


def test_defaults_render_every_object_once(render: Callable[..., list[Obj]]) -> None:
    objects = render()
    kinds = sorted(o["kind"] for o in objects)
    assert kinds == [
        "ClusterRole",
        "ClusterRole",  # the node reader (lostNodes.seconds: test_chart_lost_nodes.py)
        "ClusterRoleBinding",
        "ClusterRoleBinding",
        "Deployment",
        "Role",
        "Role",
        "RoleBinding",
        "RoleBinding",
        "Secret",  # the admission webhook's certificate (test_chart_webhook.py)
        "Service",
        "Service",  # the admission webhook's
        "ServiceAccount",
        "ValidatingWebhookConfiguration",
    ]
    for o in objects:
        if o["kind"] not in ("ClusterRole", "ClusterRoleBinding", "ValidatingWebhookConfiguration"):
            assert o["metadata"]["namespace"] == NAMESPACE, o["kind"]
        assert o["metadata"]["labels"]["app.kubernetes.io/part-of"] == "t9k-jobs"


def test_rbac_names_exact_resources_and_verbs(
    render: Callable[..., list[Obj]], manager: PluginManager
) -> None:
    objects = render()
    rules = [
        r
        for role in by_kind(objects, "ClusterRole") + by_kind(objects, "Role")
        for r in role["rules"]
    ]
    for rule in rules:
        for key in ("apiGroups", "resources", "verbs"):
            assert "*" not in rule[key] and rule[key], rule
        assert "nonResourceURLs" not in rule  # discovery is granted to every authenticated user
    cluster_rules = one(objects, "ClusterRole")["rules"]
    granted = {
        (group, resource): set(rule["verbs"])
        for rule in cluster_rules
        for group in rule["apiGroups"]
        for resource in rule["resources"]
    }
    bundled = {p.name for p in manager.plugins() if p.distribution == "t9k-jobs"}
    plurals = sorted(i.plural for k, i in manager.kinds.items() if manager.owner_of(k) in bundled)
    assert len(plurals) >= 4
    for plural in plurals:
        assert granted[("batch.tensorstack.dev", plural)] == {"list", "watch"}
        assert granted[("batch.tensorstack.dev", f"{plural}/status")] == {"update"}
        assert granted[("batch.tensorstack.dev", f"{plural}/finalizers")] == {"update"}
    job_kinds = {r for g, r in granted if g == "batch.tensorstack.dev" and "/" not in r}
    assert sorted(job_kinds) == plurals
    assert granted[("", "pods")] == {"list", "watch", "create", "delete"}
    assert granted[("", "pods/log")] == {"get"}  # training progress, read from the log
    assert granted[("", "secrets")] == {"list", "watch", "create", "delete"}
    assert granted[("", "events")] == {"create"}
    lease = named(objects, "Role", "leader-election")["rules"]
    assert {(tuple(r["verbs"]), tuple(r.get("resourceNames", ()))) for r in lease} == {
        (("create",), ()),
        (("get", "update"), ("t9k-jobs-operator",)),
    }
    # The ownership key (docs/security.md, threat 13): made once, then read, by name.
    key = named(objects, "Role", "ownership-key")["rules"]
    assert {
        (tuple(r["resources"]), tuple(r["verbs"]), tuple(r.get("resourceNames", ()))) for r in key
    } == {
        (("secrets",), ("create",), ()),
        (("secrets",), ("get",), ("t9k-jobs-ownership-key",)),
    }


def test_bindings_grant_the_service_account(render: Callable[..., list[Obj]]) -> None:
    objects = render()
    account = one(objects, "ServiceAccount")["metadata"]["name"]
    subject = {"kind": "ServiceAccount", "name": account, "namespace": NAMESPACE}
    cluster_binding = one(objects, "ClusterRoleBinding")
    assert cluster_binding["subjects"] == [subject]
    assert cluster_binding["roleRef"]["name"] == one(objects, "ClusterRole")["metadata"]["name"]
    for suffix in ("leader-election", "ownership-key"):
        binding = named(objects, "RoleBinding", suffix)
        assert binding["subjects"] == [subject]
        assert binding["roleRef"] == {
            "apiGroup": "rbac.authorization.k8s.io",
            "kind": "Role",
            "name": named(objects, "Role", suffix)["metadata"]["name"],
        }
    pod = one(objects, "Deployment")["spec"]["template"]["spec"]
    assert pod["serviceAccountName"] == account


def test_watched_namespaces_get_role_bindings_not_a_cluster_binding(
    render: Callable[..., list[Obj]],
) -> None:
    objects = render({"watchNamespaces": ["team-a", "team-b"]})
    assert not by_kind(objects, "ClusterRoleBinding")
    role = one(objects, "ClusterRole")["metadata"]["name"]
    bindings = {
        b["metadata"]["namespace"]: b["roleRef"]
        for b in by_kind(objects, "RoleBinding")
        if b["roleRef"]["kind"] == "ClusterRole"
    }
    assert bindings == {
        ns: {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": role}
        for ns in ("team-a", "team-b")
    }
    assert operator_args(objects).namespace == ["team-a", "team-b"]


def test_deployment_runs_two_replicas_with_leader_election(
    render: Callable[..., list[Obj]],
) -> None:
    objects = render()
    assert one(objects, "Deployment")["spec"]["replicas"] == 2
    args = operator_args(objects)
    assert args.leader_elect is True
    assert args.leader_election_namespace == NAMESPACE
    assert args.leader_election_id == "t9k-jobs-operator"
    assert args.namespace == []
    assert (args.metrics_bind_address, args.health_probe_bind_address) == (":8080", ":8081")


def test_values_reach_the_operator_flags(render: Callable[..., list[Obj]]) -> None:
    values = {"logLevel": "debug", "qps": 20, "burst": 40, "workers": 4, "replicaCount": 1}
    objects = render(
        {
            **values,
            "leaderElection": {"enabled": False},
            "blockPlugins": ["a", "b"],
            "progress": {"interval": 60, "qps": 0},
        }
    )
    args = operator_args(objects)
    assert (args.log_level, args.qps, args.burst, args.workers) == ("debug", 20.0, 40, 4)
    assert (args.progress_interval, args.progress_qps) == (60.0, 0.0)
    defaults = operator_args(render())
    assert (defaults.progress_interval, defaults.progress_qps) == (30.0, 5.0)
    assert args.leader_elect is False
    assert [r["metadata"]["name"] for r in by_kind(objects, "Role")] == [
        named(objects, "Role", "ownership-key")["metadata"]["name"]
    ]
    assert container(objects)["env"] == [{"name": "T9KJOBS_BLOCK_PLUGINS", "value": "a,b"}]


def pod_group_rights(objects: list[Obj]) -> dict[str, set[str]]:
    """The ClusterRole's verbs on `podgroups`, by API group."""
    return {
        group: set(rule["verbs"])
        for rule in one(objects, "ClusterRole")["rules"]
        if "podgroups" in rule["resources"]
        for group in rule["apiGroups"]
    }


T9K_POD_GROUPS = {"scheduler.tensorstack.dev": {"list", "watch", "create", "update", "delete"}}
# kube-scheduler's PodGroups are immutable: replaced, never updated.
NATIVE_POD_GROUPS = {"scheduling.k8s.io": {"list", "watch", "create", "delete"}}


@pytest.mark.parametrize(
    ("mode", "rights"),
    [
        ("auto", {**T9K_POD_GROUPS, **NATIVE_POD_GROUPS}),
        ("native", NATIVE_POD_GROUPS),
        ("t9k", T9K_POD_GROUPS),
        ("none", {}),
    ],
)
def test_pod_group_rights_follow_the_gang_scheduling_mode(
    render: Callable[..., list[Obj]], mode: str, rights: dict[str, set[str]]
) -> None:
    """`gangScheduling` reaches `--gang-scheduling`, and the ClusterRole grants rights on
    exactly the PodGroup kinds the operator watches in that mode (`Operator`)."""
    objects = render({"gangScheduling": mode})
    assert f"--gang-scheduling={mode}" in container(objects)["args"]
    assert operator_args(objects).gang_scheduling == mode
    assert pod_group_rights(objects) == rights


def test_gang_scheduling_defaults_to_auto_and_refuses_an_unknown_mode(helm: Path) -> None:
    objects = render_chart(helm, CLUSTER_WIDE)
    assert operator_args(objects).gang_scheduling == "auto"
    assert pod_group_rights(objects) == {**T9K_POD_GROUPS, **NATIVE_POD_GROUPS}
    proc = subprocess.run(
        [str(helm), "template", RELEASE, str(CHART), "--namespace", NAMESPACE, "--values", "-"],
        input=yaml.safe_dump({**CLUSTER_WIDE, "gangScheduling": "volcano"}),
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode != 0
    assert "gangScheduling is volcano: choose auto, native, t9k or none" in proc.stderr


def test_extra_job_resources_get_the_job_rules(render: Callable[..., list[Obj]]) -> None:
    objects = render({"rbac": {"extraJobResources": ["mpijobs"]}})
    resources = {r for rule in one(objects, "ClusterRole")["rules"] for r in rule["resources"]}
    assert {"mpijobs", "mpijobs/status", "mpijobs/finalizers"} <= resources


def test_pod_is_hardened_and_probed(render: Callable[..., list[Obj]]) -> None:
    objects = render()
    pod = one(objects, "Deployment")["spec"]["template"]["spec"]
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert pod["securityContext"]["runAsUser"] != 0
    assert pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    c = container(objects)
    assert c["securityContext"] == {
        "allowPrivilegeEscalation": False,
        "privileged": False,
        "readOnlyRootFilesystem": True,
        "capabilities": {"drop": ["ALL"]},
    }
    assert set(c["resources"]) == {"requests", "limits"}
    assert set(c["resources"]["requests"]) == set(c["resources"]["limits"]) == {"cpu", "memory"}
    ports = {p["name"]: p["containerPort"] for p in c["ports"]}
    args = operator_args(objects)
    assert ports == {
        "metrics": int(args.metrics_bind_address.rpartition(":")[2]),
        "health": int(args.health_probe_bind_address.rpartition(":")[2]),
        "webhook": int(args.webhook_bind_address.rpartition(":")[2]),
    }
    assert c["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "health"}
    assert c["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "health"}
    assert (
        c["image"] == f"t9k-jobs:{yaml.safe_load((CHART / 'Chart.yaml').read_text())['appVersion']}"
    )


def test_metrics_service_selects_the_operator_pods(render: Callable[..., list[Obj]]) -> None:
    objects = render()
    service = named(objects, "Service", "metrics")
    labels = one(objects, "Deployment")["spec"]["template"]["metadata"]["labels"]
    assert service["spec"]["selector"].items() <= labels.items()
    assert service["spec"]["ports"] == [
        {"name": "metrics", "port": 8080, "targetPort": "metrics", "protocol": "TCP"}
    ]
    without = render({"metrics": {"service": {"enabled": False}}})
    assert [s["metadata"]["name"] for s in by_kind(without, "Service")] == ["t9k-jobs-webhook"]


def test_api_server_address_overrides_the_in_cluster_default(
    render: Callable[..., list[Obj]],
) -> None:
    def env(values: Obj | None) -> dict[str, str]:
        (deployment,) = by_kind(render(values), "Deployment")
        container = deployment["spec"]["template"]["spec"]["containers"][0]
        return {e["name"]: e["value"] for e in container.get("env") or []}

    assert "KUBERNETES_SERVICE_HOST" not in env(None)
    values = {"apiServer": {"host": "10.244.0.1", "port": 6443}, "blockPlugins": ["scheduling"]}
    assert env(values) == {
        "T9KJOBS_BLOCK_PLUGINS": "scheduling",
        "KUBERNETES_SERVICE_HOST": "10.244.0.1",
        "KUBERNETES_SERVICE_PORT": "6443",
    }


def test_the_chart_refuses_to_install_until_told_what_to_serve(helm: Path) -> None:
    """Namespace-scoped installs are what the chart steers to: with neither watchNamespaces
    nor clusterWide it says so, and fails."""
    proc = subprocess.run(
        [str(helm), "template", RELEASE, str(CHART), "--namespace", NAMESPACE],
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode != 0
    assert "choose what the operator serves: watchNamespaces=" in proc.stderr
    assert "clusterWide=true" in proc.stderr
    scoped = render_chart(helm, {"watchNamespaces": ["team-a"]})
    assert {o["kind"] for o in scoped} >= {"Deployment", "RoleBinding"}
    assert not by_kind(scoped, "ClusterRoleBinding")


def _kueue_rights(objects: list[Obj]) -> dict[tuple[str, str], set[str]]:
    """The ClusterRoles' verbs on Kueue's resources and on PriorityClasses."""
    return {
        (group, resource): set(rule["verbs"])
        for role in objects
        if role["kind"] == "ClusterRole"
        for rule in role["rules"]
        for group in rule["apiGroups"]
        for resource in rule["resources"]
        if group == "kueue.x-k8s.io" or resource == "priorityclasses"
    }


def test_kueue_rights_only_when_kueue_is_enabled(render: Callable[..., list[Obj]]) -> None:
    """Off by default: `--kueue=off`, and no right on anything of Kueue's. Enabled: `--kueue=auto`
    and exactly what `t9kjobs.planner.queueing` does (Workloads created, replaced, a prebuilt
    one adopted, and their status patched; flavors and priority classes read)."""
    objects = render({})
    assert operator_args(objects).kueue == "off"
    assert _kueue_rights(objects) == {}
    objects = render({"kueue": {"enabled": True}})
    assert operator_args(objects).kueue == "auto"
    assert _kueue_rights(objects) == {
        ("kueue.x-k8s.io", "workloads"): {"list", "watch", "create", "update", "delete"},
        ("kueue.x-k8s.io", "workloads/status"): {"patch"},
        ("kueue.x-k8s.io", "localqueues"): {"list", "watch"},
        ("kueue.x-k8s.io", "resourceflavors"): {"list", "watch"},
        ("kueue.x-k8s.io", "workloadpriorityclasses"): {"list", "watch"},
        ("scheduling.k8s.io", "priorityclasses"): {"list", "watch"},
    }


def test_kueues_cluster_wide_reads_are_bound_cluster_wide_when_some_namespaces_are_watched(
    helm: Path,
) -> None:
    """ResourceFlavors and priority classes belong to no namespace: with `watchNamespaces` the
    main ClusterRole is bound per namespace, but the reads of those must be bound cluster-wide,
    or the operator's informers of them are refused and it never becomes ready."""
    values = {"watchNamespaces": ["team-a"], "kueue": {"enabled": True}}
    objects = render_chart(helm, values)
    reader = next(
        o
        for o in objects
        if o["kind"] == "ClusterRole" and o["metadata"]["name"].endswith("-kueue-reader")
    )
    cluster_scoped = {r for rule in reader["rules"] for r in rule["resources"]}
    assert cluster_scoped == {"resourceflavors", "workloadpriorityclasses", "priorityclasses"}
    bound = [
        o
        for o in objects
        if o["kind"] == "ClusterRoleBinding" and o["roleRef"]["name"] == reader["metadata"]["name"]
    ]
    assert len(bound) == 1 and bound[0]["subjects"][0]["kind"] == "ServiceAccount"
    # The rest stays namespaced: no ClusterRoleBinding of the main ClusterRole (the other
    # binding is the node reader's: test_chart_lost_nodes.py).
    assert [
        o["roleRef"]["name"]
        for o in objects
        if o["kind"] == "ClusterRoleBinding" and not o["metadata"]["name"].endswith("-node-reader")
    ] == [reader["metadata"]["name"]]


def _policy(objects: list[Obj]) -> Any:
    """The Kueue policy `t9kjobs operator` makes of the Deployment's args."""
    from t9kjobs.cli.operator import _kueue_policy

    return _kueue_policy(operator_args(objects))


def test_kueue_policy_values_reach_the_operator_flags(
    render: Callable[..., list[Obj]], helm: Path
) -> None:
    """kueue.requireQueue, defaultQueue and resourceClaimTemplates are the operator's
    --kueue-require-queue, --kueue-default-queue and --kueue-resource-claim-templates; they
    mean nothing without Kueue, so the chart refuses them then."""
    from t9kjobs.planner import KueuePolicy

    assert _policy(render({"kueue": {"enabled": True}})) == KueuePolicy()
    kueue = {
        "enabled": True,
        "requireQueue": ["team-b", "team-a"],
        "defaultQueue": "default",
        "resourceClaimTemplates": True,
    }
    assert _policy(render({"kueue": kueue})) == KueuePolicy(
        require_namespaces=("team-a", "team-b"),
        default_queue="default",
        resource_claim_templates=True,
    )
    every = _policy(render({"kueue": {"enabled": True, "requireQueue": ["all"]}}))
    assert every == KueuePolicy(require_all=True)
    assert every.requires_queue("anywhere")
    for values in (
        {"kueue": {"requireQueue": ["all"]}},
        {"kueue": {"enabled": True, "defaultQueue": "default"}},
    ):
        proc = subprocess.run(
            [str(helm), "template", RELEASE, str(CHART), "--values", "-"],
            input=yaml.safe_dump({**CLUSTER_WIDE, **values}),
            capture_output=True,
            text=True,
            check=False,
        )
        assert proc.returncode != 0 and "kueue." in proc.stderr, proc.stderr


def _queue_label_policy(objects: list[Obj]) -> tuple[Obj, Obj] | None:
    policies = by_kind(objects, "ValidatingAdmissionPolicy")
    bindings = by_kind(objects, "ValidatingAdmissionPolicyBinding")
    if not policies and not bindings:
        return None
    assert len(policies) == 1 and len(bindings) == 1
    return policies[0], bindings[0]


def test_the_queue_label_is_locked_by_an_admission_policy_with_kueue(
    render: Callable[..., list[Obj]], helm: Path
) -> None:
    """With kueue.enabled (and kueue.lockQueueLabel, its default) a ValidatingAdmissionPolicy
    refuses changing or removing kueue.x-k8s.io/queue-name of an unfinished job of every kind
    the operator serves (a CRD's CEL rules cannot read labels); bound in the namespaces it
    serves. Without Kueue, or turned off, there is none."""
    assert _queue_label_policy(render()) is None
    assert (
        _queue_label_policy(render({"kueue": {"enabled": True, "lockQueueLabel": False}})) is None
    )
    found = _queue_label_policy(
        render({"kueue": {"enabled": True}, "rbac": {"extraJobResources": ["mpijobs"]}})
    )
    assert found is not None
    policy, binding = found
    assert policy["apiVersion"] == "admissionregistration.k8s.io/v1"
    assert policy["spec"]["failurePolicy"] == "Fail"
    (rule,) = policy["spec"]["matchConstraints"]["resourceRules"]
    # UPDATE of the jobs only: their status subresource (the operator's writes) is not matched.
    assert rule["operations"] == ["UPDATE"] and rule["apiGroups"] == ["batch.tensorstack.dev"]
    assert rule["resources"] == [
        "colossalaijobs",
        "deepspeedjobs",
        "genericjobs",
        "pytorchtrainingjobs",
        "mpijobs",
    ]
    variables = {v["name"]: v["expression"] for v in policy["spec"]["variables"]}
    assert variables["key"] == "'kueue.x-k8s.io/queue-name'"
    assert "oldObject.metadata.labels[variables.key]" in variables["was"]
    assert "object.metadata.labels[variables.key]" in variables["now"]
    assert "oldObject.status.phase in ['Succeeded', 'Failed']" in variables["finished"]
    (validation,) = policy["spec"]["validations"]
    assert validation["expression"] == (
        "variables.was == '' || variables.finished || variables.now == variables.was"
    )
    assert "kueue.x-k8s.io/queue-name" in validation["messageExpression"]
    assert binding["spec"]["policyName"] == policy["metadata"]["name"]
    assert binding["spec"]["validationActions"] == ["Deny"]
    assert "matchResources" not in binding["spec"]  # clusterWide: every namespace
    objects = render_chart(helm, {"watchNamespaces": ["team-a"], "kueue": {"enabled": True}})
    found = _queue_label_policy(objects)
    assert found is not None
    assert found[1]["spec"]["matchResources"]["namespaceSelector"]["matchExpressions"] == [
        {"key": "kubernetes.io/metadata.name", "operator": "In", "values": ["team-a"]}
    ]
    # ValidatingAdmissionPolicy is GA from Kubernetes 1.30: older ones are told to turn it off.
    proc = subprocess.run(
        [str(helm), "template", RELEASE, str(CHART), "--kube-version", "1.29.4", "--values", "-"],
        input=yaml.safe_dump({**CLUSTER_WIDE, "kueue": {"enabled": True}}),
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode != 0 and "kueue.lockQueueLabel=false" in proc.stderr, proc.stderr


def test_the_operator_refuses_a_kueue_policy_it_cannot_keep() -> None:
    """What the chart refuses, `t9kjobs operator` refuses too (exit 2, before it starts)."""
    from t9kjobs.cli.operator import _kueue_policy

    def policy(*flags: str) -> Any:
        return _kueue_policy(_parser().parse_args(["operator", *flags]))

    assert "need --kueue auto" in policy("--kueue=off", "--kueue-require-queue=all")
    assert "needs namespaces" in policy("--kueue-default-queue=default")
    assert "not a namespace name" in policy("--kueue-require-queue=Team_A")
    assert "not a LocalQueue name" in policy("--kueue-require-queue=a", "--kueue-default-queue=Q!")
    both = policy("--kueue-require-queue=a,b", "--kueue-require-queue=c")
    assert both.require_namespaces == ("a", "b", "c") and not both.requires_queue("d")
