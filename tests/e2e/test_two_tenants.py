"""Two tenants on one cluster (docs/security.md): `alice` and `mallory`, each a real identity
of the local control plane (a ServiceAccount's token, bound by namespace-scoped RBAC to what a
namespace member may do: jobs, pods, Secrets, ConfigMaps, Services; never the admin
kubeconfig). Mallory tries, live, what the second outside review found against alice's jobs
and against the operator; alice's jobs must succeed untouched and the operator's Lease must
never lapse.

Namespaces: a shared one where both are members (ownership can only be forged beside the
victim), alice's own, and the KWOK log namespace, whose pods all serve the one log a test
writes (hack/cluster/kwok/start.sh): there mallory's job prints what stalled the operator.
"""

from __future__ import annotations

import json
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from t9kjobs.planner.conditions import parse_time
from t9kjobs.progress import MARKER
from t9kjobs.testing.harness.simulation import SIM_EXIT_CODE, SIM_RUN_SECONDS
from tests.cluster import Cluster, fresh_namespace
from tests.operators import OperatorProcess

LEASE = "two-tenants"
LEASE_DURATION = 15.0
OPERATOR_ARGS = (
    "--leader-elect",
    "--leader-election-namespace=default",
    f"--leader-election-id={LEASE}",
)

# What a member of a namespace may do (an `edit`-like Role): no status, no RBAC.
MEMBER_RULES = [
    {
        "apiGroups": ["batch.tensorstack.dev"],
        "resources": ["genericjobs", "pytorchtrainingjobs", "deepspeedjobs", "colossalaijobs"],
        "verbs": ["create", "get", "list", "watch", "update", "patch", "delete"],
    },
    {
        "apiGroups": [""],
        "resources": ["pods", "secrets", "configmaps", "services"],
        "verbs": ["create", "get", "list", "watch", "update", "patch", "delete"],
    },
    {"apiGroups": [""], "resources": ["events"], "verbs": ["get", "list"]},
]


@dataclass
class Tenant:
    """One user: kubectl with their own token."""

    name: str
    kubeconfig: Path
    kubectl_path: Path

    def kubectl(
        self, *args: str, input: str | None = None, check: bool = True
    ) -> subprocess.CompletedProcess[str]:
        proc = subprocess.run(
            [str(self.kubectl_path), "--kubeconfig", str(self.kubeconfig), *args],
            input=input,
            capture_output=True,
            text=True,
            timeout=120,
        )
        if check and proc.returncode != 0:
            raise AssertionError(f"{self.name}: kubectl {' '.join(args)}: {proc.stderr}")
        return proc

    def apply(self, namespace: str, doc: dict[str, Any]) -> None:
        self.kubectl("-n", namespace, "create", "-f", "-", input=json.dumps(doc))

    def get(self, namespace: str, what: str, name: str) -> dict[str, Any]:
        out = self.kubectl("-n", namespace, "get", what, name, "-o", "json").stdout
        found: dict[str, Any] = json.loads(out)
        return found


@dataclass
class Tenants:
    alice: Tenant
    mallory: Tenant
    shared: str
    alices: str
    logs: str  # the KWOK log namespace, where mallory is a member too


def _member(cluster: Cluster, namespace: str, account: str, home: str) -> None:
    """`account` (of namespace `home`) made a member of `namespace`."""
    role = {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "Role",
        "metadata": {"name": "member", "namespace": namespace},
        "rules": MEMBER_RULES,
    }
    binding = {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "RoleBinding",
        "metadata": {"name": f"member-{account}", "namespace": namespace},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "member"},
        "subjects": [{"kind": "ServiceAccount", "name": account, "namespace": home}],
    }
    for doc in (role, binding):
        cluster.kubectl("apply", "-f", "-", input=json.dumps(doc))


def _tenant(cluster: Cluster, home: str, name: str, directory: Path) -> Tenant:
    cluster.kubectl("-n", home, "create", "serviceaccount", name)
    token = cluster.kubectl("-n", home, "create", "token", name, "--duration=2h").stdout.strip()
    admin = json.loads(cluster.kubectl("config", "view", "--raw", "--minify", "-o", "json").stdout)
    kubeconfig = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": admin["clusters"],
        "users": [{"name": name, "user": {"token": token}}],
        "contexts": [
            {"name": name, "context": {"cluster": admin["clusters"][0]["name"], "user": name}}
        ],
        "current-context": name,
    }
    path = directory / f"{name}.kubeconfig"
    path.write_text(json.dumps(kubeconfig))
    tenant = Tenant(name, path, cluster.kubectl_path)
    # A real identity, not the admin's: it may not read another namespace's Secrets.
    denied = tenant.kubectl("-n", "default", "get", "secrets", check=False)
    assert denied.returncode != 0 and "forbidden" in denied.stderr, denied.stderr
    return tenant


