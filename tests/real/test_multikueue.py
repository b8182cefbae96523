"""MultiKueue with a real-node worker: the GenericJob example, submitted on a manager cluster,
trains on the real node and succeeds on the manager (issue #55; the KWOK tier covers the
protocol: tests/e2e/test_multikueue.py).

The tier's real-node cluster is the worker, as it runs: a manager control plane with Kueue and
one KWOK node (it runs no pod; its quota only gates dispatch) is started beside it, and
hack/cluster/multikueue/up.sh connects the two, reusing the running worker (and its
multikueue/down.sh, run by the manager's down.sh, leaves it running). One operator on each.
The job's logs are read from the manager, through the client, on the worker that runs it.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from t9kjobs.client import Client
from tests.cluster import Cluster, _run_script
from tests.operators import OperatorProcess, Operators
from tests.real.jobs import apply, assert_trained, get, wait_finished
from tests.repo import REPO

EXAMPLE = REPO / "examples" / "genericjob" / "mlp-cpu.yaml"
WORKER = "real"  # the MultiKueueCluster's name, and the user's kubeconfig context for it
QUEUE = "multikueue"
# The manager starts on free ports of its own, without the tier's audit log.
_PORTS = (
    "T9KJOBS_ETCD_PORT",
    "T9KJOBS_ETCD_PEER_PORT",
    "T9KJOBS_APISERVER_PORT",
    "T9KJOBS_KCM_PORT",
    "T9KJOBS_SCHEDULER_PORT",
    "T9KJOBS_AUDIT",
    "T9KJOBS_MULTIKUEUE",
)


@pytest.fixture(scope="module")
def manager(cluster: Cluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    """The manager cluster, MultiKueue connecting it to the real-node cluster (the worker)."""
    directory = cluster.dir / "manager"
    cli = tmp_path_factory.mktemp("cli") / "t9kjobs"
    cli.write_text(f'#!/bin/sh\nexec {sys.executable} -m t9kjobs.cli.main "$@"\n')
    cli.chmod(0o755)
    env = {k: v for k, v in os.environ.items() if k not in _PORTS}
    env.update(T9KJOBS_CLUSTER_DIR=str(directory), T9KJOBS_NODES="1", T9KJOBS_KUEUE="1")
    try:
        assert _run_script("up.sh", env) == 0, f"the manager did not start; logs in {directory}"
        env.update(
            T9KJOBS_CLI=str(cli), T9KJOBS_WORKER_DIR=str(cluster.dir), T9KJOBS_WORKER_NAME=WORKER
        )
        rc = _run_script("multikueue/up.sh", env)
        assert rc == 0, f"multikueue/up.sh failed (exit {rc}); logs in {directory}/logs"
        yield Cluster(directory, started_here=True)
    finally:
        # Also multikueue/down.sh: the worker keeps running, without what up.sh put there.
        _run_script("down.sh", {**os.environ, "T9KJOBS_CLUSTER_DIR": str(directory)})


def _kubeconfig_with_worker(manager: Cluster, worker: Cluster, where: Path) -> str:
    """The manager's kubeconfig with a context named after the worker, as a user given access
    to both has."""
    merged = yaml.safe_load(Path(manager.kubeconfig).read_text())
    theirs = yaml.safe_load(Path(worker.kubeconfig).read_text())
    merged["clusters"].append({"name": WORKER, "cluster": theirs["clusters"][0]["cluster"]})
    merged["users"].append({"name": WORKER, "user": theirs["users"][0]["user"]})
    merged["contexts"].append({"name": WORKER, "context": {"cluster": WORKER, "user": WORKER}})
    where.write_text(yaml.safe_dump(merged))
    return str(where)


def test_the_example_dispatched_from_a_manager_trains_on_the_real_node(
    cluster: Cluster,
    manager: Cluster,
    namespace: str,
    operator: OperatorProcess,
    tmp_path: Path,
) -> None:
    ops = Operators(manager, tmp_path)
    try:
        manager.kubectl("create", "namespace", namespace)
        queue = (
            "apiVersion: kueue.x-k8s.io/v1beta2\nkind: LocalQueue\nmetadata:"
            f" {{name: {QUEUE}, namespace: {namespace}}}\nspec: {{clusterQueue: {QUEUE}}}\n"
        )
        for c in (manager, cluster):
            c.kubectl("apply", "-f", "-", input=queue)
        doc = yaml.safe_load(EXAMPLE.read_text())
        doc["metadata"]["labels"] = {"kueue.x-k8s.io/queue-name": QUEUE}
        doc["spec"]["managedBy"] = "kueue.x-k8s.io/multikueue"
        for spec in doc["spec"]["replicaSpecs"]:
            for c in spec["template"]["spec"]["containers"]:
                c["resources"] = {"requests": {"cpu": "100m", "memory": "64Mi"}}
        name = doc["metadata"]["name"]
        apply(manager, namespace, doc)
        print(manager.kubectl("get", "genericjobs", "-n", namespace).stdout)  # queued
        workload = f"workloads.kueue.x-k8s.io/genericjob-{name}"

        def dispatched() -> str | None:
            found = get(manager, namespace, workload)
            return (found.get("status") or {}).get("clusterName")

        assert manager.poll(dispatched, timeout=180, interval=1, message="dispatched") == WORKER
        print(cluster.kubectl("get", "genericjobs,pods", "-n", namespace).stdout)  # on the worker
        # The logs, read from the manager while the job trains on the worker (once it has
        # finished, MultiKueue deletes the worker's copy, and its pods and logs with it).
        client = Client(
            kubeconfig=_kubeconfig_with_worker(manager, cluster, tmp_path / "user.kubeconfig"),
            namespace=namespace,
        )
        lines = list(
            client.logs("GenericJob", name, all_replicas=True, follow=True, progress_bar=False)
        )
        here = wait_finished(manager, namespace, "GenericJob", name, timeout=120)
        print(manager.kubectl("get", "genericjobs,pods", "-n", namespace).stdout)
        assert here["status"]["phase"] == "Succeeded", here["status"]
        text = {
            r: "\n".join(x.text for x in lines if x.replica == r)
            for r in {x.replica for x in lines}
        }
        assert_trained(text, 3, f"{name}, its logs read from the manager")
        assert not get(manager, namespace, "pods")["items"], "the manager runs no pod"
        print(cluster.kubectl("get", "genericjobs,pods", "-n", namespace).stdout)
    finally:
        ops.close()
        manager.kubectl("delete", "namespace", namespace, "--wait=false", check=False)
