"""`t9kjobs.client` against the local control plane and the operator, on KWOK nodes: every
method on every kind, a third-party kind (the plugin template's MPIJob) and a third-party
feature plugin (examples/feature-plugin: a PodDisruptionBudget per job, its option given to the
operator), both from packages installed apart, the three ways to connect, the refusals as exceptions; and training progress in the status, read by the operator
from a log the KWOK nodes serve (hack/cluster/kwok/start.sh: the pods of one namespace get
the lines of one file, which this test writes).

The same on the real node, with real training: tests/real/test_progress.py.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client as k8s_client
from kubernetes import config as k8s_config

from t9kjobs.client import (
    Client,
    Forbidden,
    JobEnded,
    JobExists,
    JobInvalid,
    JobNotFound,
    NoCluster,
    NoLog,
    WaitTimeout,
)
from t9kjobs.kube.resources import job_resource
from t9kjobs.manager import load_plugins
from t9kjobs.progress import MARKER
from t9kjobs.testing.harness.simulation import SIM_EXIT_CODE, SIM_RUN_SECONDS
from tests import waiting
from tests.cluster import Cluster, fresh_namespace
from tests.operators import OperatorProcess
from tests.repo import REPO

# Progress is read every second here, so that the test waits seconds, not the default 30. The
# last is the feature plugin's own option (examples/feature-plugin), parsed because it is loaded.
OPERATOR_ARGS = ("--progress-interval", "1", "--progress-qps", "20", "--pdb-min-available=2")
VENV_BIN = Path(sys.executable).parent


def template(seconds: int, exit_code: int = 0) -> dict[str, Any]:
    return {
        "metadata": {"annotations": {SIM_EXIT_CODE: str(exit_code), SIM_RUN_SECONDS: str(seconds)}},
        "spec": {"containers": [{"name": "trainer", "image": "busybox", "command": ["train"]}]},
    }


def manifest(kind: str, name: str, seconds: int = 3, exit_code: int = 0) -> dict[str, Any]:
    pods = template(seconds, exit_code)
    spec: dict[str, Any] = {
        "GenericJob": {"replicaSpecs": [{"type": "worker", "replicas": 2, "template": pods}]},
        "PyTorchTrainingJob": {
            "replicaSpecs": [{"type": "worker", "replicas": 2, "template": pods}]
        },
        "DeepSpeedJob": {
            "config": {"run": {"python": ["train.py"]}},
            "worker": {"replicas": 2, "template": pods},
        },
        "ColossalAIJob": {
            "torchConfig": {"script": ["train.py"]},
            "replicaSpecs": [{"type": "worker", "replicas": 2, "template": pods}],
        },
    }[kind]
    return {
        "apiVersion": "batch.tensorstack.dev/v1beta1",
        "kind": kind,
        "metadata": {"name": name, "labels": {"suite": "client"}},
        "spec": spec,
    }


@pytest.fixture(scope="module")
def mpijob_plugin(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The plugin template and the feature plugin installed apart, as a third party's plugins
    are (`make conformance` installs them the same way)."""
    target = tmp_path_factory.mktemp("plugin-template")
    for example in ("plugin-template", "feature-plugin"):
        source = tmp_path_factory.mktemp("src") / example
        subprocess.run(["cp", "-r", str(REPO / "examples" / example), str(source)], check=True)
        subprocess.run(
            [
                sys.executable,
                "-m",
                "pip",
                "install",
                "--quiet",
                "--no-build-isolation",
                "--no-deps",
                "--target",
                str(target),
                str(source),
            ],
            check=True,
        )
    return target