@pytest.fixture(scope="module")
def tenants(cluster: Cluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Tenants]:
    if "KWOK_LOG_NAMESPACE" not in cluster.env:
        pytest.fail(
            "this cluster was started before its KWOK nodes served logs: stop it"
            " (hack/cluster/down.sh) and run again"
        )
    logs = cluster.env["KWOK_LOG_NAMESPACE"]
    cluster.kubectl("create", "namespace", logs, check=False)
    directory = tmp_path_factory.mktemp("tenants")
    with (
        fresh_namespace(cluster, "tenants-shared") as shared,
        fresh_namespace(cluster, "tenant-alice") as alices,
    ):
        alice = _tenant(cluster, alices, "alice", directory)
        mallory = _tenant(cluster, shared, "mallory", directory)
        _member(cluster, alices, "alice", alices)
        _member(cluster, shared, "alice", alices)
        _member(cluster, shared, "mallory", shared)
        _member(cluster, logs, "mallory", shared)
        try:
            yield Tenants(alice, mallory, shared, alices, logs)
        finally:
            cluster.kubectl("-n", logs, "delete", "rolebinding", "member-mallory", check=False)
            cluster.kubectl("-n", logs, "delete", "t9k", "-l", "suite=tenants", check=False)


def _template(seconds: int) -> dict[str, Any]:
    return {
        "metadata": {"annotations": {SIM_EXIT_CODE: "0", SIM_RUN_SECONDS: str(seconds)}},
        "spec": {"containers": [{"name": "worker", "image": "trainer:latest"}]},
    }


def _deepspeed(name: str, seconds: int = 3, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "batch.tensorstack.dev/v1beta1",
        "kind": "DeepSpeedJob",
        "metadata": {"name": name, "labels": {"suite": "tenants"}},
        "spec": {
            "config": {"run": {"python": ["train.py"]}},
            "worker": {"replicas": 2, "template": _template(seconds)},
            **spec,
        },
    }


def _generic(name: str, seconds: int) -> dict[str, Any]:
    return {
        "apiVersion": "batch.tensorstack.dev/v1beta1",
        "kind": "GenericJob",
        "metadata": {"name": name, "labels": {"suite": "tenants"}},
        "spec": {
            "replicaSpecs": [{"type": "worker", "replicas": 1, "template": _template(seconds)}]
        },
    }


def _condition(job: dict[str, Any], kind: str) -> dict[str, Any]:
    conditions = (job.get("status") or {}).get("conditions") or []
    return next((c for c in conditions if c["type"] == kind), {})


def _phase(tenant: Tenant, namespace: str, what: str, name: str) -> str:
    return str((tenant.get(namespace, what, name).get("status") or {}).get("phase") or "")


def _pods(tenant: Tenant, namespace: str, job: str) -> list[str]:
    out = tenant.kubectl(
        "-n", namespace, "get", "pods", "-l", f"tensorstack.dev/owner-name={job}", "-o", "name"
    ).stdout
    return out.split()


def test_a_planted_secret_naming_alices_job_is_never_mounted(
    cluster: Cluster, operator: OperatorProcess, tenants: Tenants
) -> None:
    """Alice's DeepSpeedJob is paused (no Secret made yet); mallory, a member of the same
    namespace, plants `<job>-ssh` with the job's uid as its controller and her own
    authorized_keys. Resumed, alice's job creates no pod while the plant exists
    (NameConflict), then trains to Succeeded once alice removed it, with its own Secret."""
    alice, mallory, ns = tenants.alice, tenants.mallory, tenants.shared
    name = "alice-paused"
    alice.apply(ns, _deepspeed(name, runMode={"pause": {"enabled": True}}))
    uid = mallory.get(ns, "dsj", name)["metadata"]["uid"]
    mallory.apply(
        ns,
        {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {
                "name": f"{name}-ssh",
                "ownerReferences": [
                    {
                        "apiVersion": "batch.tensorstack.dev/v1beta1",
                        "kind": "DeepSpeedJob",
                        "name": name,
                        "uid": uid,
                        "controller": True,
                    }
                ],
            },
            "stringData": {"authorized_keys": "ssh-ed25519 AAAAC3Nza... mallory"},
        },
    )
    alice.kubectl(
        "-n", ns, "patch", "dsj", name, "--type=merge",
        "-p", json.dumps({"spec": {"runMode": {"pause": {"enabled": False}}}}),
    )  # fmt: skip
    cluster.poll(
        lambda: (
            _condition(alice.get(ns, "dsj", name), "Initialized").get("reason") == "NameConflict"
        ),
        timeout=60,
        interval=0.5,
        message="alice's job says NameConflict",
    )
    assert _pods(alice, ns, name) == []
    alice.kubectl("-n", ns, "delete", "secret", f"{name}-ssh")
    cluster.poll(
        lambda: _phase(alice, ns, "dsj", name) == "Succeeded",
        timeout=90,
        message="alice's job Succeeded once the plant is gone",
    )
    own = alice.get(ns, "secret", f"{name}-ssh")
    assert own["metadata"]["ownerReferences"][0]["uid"] == uid
    assert "batch.tensorstack.dev/made-by" in own["metadata"]["annotations"]


