"""Jobs dispatched by Kueue's MultiKueue from a manager cluster to a worker, end to end on two
local KWOK control planes (docs/scheduling.md, "Multi-cluster"; docs/cluster.md, "Two
clusters: MultiKueue").

The tier's cluster is the manager; this module starts the worker beside it once
(hack/cluster/multikueue/up.sh: a second control plane with Kueue and 4 KWOK nodes, the
MultiKueueCluster, AdmissionCheck and the ClusterQueue `multikueue` on both: 64 GPUs on the
manager, 8 on the worker) and stops it at the end. One operator runs on each cluster. Every
test's namespace exists on both, with a LocalQueue `multikueue` in each. A job is submitted on
the manager with `spec.managedBy: kueue.x-k8s.io/multikueue`: the manager's operator makes its
Workload alone, MultiKueue copies the job to the worker once its Workload has quota there,
the worker's operator adopts that prebuilt Workload and runs the pods, and MultiKueue copies
the worker's status back.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from t9kjobs.client import Client
from t9kjobs.kube.transport import ApiError
from tests.cluster import Cluster, _run_script, running_mode
from tests.e2e.jobs import Kube, Obj, condition, job, phase, replica, until
from tests.operators import Operators, install_crds

WORKER = "worker"
QUEUE = "multikueue"
KUEUE = "/apis/kueue.x-k8s.io/v1beta2"
MANAGED_BY = "kueue.x-k8s.io/multikueue"
PREBUILT = "kueue.x-k8s.io/prebuilt-workload-name"
GPU = "nvidia.com/gpu"


@pytest.fixture(scope="module")
def worker(cluster: Cluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    """The worker cluster, MultiKueue connecting the tier's cluster (the manager) to it;
    reused when running, else started here and stopped after the module. The script installs
    our CRDs on both with this interpreter's `t9kjobs` (MultiKueue watches our kinds there)."""
    directory = cluster.dir / "worker"
    cli = tmp_path_factory.mktemp("cli") / "t9kjobs"
    cli.write_text(f'#!/bin/sh\nexec {sys.executable} -m t9kjobs.cli.main "$@"\n')
    cli.chmod(0o755)
    env = {
        **os.environ,
        "T9KJOBS_CLI": str(cli),
        "T9KJOBS_CLUSTER_DIR": str(cluster.dir),
        "T9KJOBS_WORKER_DIR": str(directory),
        "T9KJOBS_WORKER_NAME": WORKER,
    }
    running = running_mode(directory) == "kwok"
    install_crds(cluster)
    rc = _run_script("multikueue/up.sh", env)
    assert rc == 0, f"hack/cluster/multikueue/up.sh failed (exit {rc}); logs in {directory}/logs"
    started = Cluster(directory, started_here=not running)
    try:
        yield started
    finally:
        if not running:
            _run_script("multikueue/down.sh", env)


@pytest.fixture(scope="module")
def worker_operators(
    worker: Cluster, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Operators]:
    """Our operator on the worker (the manager's is the module's `operators`)."""
    install_crds(worker)
    ops = Operators(worker, tmp_path_factory.mktemp("worker-operator"))
    try:
        yield ops
    finally:
        ops.close()


class Pair:
    """One test's namespace on both clusters."""

    def __init__(self, manager: Kube, worker: Kube) -> None:
        self.manager = manager
        self.worker = worker

    def submit(self, doc: Obj) -> Obj:
        """`doc` created on the manager, queued in `multikueue`, managed by MultiKueue."""
        doc["metadata"].setdefault("labels", {})["kueue.x-k8s.io/queue-name"] = QUEUE
        doc["spec"]["managedBy"] = MANAGED_BY
        return self.manager.create(doc)

    def on_worker(self, doc: Obj) -> Obj | None:
        try:
            return self.worker.get(doc)
        except ApiError as exc:
            assert exc.status == 404, exc
            return None

    def kubeconfig_with_worker(self) -> str:
        """The manager's kubeconfig with a context `worker` for the worker cluster, as a user
        given access to both would have."""
        merged = yaml.safe_load(Path(self.manager.cluster.kubeconfig).read_text())
        theirs = yaml.safe_load(Path(self.worker.cluster.kubeconfig).read_text())
        merged["clusters"].append({"name": WORKER, "cluster": theirs["clusters"][0]["cluster"]})
        merged["users"].append({"name": WORKER, "user": theirs["users"][0]["user"]})
        merged["contexts"].append({"name": WORKER, "context": {"cluster": WORKER, "user": WORKER}})
        path = Path(self.worker.cluster.dir) / f"user-{self.manager.ns}.kubeconfig"
        path.write_text(yaml.safe_dump(merged))
        return str(path)

    def workload(self, kube: Kube, doc: Obj) -> Obj | None:
        name = f"{doc['kind'].lower()}-{doc['metadata']['name']}"
        try:
            return kube.http.request("GET", f"{KUEUE}/namespaces/{kube.ns}/workloads/{name}")
        except ApiError as exc:
            assert exc.status == 404, exc
            return None

    def kubectl_get(self) -> str:
        """`kubectl get genericjobs,pods` on both clusters, for the log of a failed test and the report."""
        out = []
        for name, kube in (("manager", self.manager), ("worker", self.worker)):
            got = kube.cluster.kubectl("get", "genericjobs,pods", "-n", kube.ns, check=False)
            out.append(f"--- {name}: kubectl get genericjobs,pods\n{got.stdout}{got.stderr}")
        return "\n".join(out)


