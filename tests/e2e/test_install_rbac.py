"""The Helm chart's RBAC on the local control plane: enough, and no more.

The chart is rendered with `helm template` and applied without its Deployment (there is no
image to run here). `t9kjobs operator` then runs as the Deployment's pod would: the
Deployment's own args, the chart ServiceAccount's token in the in-cluster files, a read-only
root filesystem and no privilege escalation (a private mount namespace), and t9k-jobs
installed the Dockerfile's way (its build context, a fresh virtualenv, `pip install .`).

* Enough: a job of each kind completes, children follow spec changes (updates and deletions
  of Services, PodGroups, TensorBoards, hostfiles, a queued job's Workload made again when its
  pods change), and the API server refused nothing. The chart runs with `kueue.enabled`:
  the GenericJob waits in a Kueue queue (the cluster runs Kueue, docs/cluster.md).
* No more: the API server's audit log (`T9KJOBS_AUDIT=1`, docs/cluster.md) lists every
  request of the ServiceAccount; each verb the ClusterRole and the Role grant was used, but
  for the few listed in NOT_EXERCISED with the reason no run here can show them.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from t9kjobs.testing.harness.process import ServerProcess
from t9kjobs.testing.harness.simulation import simulate, without_claims
from tests.repo import REPO
from tests.unit.deploy.chart import CHART, CLUSTER_WIDE, install_tool, render_chart
from tests.unit.deploy.dockerfile import build_context
from tests.waiting import until

Obj = dict[str, Any]
Triple = tuple[str, str, str]  # (API group, resource[/subresource], verb)

EXAMPLES = [
    "examples/colossalaijob/minimal.yaml",
    "examples/deepspeedjob/gpt-pretrain.yaml",
    "examples/genericjob/torch-ddp.yaml",
    "examples/pytorchtrainingjob/master-worker.yaml",
]
JOB_PLURALS = ("colossalaijobs", "deepspeedjobs", "genericjobs", "pytorchtrainingjobs")

# Granted, needed, and never requested in these runs, each for a reason.
NOT_EXERCISED: dict[Triple, str] = {
    **{
        ("batch.tensorstack.dev", f"{plural}/finalizers", "update"): (
            "checked by the OwnerReferencesPermissionEnforcement admission plugin (OpenShift"
            " enables it) when a child naming its job with blockOwnerDeletion is created;"
            " the local API server does not enable it, and it is no request of its own"
        )
        for plural in JOB_PLURALS
    },
    ("", "secrets", "delete"): (
        "the engine deletes any child a plugin no longer asks for; the bundled plugins ask"
        " for their SSH Secret for the job's whole life"
    ),
    ("", "configmaps", "delete"): (
        "as for Secrets: the bundled plugins' hostfile ConfigMaps change, never go away"
    ),
    ("kueue.x-k8s.io", "workloads", "update"): (
        "adopting a prebuilt Workload (MultiKueue's copy on a worker cluster): no job of this"
        " tier carries the prebuilt label; tests/e2e/test_kueue.py and test_multikueue.py"
        " adopt one under the operator's own identity"
    ),
}

# Other components' kinds, as stand-ins: the operator creates PodGroups and TensorBoards only
# when the cluster serves them.
STAND_IN_CRDS = [
    ("scheduler.tensorstack.dev", "PodGroup", "podgroups"),
    ("tensorstack.dev", "TensorBoard", "tensorboards"),
]

SA_FILES = Path("/var/run/secrets/kubernetes.io/serviceaccount")
# A pod's view, made in a private mount namespace: the ServiceAccount's files where the
# in-cluster configuration reads them, then the root filesystem read-only (this mount
# namespace only), then no_new_privs (allowPrivilegeEscalation: false).
POD_SHELL = f"""
mount -t tmpfs -o size=1m,mode=755 tmpfs /run
mkdir -p {SA_FILES}
cp "$T9KJOBS_SA_DIR"/token "$T9KJOBS_SA_DIR"/ca.crt "$T9KJOBS_SA_DIR"/namespace {SA_FILES}/
mount -o remount,bind,ro /
exec setpriv --no-new-privs -- "$@"
"""
POD_NAMESPACE = [
    "unshare",
    "--mount",
    "--propagation",
    "private",
    "--",
    "sh",
    "-ec",
    POD_SHELL,
    "sh",
]


def kubectl_json(cluster: Any, *args: str) -> Any:
    return json.loads(cluster.kubectl(*args, "-o", "json").stdout)


def create_namespace(cluster: Any, prefix: str) -> str:
    name = f"{prefix}-{uuid.uuid4().hex[:6]}"
    cluster.kubectl("create", "namespace", name)
    # Pods are refused until kube-controller-manager made the namespace's default account.
    cluster.poll(
        lambda: (
            cluster.kubectl("get", "serviceaccount", "default", "-n", name, check=False).returncode
            == 0
        ),
        timeout=60,
        message=f"ServiceAccount {name}/default",
    )
    return name


def image_like_install(root: Path) -> Path:
    """The Dockerfile's install: its build context, a new virtualenv, `pip install .` (not
    editable; pip compiles the bytecode). The virtualenv's bin dir."""
    context = build_context(root / "context")
    subprocess.run([sys.executable, "-m", "venv", str(root / "venv")], check=True)
    pip = [str(root / "venv" / "bin" / "pip"), "--disable-pip-version-check", "--quiet"]
    subprocess.run([*pip, "install", str(context)], check=True)
    return root / "venv" / "bin"