def _lease_age(cluster: Cluster) -> float:
    """Seconds since the operator last renewed its Lease."""
    out = cluster.kubectl("-n", "default", "get", "lease", LEASE, "-o", "json").stdout
    renewed = parse_time(json.loads(out)["spec"]["renewTime"])
    return (datetime.now(UTC) - renewed).total_seconds()


def _say(cluster: Cluster, text: str) -> None:
    """Lines in the log every pod of the KWOK log namespace serves (CRI format)."""
    stamp = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    with Path(cluster.env["KWOK_LOG_FILE"]).open("a") as f:
        for line in text.splitlines():
            f.write(f"{stamp} stdout F {line}\n")


def test_a_hostile_log_stalls_neither_the_lease_nor_alices_jobs(
    cluster: Cluster, operator: OperatorProcess, tenants: Tenants
) -> None:
    """Mallory's running job prints what made Python's `re` backtrack for seconds a line
    (the built-in pattern on `step` and a long run of blanks; 16 KiB lines, 256 KiB in all,
    with no annotation at all) while alice submits jobs in her own namespace. The operator
    reads mallory's log (her report after the hostile lines reaches her status) and
    meanwhile renews its Lease on time and gives alice's jobs their pods."""
    mallory, alice = tenants.mallory, tenants.alice
    mallory.apply(tenants.logs, _generic("mallory-noisy", 300))
    cluster.poll(
        lambda: _phase(mallory, tenants.logs, "gj", "mallory-noisy") == "Running",
        timeout=60,
        message="mallory's job Running",
    )
    hostile = "\n".join(["step" + " " * 16 * 1024 + "x"] * 15 + ["a" * 40 + "!"])
    _say(cluster, hostile)
    _say(cluster, f"{MARKER} step=7 total=10")
    started = time.monotonic()
    worst_lease = 0.0
    latencies: list[float] = []
    read = False
    n = 0
    while time.monotonic() - started < 90 and not (read and n >= 3):
        worst_lease = max(worst_lease, _lease_age(cluster))
        name = f"alice-{n}"
        n += 1
        submitted = time.monotonic()
        alice.apply(tenants.alices, _generic(name, 1))
        _until_pods(cluster, alice, tenants.alices, name)
        latencies.append(time.monotonic() - submitted)
        worst_lease = max(worst_lease, _lease_age(cluster))
        progress = (mallory.get(tenants.logs, "gj", "mallory-noisy").get("status") or {}).get(
            "progress"
        ) or {}
        read = progress.get("step") == 7
        time.sleep(1)
    print(f"lease age at most {worst_lease:.1f}s; alice's pods after {latencies}")
    assert read, "mallory's report after the hostile lines never reached her status"
    assert worst_lease < LEASE_DURATION, f"the Lease went {worst_lease:.1f}s without renewal"
    assert max(latencies) < 30, latencies
    for i in range(n):
        _until_phase(cluster, alice, tenants.alices, f"alice-{i}", "Succeeded")


def _until_pods(cluster: Cluster, tenant: Tenant, namespace: str, job: str) -> None:
    cluster.poll(lambda: _pods(tenant, namespace, job), timeout=60, message=f"{job} has its pod")


def _until_phase(cluster: Cluster, tenant: Tenant, namespace: str, job: str, phase: str) -> None:
    cluster.poll(
        lambda: _phase(tenant, namespace, "gj", job) == phase,
        timeout=60,
        message=f"{job} {phase}",
    )


def _refusal(tenant: Tenant, namespace: str, doc: dict[str, Any]) -> str:
    """What the API server says refusing `doc` from `tenant` (fails if it admits it)."""
    proc = tenant.kubectl(
        "-n", namespace, "create", "--dry-run=server", "-f", "-", input=json.dumps(doc), check=False
    )
    assert proc.returncode != 0, f"admitted: {doc['metadata']['name']}"
    return proc.stderr