@pytest.fixture
def pair(
    cluster: Cluster,
    worker: Cluster,
    namespace: str,
    operators: Operators,
    worker_operators: Operators,
) -> Iterator[Pair]:
    """The test's namespace on both clusters, a LocalQueue `multikueue` in each."""
    worker.kubectl("create", "namespace", namespace)
    queue = (
        "apiVersion: kueue.x-k8s.io/v1beta2\nkind: LocalQueue\n"
        f"metadata: {{name: {QUEUE}, namespace: {namespace}}}\nspec: {{clusterQueue: {QUEUE}}}\n"
    )
    for c in (cluster, worker):
        c.kubectl("apply", "-f", "-", input=queue)
    try:
        yield Pair(Kube(cluster, namespace), Kube(worker, namespace))
    finally:
        worker.kubectl("delete", "namespace", namespace, "--wait=false", check=False)


def gpu_job(name: str, pods: int = 1, gpus: int = 1, **pod: Any) -> Obj:
    return job(
        "GenericJob",
        name,
        replica("worker", pods, resources={"limits": {GPU: gpus}}, **pod),
    )


def test_dispatched_job_runs_on_the_worker_and_succeeds_on_the_manager(pair: Pair) -> None:
    doc = pair.submit(gpu_job("ok", pods=2, exit_code=0, seconds=3))
    with pair.worker.record_pods() as pods:
        copy = until(lambda: pair.on_worker(doc), "the job's copy on the worker", 180)
        assert copy["metadata"]["labels"][PREBUILT] == f"genericjob-{doc['metadata']['name']}"
        assert "managedBy" not in copy["spec"], copy["spec"]
        until(lambda: phase(pair.worker.get(doc)) == "Running" or None, "Running there", 180)
        print(pair.kubectl_get())
        # The client on the manager reads the pods' Events where they are, on the worker,
        # through the user's kubeconfig context named after it.
        client = Client(kubeconfig=pair.kubeconfig_with_worker(), namespace=pair.manager.ns)
        name = doc["metadata"]["name"]
        seen = until(
            lambda: [e for e in client.events("GenericJob", name) if e.about.startswith("Pod/")],
            "the worker's pod Events, read from the manager",
            60,
        )
        assert any(e.reason == "Scheduled" for e in seen), seen
        there = pair.worker.wait_phase(doc, "Succeeded", 180)
        here = pair.manager.wait_phase(doc, "Succeeded", 120)
    print(pair.kubectl_get())
    assert len({p["metadata"]["uid"] for p in pods.created()}) == 2
    assert pair.manager.pods() == {}, "the manager runs no pod of a dispatched job"
    assert condition(here, "Completed") == condition(there, "Completed")
    assert here["tasks"] == there["tasks"], "the manager's status is the worker's, copied"
    workload = pair.workload(pair.manager, doc)
    assert workload is not None and workload["status"].get("clusterName") == WORKER
    # Its Workload finished, MultiKueue deletes the worker's copy (and so its pods).
    until(lambda: pair.on_worker(doc) is None or None, "the worker's copy deleted", 120)