@dataclass
class Installation:
    namespace: str  # the release namespace
    account: str  # the ServiceAccount's name
    objects: list[Obj]  # the rendered chart, CRDs excluded
    sa_dir: Path  # token, ca.crt, namespace: what a pod of the account gets

    @property
    def username(self) -> str:
        return f"system:serviceaccount:{self.namespace}:{self.account}"

    def deployment_args(self) -> list[str]:
        deployment = next(o for o in self.objects if o["kind"] == "Deployment")
        return list(deployment["spec"]["template"]["spec"]["containers"][0]["args"])

    def granted(self) -> set[Triple]:
        return {
            (group, resource, verb)
            for role in self.objects
            if role["kind"] in ("ClusterRole", "Role")
            for rule in role["rules"]
            for group in rule["apiGroups"]
            for resource in rule["resources"]
            for verb in rule["verbs"]
        }


@pytest.fixture(scope="module")
def installation(cluster: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Installation]:
    """The chart applied (CRDs, RBAC, Service; not the Deployment) in a fresh namespace."""
    audit_log = cluster.env.get("AUDIT_LOG")
    assert audit_log, (
        f"the cluster at {cluster.dir} runs without an audit log: stop it"
        " (make cluster-down) and let the tests start it, or start it with T9KJOBS_AUDIT=1"
    )
    namespace = create_namespace(cluster, "t9k-system")
    # Progress read every second: a job's first read waits one interval (issue #50), and the
    # jobs here run seconds, so the default 30 s would never use `pods/log get`.
    values = {**CLUSTER_WIDE, "kueue": {"enabled": True}, "progress": {"interval": 1, "qps": 5}}
    # No Deployment is applied, so no replica would answer the admission webhook (which needs
    # no right: tests/e2e/test_webhook.py).
    values["webhook"] = {"enabled": False}
    objects = render_chart(install_tool("helm"), values, namespace=namespace)
    created_crds: list[str] = []
    try:
        cluster.kubectl("apply", "--server-side", "--force-conflicts", "-f", str(CHART / "crds"))
        for group, kind, plural in STAND_IN_CRDS:
            name = f"{plural}.{group}"
            if cluster.kubectl("get", "crd", name, check=False).returncode != 0:
                cluster.kubectl(
                    "create", "-f", "-", input=yaml.safe_dump(stand_in_crd(group, kind, plural))
                )
                created_crds.append(name)
        cluster.kubectl("wait", "--for=condition=Established", "--timeout=60s", "crd", "--all")
        applied = [o for o in objects if o["kind"] != "Deployment"]
        cluster.kubectl("apply", "-f", "-", input=yaml.safe_dump_all(applied))
        account = next(o for o in objects if o["kind"] == "ServiceAccount")["metadata"]["name"]
        sa_dir = tmp_path_factory.mktemp("serviceaccount")
        token = cluster.kubectl("create", "token", account, "-n", namespace, "--duration=2h")
        (sa_dir / "token").write_text(token.stdout.strip())
        shutil.copy(cluster.dir / "pki" / "ca.crt", sa_dir / "ca.crt")
        (sa_dir / "namespace").write_text(namespace)
        yield Installation(namespace, account, objects, sa_dir)
    finally:
        cluster.kubectl("delete", "namespace", namespace, "--wait=false", check=False)
        for o in objects:
            # Cluster-wide: the rights, and the queue label's admission policy (kueue.enabled).
            if o["kind"] in (
                "ClusterRole",
                "ClusterRoleBinding",
                "ValidatingAdmissionPolicy",
                "ValidatingAdmissionPolicyBinding",
            ):
                cluster.kubectl("delete", o["kind"], o["metadata"]["name"], check=False)
        # Waited for: an operator of a later test must not find PodGroups served (its
        # gang-scheduled pods would wait for a T9k scheduler that does not run here).
        for name in created_crds:
            cluster.kubectl("delete", "crd", name, "--timeout=90s", check=False)


