"""Kueue on the real node: a queued training job has no pod while its queue does not exist, and
trains once Kueue admits it (the KWOK tier covers quotas and preemption: tests/e2e/test_kueue.py).

The job is the runnable MLP example (3 ranks, torchrun-less DDP), labelled with a LocalQueue
that is created only after the job says it waits for it. The ClusterQueue's ResourceFlavor
names the node by its hostname label: the admitted pods carry it as their node selector.
"""

from __future__ import annotations

import yaml

from tests.cluster import Cluster
from tests.operators import OperatorProcess
from tests.real.jobs import apply, assert_trained, get, job_logs, report, wait_finished, wait_for
from tests.repo import REPO

EXAMPLE = REPO / "examples" / "genericjob" / "mlp-cpu.yaml"


def _queue_objects(namespace: str, hostname: str) -> str:
    return f"""
apiVersion: kueue.x-k8s.io/v1beta2
kind: ResourceFlavor
metadata: {{name: {namespace}}}
spec: {{nodeLabels: {{kubernetes.io/hostname: {hostname}}}}}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata: {{name: {namespace}}}
spec:
  namespaceSelector: {{matchLabels: {{kubernetes.io/metadata.name: {namespace}}}}}
  resourceGroups:
  - coveredResources: [cpu, memory]
    flavors:
    - name: {namespace}
      resources:
      - {{name: cpu, nominalQuota: "8"}}
      - {{name: memory, nominalQuota: 16Gi}}
"""


def test_a_queued_job_waits_with_no_pod_then_trains_once_admitted(
    cluster: Cluster, namespace: str, operator: OperatorProcess
) -> None:
    [node] = get(cluster, "default", "nodes")["items"]
    hostname = node["metadata"]["labels"]["kubernetes.io/hostname"]
    doc = yaml.safe_load(EXAMPLE.read_text())
    doc["metadata"]["labels"] = {"kueue.x-k8s.io/queue-name": "team"}
    for spec in doc["spec"]["replicaSpecs"]:
        for c in spec["template"]["spec"]["containers"]:
            c["resources"] = {"requests": {"cpu": "100m", "memory": "64Mi"}}
    name = doc["metadata"]["name"]
    cluster_wide = _queue_objects(namespace, hostname)
    try:
        apply(cluster, namespace, doc)
        job = wait_for(
            cluster,
            namespace,
            "GenericJob",
            name,
            "Inadmissible: its LocalQueue does not exist yet",
            lambda j: (j.get("status") or {}).get("reason") == "Inadmissible",
            120,
        )
        assert job["status"]["phase"] == "Queued"
        assert not get(cluster, namespace, "pods")["items"]
        cluster.kubectl("apply", "-f", "-", input=cluster_wide)
        local = {
            "apiVersion": "kueue.x-k8s.io/v1beta2",
            "kind": "LocalQueue",
            "metadata": {"name": "team", "namespace": namespace},
            "spec": {"clusterQueue": namespace},
        }
        cluster.kubectl("apply", "-f", "-", input=yaml.safe_dump(local))
        job = wait_finished(cluster, namespace, "GenericJob", name)
        logs = job_logs(cluster, namespace, name)
        assert job["status"]["phase"] == "Succeeded", report(job, logs)
        assert_trained(logs, 3, name)
        for pod in get(cluster, namespace, "pods")["items"]:
            assert pod["spec"]["nodeSelector"]["kubernetes.io/hostname"] == hostname
        admitted = next(c for c in job["status"]["conditions"] if c["type"] == "Admitted")
        assert admitted["status"] == "True" and f"ClusterQueue {namespace}" in admitted["message"]

        def finished() -> list[dict[str, str]]:
            workload = get(cluster, namespace, "workloads.kueue.x-k8s.io", f"genericjob-{name}")
            conditions = (workload.get("status") or {}).get("conditions") or []
            return [c for c in conditions if c["type"] == "Finished" and c["status"] == "True"]

        # Finished once no pod of the job holds resources: the workers may exit a moment after
        # the master whose success ended the job (docs/scheduling.md).
        cluster.poll(finished, timeout=60, interval=1, message="the Workload Finished")
    finally:
        cluster.kubectl("delete", "-f", "-", input=cluster_wide, check=False)