def test_a_failure_on_the_worker_is_the_managers_with_its_reason(pair: Pair) -> None:
    doc = pair.submit(gpu_job("fails", exit_code=3, seconds=1))
    there = pair.worker.wait_phase(doc, "Failed", 180)
    here = pair.manager.wait_phase(doc, "Failed", 120)
    reason = condition(there, "Failed")["reason"]
    assert condition(here, "Failed")["reason"] == reason
    assert condition(here, "Failed")["message"] == condition(there, "Failed")["message"]


def test_deleting_on_the_manager_removes_the_workers_job_and_pods(pair: Pair) -> None:
    doc = pair.submit(gpu_job("deleted", pods=2))
    until(lambda: len(pair.worker.pods()) == 2 or None, "2 pods on the worker", 180)
    pair.manager.wait_phase(doc, "Running", 120)
    print(pair.kubectl_get())
    pair.manager.http.request("DELETE", pair.manager.path(doc))
    print(pair.kubectl_get())
    until(
        lambda: (pair.on_worker(doc) is None and not pair.worker.pods()) or None,
        "the worker's job and pods gone",
        180,
    )
    assert pair.workload(pair.worker, doc) is None


def test_a_worker_without_capacity_leaves_the_job_queued_on_the_manager(pair: Pair) -> None:
    # 2 pods x 8 GPUs: the manager's ClusterQueue has 64, the worker's 8.
    doc = pair.submit(gpu_job("too-big", pods=2, gpus=8))
    remote = until(
        lambda: pair.workload(pair.worker, doc), "the Workload's copy waiting on the worker", 180
    )
    assert not any(
        c["type"] == "QuotaReserved" and c["status"] == "True"
        for c in (remote.get("status") or {}).get("conditions") or []
    ), remote
    assert pair.on_worker(doc) is None, "no copy of the job on a worker that has no room"
    assert pair.worker.pods() == {} and pair.manager.pods() == {}
    local = pair.workload(pair.manager, doc)
    assert local is not None
    checks = {c["name"]: c["state"] for c in local["status"].get("admissionChecks") or []}
    assert checks == {"multikueue": "Pending"}, local["status"]

    # The manager's operator says why it waits: for a worker with room (the check's state).
    def waiting() -> Obj | None:
        status = pair.manager.status(doc)
        return status if status.get("reason") == "MultiKueuePending" else None

    here = until(waiting, "the job Queued on the manager, waiting for a worker", 60)
    print(pair.kubectl_get())
    assert here["phase"] == "Queued", here
    assert "worker cluster" in condition(here, "Admitted")["message"], here


def test_the_workers_operator_restarted_mid_run(pair: Pair, worker_operators: Operators) -> None:
    doc = pair.submit(gpu_job("restart", exit_code=0, seconds=20))
    with pair.worker.record_pods() as pods:
        until(lambda: pair.worker.pods() or None, "the job's pod on the worker", 180)
        pair.worker.wait_phase(doc, "Running", 120)
        worker_operators.kill()
        worker_operators.start()
        pair.manager.wait_phase(doc, "Succeeded", 180)
    created = {p["metadata"]["uid"] for p in pods.created()}
    assert len(created) == 1, "the restarted operator kept the running pod"


def test_pausing_on_the_manager_takes_the_job_back_from_the_worker(pair: Pair) -> None:
    """Paused on the manager, a dispatched job gives its place up: its Workload is deleted
    there, and MultiKueue deletes the worker's copy and its pods; resumed, it queues and is
    dispatched again (docs/scheduling.md, "Multi-cluster")."""
    doc = pair.submit(gpu_job("paused"))
    first = until(lambda: pair.on_worker(doc), "the job's copy on the worker", 180)
    until(lambda: pair.worker.pods() or None, "the job's pod on the worker", 180)
    client = Client(kubeconfig=pair.manager.cluster.kubeconfig, namespace=pair.manager.ns)
    client.pause("GenericJob", doc["metadata"]["name"])
    until(
        lambda: (pair.on_worker(doc) is None and not pair.worker.pods()) or None,
        "the worker's copy and pods gone",
        180,
    )
    assert pair.workload(pair.manager, doc) is None
    # No worker holds it: its status is the manager's operator's again, Paused.
    pair.manager.wait_phase(doc, "Paused", 60)
    print(pair.kubectl_get())
    client.resume("GenericJob", doc["metadata"]["name"])
    again = until(lambda: pair.on_worker(doc), "a new copy on the worker", 180)
    assert again["metadata"]["uid"] != first["metadata"]["uid"]
    pair.worker.wait_phase(doc, "Running", 120)
    pair.manager.wait_phase(doc, "Running", 120)