KUEUE_QUEUE = "e2e-install"
KUEUE_OBJECTS = f"""
apiVersion: kueue.x-k8s.io/v1beta2
kind: ResourceFlavor
metadata: {{name: {KUEUE_QUEUE}}}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata: {{name: {KUEUE_QUEUE}}}
spec:
  namespaceSelector: {{matchExpressions: [{{key: kubernetes.io/metadata.name, operator: In,
    values: [{{namespaces}}]}}]}}
  resourceGroups:
  - coveredResources: [cpu, memory, nvidia.com/gpu]
    flavors:
    - name: {KUEUE_QUEUE}
      resources:
      - {{name: cpu, nominalQuota: "1000"}}
      - {{name: memory, nominalQuota: 10Ti}}
      - {{name: nvidia.com/gpu, nominalQuota: "1000"}}
"""


@pytest.fixture(scope="module")
def kueue_namespaces(cluster: Any) -> Iterator[list[str]]:
    """Two namespaces whose LocalQueue `main` feeds a ClusterQueue with room for every job."""
    namespaces = [create_namespace(cluster, "e2e-install"), create_namespace(cluster, "e2e-ic")]
    cluster.kubectl(
        "apply", "-f", "-", input=KUEUE_OBJECTS.replace("{namespaces}", ", ".join(namespaces))
    )
    for ns in namespaces:
        local = {
            "apiVersion": "kueue.x-k8s.io/v1beta2",
            "kind": "LocalQueue",
            "metadata": {"name": "main", "namespace": ns},
            "spec": {"clusterQueue": KUEUE_QUEUE},
        }
        cluster.kubectl("apply", "-f", "-", input=yaml.safe_dump(local))
    try:
        yield namespaces
    finally:
        for ns in namespaces:
            cluster.kubectl("delete", "namespace", ns, "--wait=false", check=False)
        cluster.kubectl("delete", "-f", "-", input=KUEUE_OBJECTS, check=False)


def stand_in_crd(group: str, kind: str, plural: str) -> Obj:
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{plural}.{group}"},
        "spec": {
            "group": group,
            "names": {
                "kind": kind,
                "listKind": f"{kind}List",
                "plural": plural,
                "singular": kind.lower(),
            },
            "scope": "Namespaced",
            "versions": [
                {
                    "name": "v1beta1",
                    "served": True,
                    "storage": True,
                    "schema": {
                        "openAPIV3Schema": {
                            "type": "object",
                            "x-kubernetes-preserve-unknown-fields": True,
                        }
                    },
                }
            ],
        },
    }