@pytest.fixture(scope="module")
def before_operator(cluster: Cluster, mpijob_plugin: Path) -> dict[str, str]:
    """The CRD of MPIJob installed beside the bundled kinds', and the module's operator made to
    load the MPIJob and PodDisruptionBudget plugins too (its environment)."""
    # The tree under test stays first on the path (a worktree's own, when PYTHONPATH names it).
    path = [str(mpijob_plugin), *filter(None, [os.environ.get("PYTHONPATH")])]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(path)}
    crd = subprocess.run(
        [str(VENV_BIN / "t9kjobs"), "crds", "--stdout"],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    cluster.kubectl("apply", "--server-side", "--force-conflicts", "-f", "-", input=crd)
    cluster.kubectl("wait", "--for=condition=Established", "crd/mpijobs.batch.tensorstack.dev")
    return env


@pytest.fixture(scope="module")
def client(cluster: Cluster, operator: OperatorProcess, mpijob_plugin: Path) -> Iterator[Client]:
    # The plugin found as an installed one is, for this module only: the tiers after it in the
    # same run load the plugins again and must not find MPIJob.
    sys.path.insert(0, str(mpijob_plugin))
    try:
        yield Client(kubeconfig=cluster.kubeconfig, plugins=load_plugins())
    finally:
        sys.path.remove(str(mpijob_plugin))


@pytest.fixture
def ns(cluster: Cluster, request: pytest.FixtureRequest) -> Iterator[str]:
    with fresh_namespace(cluster, request.node.name) as name:
        yield name


KINDS = ["GenericJob", "PyTorchTrainingJob", "DeepSpeedJob", "ColossalAIJob"]


@pytest.mark.parametrize("kind", KINDS)
def test_create_get_list_wait_events_delete(client: Client, ns: str, kind: str) -> None:
    seen: list[str | None] = []
    job = client.create(manifest(kind, "ok"), namespace=ns)
    assert (job.kind, job.name, job.namespace) == (kind, "ok", ns)
    assert type(job.spec).__name__ != "JobSpec"  # the plugin's own model
    done = client.wait(
        job, timeout=120, interval=0.5, callback=lambda j: seen.append(j.status.phase)
    )
    assert done.status.phase == "Succeeded" and seen[-1] == "Succeeded" and len(seen) >= 2
    assert client.get(kind, "ok", namespace=ns).status.phase == "Succeeded"
    listed = client.list(kind, namespace=ns, labels={"suite": "client"})
    assert [j.name for j in listed] == ["ok"]
    assert client.list(kind, namespace=ns, labels="suite=other") == []
    assert [j.name for j in client.list(namespace=ns)] == ["ok"]  # every kind
    assert any(j.namespace == ns for j in client.list(kind, all_namespaces=True))
    events = client.events(job)
    assert {(e.about, e.reason) for e in events} >= {("Pod/ok-worker-0", "Scheduled")}, events
    assert all(
        e.about in {"GenericJob/ok", f"{kind}/ok"} or e.about.startswith("Pod/ok-") for e in events
    )
    client.delete(job, wait=True, timeout=60)
    with pytest.raises(JobNotFound, match=f"{kind}/ok not found in namespace {ns}"):
        client.get(job)


def test_a_third_party_kind(client: Client, ns: str) -> None:
    assert "MPIJob" in client.kinds()
    doc = yaml.safe_load((REPO / "examples/plugin-template/examples/pi.yaml").read_text())
    for role in ("launcher", "worker"):
        doc["spec"][role]["template"].setdefault("metadata", {})["annotations"] = {
            SIM_EXIT_CODE: "0",
            SIM_RUN_SECONDS: "2",
        }
    job = client.create(doc, namespace=ns)
    assert job.kind == "MPIJob" and type(job.spec).__name__ == "MPIJobSpec"
    done = client.wait("mpijob/mpi-pi", namespace=ns, timeout=120, interval=0.5)
    assert done.status.phase == "Succeeded"
    bad = dict(doc, metadata={"name": "bad"})
    bad["spec"] = dict(doc["spec"], slotsPerWorker=0)
    with pytest.raises(JobInvalid) as refused:
        client.create(bad, namespace=ns)
    assert "spec.slotsPerWorker" in refused.value.fields
    client.delete(job, wait=True)


def test_a_third_party_feature_plugin(client: Client, cluster: Cluster, ns: str) -> None:
    """examples/feature-plugin, loaded from its own package: the operator took its option
    (`--pdb-min-available=2`), watches the kind it declares and gives each job a budget."""
    job = client.create(manifest("GenericJob", "kept", seconds=600), namespace=ns)
    client.wait("gj/kept", namespace=ns, phase="Running", timeout=60, interval=0.5)

    def budget() -> Any:
        found = cluster.kubectl("get", "pdb", "-n", ns, "-o", "json").stdout
        items = json.loads(found)["items"]
        return items[0] if items else None

    pdb = waiting.until(budget, 60, what="the job's PodDisruptionBudget")
    assert pdb["metadata"]["name"] == "kept"
    assert pdb["spec"]["minAvailable"] == 2
    assert pdb["spec"]["selector"]["matchLabels"] == {
        "tensorstack.dev/owner-kind": "GenericJob",
        "tensorstack.dev/owner-name": "kept",
    }
    [owner] = pdb["metadata"]["ownerReferences"]
    assert (owner["kind"], owner["name"], owner["uid"]) == ("GenericJob", "kept", job.metadata.uid)
    # The budget covers the job's pods, as the API server counts them.
    waiting.until(
        lambda: (budget() or {}).get("status", {}).get("expectedPods") == 2,
        60,
        what="the budget counting the job's 2 pods",
    )
    client.delete(job, wait=True)


def test_waits_that_end_otherwise(client: Client, ns: str) -> None:
    client.create(manifest("GenericJob", "slow", seconds=600), namespace=ns)
    with pytest.raises(WaitTimeout, match=r"GenericJob/slow is still \w+ after 2s"):
        client.wait("gj/slow", namespace=ns, timeout=2, interval=0.5)
    running = client.wait("gj/slow", namespace=ns, phase="Running", timeout=60, interval=0.5)
    assert running.status.phase == "Running"
    client.create(manifest("GenericJob", "broken", seconds=1, exit_code=3), namespace=ns)
    with pytest.raises(JobEnded, match="GenericJob/broken Failed: ReplicaFailed, while waiting"):
        client.wait("gj/broken", namespace=ns, phase="Succeeded", timeout=60, interval=0.5)
    # With no phase, a wait is for success too (docs/python.md's walkthrough); both, when asked.
    with pytest.raises(JobEnded, match=r"Failed: ReplicaFailed, while waiting for Succeeded$"):
        client.wait("gj/broken", namespace=ns, timeout=60, interval=0.5)
    either = client.wait("gj/broken", namespace=ns, phase=("Succeeded", "Failed"), timeout=60)
    assert either.status.phase == "Failed"
    assert ("GenericJob/broken", "Failed") in {
        (e.about, e.reason) for e in client.events("gj/broken", namespace=ns)
    }


def test_pause_and_resume(client: Client, ns: str) -> None:
    client.create(manifest("GenericJob", "long", seconds=600), namespace=ns)
    client.wait("gj/long", namespace=ns, phase="Running", timeout=60, interval=0.5)
    paused = client.pause("gj/long", namespace=ns)
    assert paused.spec.lifecycle().run_mode.paused
    client.wait("gj/long", namespace=ns, phase="Paused", timeout=60, interval=0.5)
    # Paused is written when the pods are asked to stop; they go within their grace period
    # (a loaded machine takes longer): wait for that effect, not for an instant.
    waiting.until(
        lambda: client.describe("gj/long", namespace=ns)["cleanup"]["remainingPods"] == [],
        60,
        what="no pod of the paused job left",
    )
    client.resume("gj/long", namespace=ns)
    client.wait("gj/long", namespace=ns, phase="Running", timeout=60, interval=0.5)


def test_refusals(client: Client, cluster: Cluster, ns: str) -> None:
    doc = manifest("GenericJob", "twice", seconds=600)
    client.create(doc, namespace=ns)
    with pytest.raises(JobExists, match=f"GenericJob/twice in namespace {ns} exists already"):
        client.create(doc, namespace=ns)
    bad = manifest("GenericJob", "bad")
    bad["spec"]["replicaSpecs"][0]["replicas"] = -1
    with pytest.raises(JobInvalid, match=r"spec\.replicaSpecs\[0\]\.replicas: must be >= 0"):
        client.create(bad, namespace=ns)  # refused before anything is sent
    # The API server's own refusal of the same field, through the client's one error boundary.
    info = client.ref("gj/bad", namespace=ns).info
    with pytest.raises(JobInvalid) as refused:
        client.reader.call(
            "POST", job_resource(info).path(ns), f"GenericJob/bad in namespace {ns}", body=bad
        )
    assert refused.value.fields == ["spec.replicaSpecs[0].replicas"], refused.value
    with pytest.raises(JobNotFound):
        client.get("gj/none", namespace=ns)
    # A user without rights: the API's Forbidden, with its reason.
    cluster.kubectl("-n", ns, "create", "serviceaccount", "nobody")
    nobody = Client(kubeconfig=cluster.kubeconfig, plugins=client.plugins, namespace=ns)
    nobody.reader.transport.impersonate = f"system:serviceaccount:{ns}:nobody"
    with pytest.raises(Forbidden, match="forbidden"):
        nobody.list("gj")
    nowhere = k8s_client.Configuration(host="https://127.0.0.1:9")
    with pytest.raises(NoCluster, match="cannot reach the API server"):
        Client(api_client=nowhere, plugins=client.plugins).get("gj/twice", namespace=ns)


def test_the_three_ways_to_connect(
    client: Client, cluster: Cluster, ns: str, tmp_path: Path
) -> None:
    client.create(manifest("GenericJob", "reach", seconds=600), namespace=ns)
    # An explicit kubernetes ApiClient.
    api = k8s_config.new_client_from_config(str(cluster.kubeconfig))
    assert Client(api_client=api, namespace=ns).get("gj/reach").name == "reach"
    # The kubeconfig named by $KUBECONFIG, and its context's namespace.
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_bytes(Path(cluster.kubeconfig).read_bytes())
    cluster.kubectl(
        "--kubeconfig", str(kubeconfig), "config", "set-context", "--current", f"--namespace={ns}"
    )
    out = subprocess.run(
        [
            sys.executable,
            "-c",
            "from t9kjobs.client import Client; c = Client();"
            " print(c.namespace, c.get('gj/reach').name)",
        ],
        env={**os.environ, "KUBECONFIG": str(kubeconfig)},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == [ns, "reach"]
    # In a cluster: a service account's token and the cluster CA where a pod has them, no
    # kubeconfig (the paths are the client library's, pointed into a directory here).
    cluster.kubectl("-n", ns, "create", "serviceaccount", "reader")
    cluster.kubectl(
        "create",
        "clusterrole",
        f"read-jobs-{ns}",
        "--verb=get,list",
        "--resource=genericjobs.batch.tensorstack.dev",
    )
    cluster.kubectl(
        "create",
        "rolebinding",
        "read-jobs",
        "-n",
        ns,
        f"--clusterrole=read-jobs-{ns}",
        f"--serviceaccount={ns}:reader",
    )
    try:
        token = cluster.kubectl("-n", ns, "create", "token", "reader").stdout.strip()
        secrets = tmp_path / "serviceaccount"
        secrets.mkdir()
        (secrets / "token").write_text(token)
        (secrets / "ca.crt").write_bytes((Path(cluster.dir) / "pki/ca.crt").read_bytes())
        script = textwrap.dedent(
            f"""
            from kubernetes.config import incluster_config as ic
            ic.SERVICE_TOKEN_FILENAME = {str(secrets / "token")!r}
            ic.SERVICE_CERT_FILENAME = {str(secrets / "ca.crt")!r}
            from t9kjobs.client import Client
            job = Client(namespace={ns!r}).get("gj/reach")
            print(job.name)
            """
        )
        host, port = cluster.server.removeprefix("https://").split(":")
        env = {k: v for k, v in os.environ.items() if k != "KUBECONFIG"} | {
            "KUBERNETES_SERVICE_HOST": host,
            "KUBERNETES_SERVICE_PORT": port,
            "HOME": str(secrets),
        }
        out = subprocess.run(
            [sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=60
        )
        assert out.returncode == 0, out.stderr
        assert out.stdout.strip() == "reach"
    finally:
        cluster.kubectl("delete", "clusterrole", f"read-jobs-{ns}", check=False)


def test_logs_on_simulated_nodes_say_there_are_none(client: Client, ns: str) -> None:
    client.create(manifest("GenericJob", "quiet", seconds=600), namespace=ns)
    client.wait("gj/quiet", namespace=ns, phase="Running", timeout=60, interval=0.5)
    with pytest.raises(NoLog, match=r"simulated \(KWOK\) node .* keep no logs"):
        list(client.logs("gj/quiet", namespace=ns))
    lines = list(client.logs("gj/quiet", namespace=ns, all_replicas=True))
    assert {line.replica for line in lines} == {"worker-0", "worker-1"}
    assert all(line.note and "keep no logs" in line.text for line in lines)
    described = client.describe("gj/quiet", namespace=ns)
    assert described["phase"] == "Running" and described["progress"] is None


# -- progress, from the log KWOK serves ------------------------------------------------------


def _say(cluster: Cluster, text: str) -> None:
    """A line in the log every pod of the KWOK log namespace has (CRI format)."""
    path = Path(cluster.env["KWOK_LOG_FILE"])
    stamp = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    with path.open("a") as f:
        f.write(f"{stamp} stdout F {text}\n")


@pytest.fixture
def log_namespace(cluster: Cluster) -> Iterator[str]:
    if "KWOK_LOG_NAMESPACE" not in cluster.env:
        pytest.fail(
            "this cluster was started before its KWOK nodes served logs: stop it"
            " (hack/cluster/down.sh) and run again"
        )
    name = cluster.env["KWOK_LOG_NAMESPACE"]
    cluster.kubectl("create", "namespace", name, check=False)
    cluster.kubectl("-n", name, "delete", "t9k", "--all", "--wait=true", check=False)
    cluster.poll(
        lambda: (
            cluster.kubectl("-n", name, "get", "serviceaccount", "default", check=False).returncode
            == 0
        ),
        timeout=60,
        message=f"ServiceAccount {name}/default",
    )
    yield name
    cluster.kubectl("-n", name, "delete", "t9k", "--all", "--wait=false", check=False)


def test_progress_reaches_the_status_get_and_describe(
    client: Client, cluster: Cluster, log_namespace: str
) -> None:
    ns = log_namespace
    client.create(manifest("GenericJob", "progress", seconds=40), namespace=ns)
    client.wait("gj/progress", namespace=ns, phase="Running", timeout=60, interval=0.5)
    _say(cluster, f"{MARKER} step=30 total=120 loss=0.75")

    def at(step: int) -> Any:
        got = client.get("gj/progress", namespace=ns).status.progress
        return got if got is not None and got.step == step else None

    first = cluster.poll(lambda: at(30), timeout=30, message="step 30 in the status")
    assert (first.total_steps, first.percent, first.metrics) == (120, 25.0, {"loss": 0.75})
    assert first.replica == "worker-0" and first.last_update_time
    # The logs: the same lines, tagged with their replica.
    lines = list(client.logs("gj/progress", namespace=ns, tail=1))
    assert [(line.replica, line.text) for line in lines] == [
        ("worker-0", f"{MARKER} step=30 total=120 loss=0.75")
    ]
    time.sleep(2)  # a pace to estimate the time left from
    _say(cluster, f"{MARKER} step=60 total=120 loss=0.5")
    second = cluster.poll(lambda: at(60), timeout=30, message="step 60 in the status")
    assert second.percent == 50.0 and second.remaining_seconds is not None
    wide = cluster.kubectl("-n", ns, "get", "gj", "progress", "-o", "wide").stdout.splitlines()
    assert wide[1][wide[0].index("PROGRESS") :].split()[0] == "50", wide
    out = subprocess.run(
        [str(VENV_BIN / "t9kjobs"), "describe", "gj/progress", "-n", ns],
        env={**os.environ, "KUBECONFIG": str(cluster.kubeconfig)},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert "Progress:   50% (step 60/120), about " in out.stdout, out.stdout
    done = client.wait("gj/progress", namespace=ns, timeout=60, interval=0.5)
    assert done.status.phase == "Succeeded"
    assert done.status.progress is not None
    assert (done.status.progress.step, done.status.progress.percent) == (120, 100.0)
    client.delete(done, wait=True)


def test_a_reported_checkpoint_is_recorded_and_the_replacement_resumes_from_it(
    client: Client, cluster: Cluster, log_namespace: str
) -> None:
    """A `checkpoint=` in the log lands in `status.checkpoint`; the pod that replaces the
    failed one gets it in T9KJOBS_RESUME_FROM (docs/lifecycle.md, "Checkpoints")."""
    ns = log_namespace
    doc = manifest("GenericJob", "resumes", seconds=12, exit_code=1)
    replica = doc["spec"]["replicaSpecs"][0]
    replica["replicas"] = 1
    replica["restartPolicy"] = {"policy": "OnFailure", "limit": 1}
    doc["spec"]["checkpoint"] = {"path": "/ckpt", "gracePeriodSeconds": 90}
    client.create(doc, namespace=ns)
    client.wait("gj/resumes", namespace=ns, phase="Running", timeout=60, interval=0.5)
    _say(cluster, f"{MARKER} step=1205 total=5000 checkpoint=/ckpt/step-1200 checkpoint_step=1200")

    def recorded() -> Any:
        return client.get("gj/resumes", namespace=ns).status.checkpoint

    saved = cluster.poll(recorded, timeout=30, message="status.checkpoint")
    assert (saved.path, saved.step, saved.replica) == ("/ckpt/step-1200", 1200, "worker-0")

    def replacement() -> dict[str, str] | None:
        got = cluster.kubectl("-n", ns, "get", "pod", "resumes-worker-0", "-o", "json", check=False)
        if got.returncode != 0:
            return None
        pod = yaml.safe_load(got.stdout)
        if pod["metadata"]["annotations"].get("batch.tensorstack.dev/restart-count") != "1":
            return None
        return {e["name"]: e.get("value", "") for e in pod["spec"]["containers"][0]["env"]}

    env = cluster.poll(replacement, timeout=60, message="the replacement of resumes-worker-0")
    assert env["T9KJOBS_RESUME_FROM"] == "/ckpt/step-1200"
    assert (env["T9KJOBS_RESUME_STEP"], env["T9KJOBS_RESTART_COUNT"]) == ("1200", "1")
    assert env["T9KJOBS_STOP_GRACE_SECONDS"] == "90"
    client.delete("gj/resumes", namespace=ns, wait=True)