def test_mallorys_templates_that_reach_for_alices_job_are_refused_at_admission(
    cluster: Cluster, operator: OperatorProcess, tenants: Tenants
) -> None:
    """A template that mounts alice's job's SSH Secret or reads its hostfile, a DeepSpeedJob
    whose sshd gets a port of the node, a pod that names another job's gang: the API server
    refuses each from mallory's own identity, naming the field."""
    mallory, ns = tenants.mallory, tenants.shared
    mount = _generic("mallory-mount", 3)
    mount["spec"]["replicaSpecs"][0]["template"]["spec"]["volumes"] = [
        {"name": "keys", "secret": {"secretName": "alice-paused-ssh"}}
    ]
    said = _refusal(mallory, ns, mount)
    assert "volumes[0].secret.secretName" in said and "ending in `-ssh`" in said, said

    env = _generic("mallory-env", 3)
    env["spec"]["replicaSpecs"][0]["template"]["spec"]["containers"][0]["envFrom"] = [
        {"configMapRef": {"name": "alice-paused-hostfile"}}
    ]
    said = _refusal(mallory, ns, env)
    assert "envFrom[0].configMapRef.name" in said and "`-hostfile`" in said, said

    port = _deepspeed("mallory-port")
    port["spec"]["worker"]["template"]["spec"]["containers"][0]["ports"] = [
        {"containerPort": 22, "hostPort": 22}
    ]
    said = _refusal(mallory, ns, port)
    assert "ports[0].hostPort" in said, said

    gang = _generic("mallory-gang", 3)
    gang["spec"]["replicaSpecs"][0]["template"]["spec"]["schedulingGroup"] = {
        "podGroupName": "alice-paused"
    }
    said = _refusal(mallory, ns, gang)
    assert "schedulingGroup" in said, said


def test_mallory_cannot_skip_the_queue_by_removing_its_label(
    cluster: Cluster, operator: OperatorProcess, tenants: Tenants
) -> None:
    """Mallory's job waits in a LocalQueue whose ClusterQueue admits nothing; she removes the
    queue label (she may update her jobs). The operator keeps the Workload's queue: no pod,
    and a Warning says the label is ignored."""
    mallory, ns = tenants.mallory, tenants.shared
    cluster.kubectl(
        "apply",
        "-f",
        "-",
        input=json.dumps(
            {
                "apiVersion": "kueue.x-k8s.io/v1beta2",
                "kind": "LocalQueue",
                "metadata": {"name": "closed", "namespace": ns},
                "spec": {"clusterQueue": f"{ns}-nothing"},
            }
        ),
    )
    job = _generic("mallory-queued", 3)
    job["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] = "closed"
    mallory.apply(ns, job)
    cluster.poll(
        lambda: cluster.kubectl(
            "-n", ns, "get", "workloads.kueue.x-k8s.io", "-o", "name"
        ).stdout.strip(),
        timeout=60,
        message="mallory's job has a Workload",
    )
    mallory.kubectl("-n", ns, "label", "gj", "mallory-queued", "kueue.x-k8s.io/queue-name-")
    time.sleep(10)
    assert _pods(mallory, ns, "mallory-queued") == []
    events = cluster.kubectl(
        "-n", ns, "get", "events", "--field-selector", "reason=QueueLabelIgnored", "-o", "json"
    ).stdout
    assert any(
        e["involvedObject"]["name"] == "mallory-queued" for e in json.loads(events)["items"]
    ), "no QueueLabelIgnored Event"
    assert _pods(mallory, ns, "mallory-queued") == []


def test_a_catastrophic_progress_pattern_is_refused_by_the_operators_verdict(
    cluster: Cluster, operator: OperatorProcess, tenants: Tenants
) -> None:
    """`(a+)+$` took Python's `re` seconds on 24 characters and hours on 40. The annotation is
    no CRD field (CEL cannot read it), so the operator's verdict refuses the job, naming it,
    before any pod; alice's job beside it succeeds."""
    mallory, alice = tenants.mallory, tenants.alice
    job = _generic("mallory-pattern", 3)
    job["metadata"]["annotations"] = {"batch.tensorstack.dev/progress-pattern": "(a+)+$"}
    mallory.apply(tenants.shared, job)
    alice.apply(tenants.alices, _generic("alice-beside", 1))
    cluster.poll(
        lambda: _phase(mallory, tenants.shared, "gj", "mallory-pattern") == "Failed",
        timeout=60,
        message="mallory's job Failed",
    )
    failed = mallory.get(tenants.shared, "gj", "mallory-pattern")
    condition = _condition(failed, "Failed")
    assert condition.get("reason") == "InvalidSpec", condition
    assert "progress-pattern" in condition.get("message", ""), condition
    assert _pods(mallory, tenants.shared, "mallory-pattern") == []
    _until_phase(cluster, alice, tenants.alices, "alice-beside", "Succeeded")