class PodOperator(ServerProcess):
    """`t9kjobs` of an image-like install, run with the chart Deployment's args as its pod."""

    def __init__(self, cluster: Any, bin_dir: Path, install: Installation, log: Path) -> None:
        super().__init__()
        args = []
        for arg in install.deployment_args():
            flag = arg.partition("=")[0]
            if flag == "--metrics-bind-address":  # pods have their own network; we share one
                arg = f"{flag}=127.0.0.1:{self.metrics_port}"
            elif flag == "--health-probe-bind-address":
                arg = f"{flag}=127.0.0.1:{self.health_port}"
            args.append(arg)
        env = {
            "PATH": os.environ["PATH"],
            "HOME": "/nonexistent",  # no ~/.kube/config: the in-cluster configuration
            "PYTHONDONTWRITEBYTECODE": "1",  # as the image sets it
            "PYTHONUNBUFFERED": "1",
            "KUBERNETES_SERVICE_HOST": "127.0.0.1",
            "KUBERNETES_SERVICE_PORT": cluster.env["APISERVER_PORT"],
            "T9KJOBS_SA_DIR": str(install.sa_dir),
        }
        self.launch([*POD_NAMESPACE, str(bin_dir / "t9kjobs"), "operator", *args], log, env)

    def wait_leading(self, timeout: float = 90) -> None:
        """Ready is not enough: a standby is ready too. Wait until it leads and has synced."""

        def leads() -> bool:
            assert not self.exited(), f"operator exited: {self.log_tail()}"
            metrics = self.get("/metrics", self.metrics_port)[1]
            return "t9kjobs_leader 1.0" in metrics and self.ready()

        until(
            leads,
            timeout,
            interval=0.5,
            what=lambda: f"the operator to lead; its log ends:\n{self.log_tail()}",
            retry=OSError,
        )


@pytest.fixture(scope="module")
def pod_operator(
    cluster: Any, installation: Installation, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[PodOperator]:
    root = tmp_path_factory.mktemp("image")
    op = PodOperator(cluster, image_like_install(root), installation, root / "operator.log")
    try:
        op.wait_leading()
        yield op
    finally:
        op.stop()


def phase(cluster: Any, doc: Obj) -> str | None:
    meta = doc["metadata"]
    status = kubectl_json(
        cluster, "get", doc["kind"].lower(), meta["name"], "-n", meta["namespace"]
    )
    return (status.get("status") or {}).get("phase")


@pytest.fixture(scope="module")
def completed_jobs(
    cluster: Any, pod_operator: PodOperator, kueue_namespaces: list[str]
) -> dict[str, str | None]:
    """One example of each kind, its pods running 2 s (the GenericJob's once Kueue admitted
    it); the phase each ends in."""
    namespace = kueue_namespaces[0]
    jobs = []
    for path in EXAMPLES:
        doc = without_claims(yaml.safe_load((REPO / path).read_text()))
        doc["metadata"]["namespace"] = namespace
        # No T9k scheduler runs here to bind gang-scheduled pods (the PodGroup CRD is a stand-in).
        doc["spec"].pop("scheduler", None)
        if doc["kind"] == "GenericJob":
            doc["metadata"].setdefault("labels", {})["kueue.x-k8s.io/queue-name"] = "main"
        jobs.append(simulate(doc, exit_code=0, seconds=4))  # long enough for a progress read
    cluster.kubectl("apply", "-f", "-", input=yaml.safe_dump_all(jobs))

    phases: dict[str, str | None] = {}

    def finished() -> bool:
        phases.update({d["kind"]: phase(cluster, d) for d in jobs})
        return all(p in ("Succeeded", "Failed") for p in phases.values())

    def workload_finished() -> bool:
        workload = kubectl_json(cluster, "get", "workloads.kueue.x-k8s.io", "-n", namespace)
        return any(
            c["type"] == "Finished" and c["status"] == "True"
            for w in workload.get("items") or []
            for c in (w.get("status") or {}).get("conditions") or []
        )

    try:
        cluster.poll(finished, timeout=240, interval=1, message="every job finished")
        cluster.poll(workload_finished, timeout=60, interval=1, message="its Workload Finished")
        return phases
    except AssertionError as exc:
        raise AssertionError(f"{exc}: {phases}\n{pod_operator.log_tail()}") from exc


CHANGING_JOBS = """
apiVersion: batch.tensorstack.dev/v1beta1
kind: GenericJob
metadata: {name: gj}
spec:
  service: {ports: [{name: http, port: 2222}]}
  scheduler: {t9kScheduler: {queue: default, priority: 0}}
  replicaSpecs:
  - type: worker
    replicas: 1
    template: {spec: {containers: [{name: worker, image: busybox, command: [sleep, inf]}]}}
---
apiVersion: batch.tensorstack.dev/v1beta1
kind: PyTorchTrainingJob
metadata: {name: pt}
spec:
  tensorboardSpec: {logDir: /logs/a}
  replicaSpecs:
  - type: master
    replicas: 1
    template: {spec: {containers: [{name: pytorch, image: pytorch, command: [python, train.py]}]}}
---
apiVersion: batch.tensorstack.dev/v1beta1
kind: DeepSpeedJob
metadata: {name: ds}
spec:
  elastic: {enabled: true, minReplicas: 1, maxReplicas: 3, expectedReplicas: 2}
  config: {slotsPerWorker: 1, run: {python: [train.py]}}
  worker: {template: {spec: {containers: [{name: worker, image: deepspeed}]}}}
---
apiVersion: batch.tensorstack.dev/v1beta1
kind: GenericJob
metadata: {name: qj, labels: {kueue.x-k8s.io/queue-name: main}}
spec:
  replicaSpecs:
  - type: worker
    replicas: 1
    template: {spec: {containers: [{name: worker, image: busybox, command: [sleep, inf]}]}}
"""


@pytest.fixture(scope="module")
def spec_changes(cluster: Any, pod_operator: PodOperator, kueue_namespaces: list[str]) -> list[str]:
    """Jobs whose specs change while they run; the steps their children followed."""
    ns = kueue_namespaces[1]
    cluster.kubectl("apply", "-n", ns, "-f", "-", input=CHANGING_JOBS)

    def get(*args: str) -> Obj | None:
        proc = cluster.kubectl("get", *args, "-n", ns, "-o", "json", check=False)
        return json.loads(proc.stdout) if proc.returncode == 0 else None

    def hostfile_lines() -> int:
        cm = get("configmap", "ds-hostfile") or {}
        return sum(len(v.splitlines()) for v in (cm.get("data") or {}).values())

    def patch(kind: str, name: str, spec: Obj) -> None:
        body = json.dumps({"spec": spec})
        cluster.kubectl("patch", kind, name, "-n", ns, "--type=merge", "-p", body)

    def wait(what: str, check: Any) -> str:
        cluster.poll(check, timeout=120, interval=0.5, message=what)
        return what

    steps = []
    try:
        steps.append(
            wait(
                "children created",
                lambda: (
                    get("service", "gj-worker-0")
                    and get("podgroups.scheduler.tensorstack.dev", "gj")
                    and get("tensorboard", "pt")
                    and hostfile_lines() == 2
                    and get("pod", "qj-worker-0")
                ),
            )
        )
        patch("genericjob", "gj", {"service": {"ports": [{"name": "http", "port": 2223}]}})
        patch("genericjob", "gj", {"scheduler": {"t9kScheduler": {"priority": 1}}})
        patch("pytorchtrainingjob", "pt", {"tensorboardSpec": {"logDir": "/logs/b"}})
        patch("deepspeedjob", "ds", {"elastic": {"expectedReplicas": 1}})
        qj = get("genericjob", "qj") or {}
        specs = qj["spec"]["replicaSpecs"]
        specs[0]["replicas"] = 2  # its Workload is made again, with 2 pods
        patch("genericjob", "qj", {"replicaSpecs": specs})
        steps.append(
            wait(
                "children updated",
                lambda: (
                    (get("service", "gj-worker-0") or {})
                    .get("spec", {})
                    .get("ports", [{}])[0]
                    .get("port")
                    == 2223
                    and (get("podgroups.scheduler.tensorstack.dev", "gj") or {})
                    .get("spec", {})
                    .get("priority")
                    == 1
                    and (get("tensorboard", "pt") or {}).get("spec", {}).get("logDir") == "/logs/b"
                    and hostfile_lines() == 1
                    and get("pod", "qj-worker-1")
                    and (get("workloads.kueue.x-k8s.io", "genericjob-qj") or {})
                    .get("spec", {})
                    .get("podSets", [{}])[0]
                    .get("count")
                    == 2
                ),
            )
        )
        patch("genericjob", "gj", {"service": None, "scheduler": None})
        patch("pytorchtrainingjob", "pt", {"tensorboardSpec": None})
        steps.append(
            wait(
                "children deleted",
                lambda: (
                    get("service", "gj-worker-0") is None
                    and get("podgroups.scheduler.tensorstack.dev", "gj") is None
                    and get("tensorboard", "pt") is None
                ),
            )
        )
        return steps
    finally:
        cluster.kubectl("delete", "t9k", "--all", "-n", ns, "--wait=false", check=False)


def audit_events(cluster: Any, username: str) -> list[Obj]:
    events = []
    for line in Path(cluster.env["AUDIT_LOG"]).read_text().splitlines():
        try:
            event = json.loads(line)
        except ValueError:  # a line being written
            continue
        if event.get("user", {}).get("username") == username:
            events.append(event)
    assert events, f"no request of {username} in the audit log"
    return events


def decision(event: Obj) -> str:
    return str((event.get("annotations") or {}).get("authorization.k8s.io/decision", ""))


def test_a_job_of_each_kind_completes_under_the_charts_identity(
    completed_jobs: dict[str, str | None],
) -> None:
    assert completed_jobs == {
        "ColossalAIJob": "Succeeded",
        "DeepSpeedJob": "Succeeded",
        "GenericJob": "Succeeded",
        "PyTorchTrainingJob": "Succeeded",
    }


def test_children_follow_spec_changes_under_the_charts_identity(spec_changes: list[str]) -> None:
    assert spec_changes == ["children created", "children updated", "children deleted"]


def test_the_api_server_refused_nothing_and_discovery_needs_no_rule(
    cluster: Any,
    installation: Installation,
    completed_jobs: dict[str, str | None],
    spec_changes: list[str],
) -> None:
    events = audit_events(cluster, installation.username)
    refused = sorted(
        {(e["verb"], e["requestURI"].split("?")[0]) for e in events if decision(e) == "forbid"}
    )
    assert refused == []
    discovery = [e for e in events if "objectRef" not in e]
    assert {e["requestURI"] for e in discovery} >= {
        "/apis/batch.tensorstack.dev/v1beta1",
        "/apis/scheduler.tensorstack.dev/v1beta1",
        "/apis/tensorstack.dev/v1beta1",
        "/apis/kueue.x-k8s.io/v1beta2",
    }
    assert {decision(e) for e in discovery} == {"allow"}


def test_every_granted_verb_is_used(
    cluster: Any,
    installation: Installation,
    pod_operator: PodOperator,
    completed_jobs: dict[str, str | None],
    spec_changes: list[str],
) -> None:
    used = {
        (
            e["objectRef"].get("apiGroup", ""),
            e["objectRef"]["resource"]
            + (f"/{e['objectRef']['subresource']}" if e["objectRef"].get("subresource") else ""),
            e["verb"],
        )
        for e in audit_events(cluster, installation.username)
        if "objectRef" in e and decision(e) == "allow"
    }
    granted = installation.granted()
    assert ("coordination.k8s.io", "leases", "update") in used  # the leader renewed its Lease
    unused = granted - used
    assert sorted(unused - set(NOT_EXERCISED)) == [], "granted but never used: drop from the chart"
    now_used = sorted(set(NOT_EXERCISED) & used)
    assert now_used == [], "exercised now: remove from NOT_EXERCISED"
    assert set(NOT_EXERCISED) <= granted
