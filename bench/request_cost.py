"""What one request of each kind a job needs costs the API server: kube-apiserver and etcd
CPU milliseconds a request, on a fresh local control plane with no operator running.

    python -m bench.request_cost [--count 1000] [--out DIR]

The burst benchmark shows the control plane, not the operator, using most of the CPU while
a job's pods are created (docs/benchmarks.md, What limits us now). This says which requests
that CPU goes to: creating our PyTorchTrainingJob (its schema and CEL rules) against
Kubeflow's PyTorchJob, a pod, a headless Service, an Event, and a status write of each job.
Pods are created with a scheduler nobody runs, so no binding or KWOK status update follows
them; each batch is measured from its first request until the server's CPU has settled.
"""

from __future__ import annotations

import argparse
import copy
import json
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from bench.cluster import Cluster
from bench.operators import KubeflowOperator, OurOperator
from bench.procstat import cpu_seconds
from bench.scale import build_tools, log
from bench.workload import NAMESPACE, kubeflow_job, ours_job, raw_pods
from t9kjobs.kube.transport import Transport, load_configuration
from t9kjobs.vocabulary import Obj

__all__ = ["main"]

WORKERS = 16


def _status(name: str) -> Obj:
    """A status as our operator writes it while the job runs: 1 master + 3 workers."""
    now = "2026-11-25T00:00:00Z"
    replicas = [("master", 1), ("worker", 3)]
    return {
        "phase": "Running",
        "startTime": now,
        "selector": f"tensorstack.dev/owner-name={name}",
        "aggregate": {"running": 4},
        "conditions": [
            {
                "type": "Initialized",
                "status": "True",
                "reason": "PodsCreated",
                "message": "all pods are created",
                "lastTransitionTime": now,
            },
            {
                "type": "Running",
                "status": "True",
                "reason": "PodsRunning",
                "message": "every replica is running",
                "lastTransitionTime": now,
            },
        ],
        "tasks": [
            {
                "type": kind,
                "replicas": [
                    {
                        "name": f"{name}-{kind}-{i}",
                        "uid": "00000000-0000-0000-0000-000000000000",
                        "phase": "Running",
                        "containers": [{"name": "pytorch", "state": "running"}],
                    }
                    for i in range(n)
                ],
            }
            for kind, n in replicas
        ],
    }


def _kubeflow_status() -> Obj:
    """A status as the training operator writes it while the job runs."""
    now = "2026-11-25T00:00:00Z"
    return {
        "startTime": now,
        "conditions": [
            {
                "type": t,
                "status": "True",
                "reason": f"PyTorchJob{t}",
                "message": f"PyTorchJob bench is {t.lower()}.",
                "lastUpdateTime": now,
                "lastTransitionTime": now,
            }
            for t in ("Created", "Running")
        ],
        "replicaStatuses": {
            "Master": {"active": 1, "selector": "training.kubeflow.org/replica-type=master"},
            "Worker": {"active": 3, "selector": "training.kubeflow.org/replica-type=worker"},
        },
    }


def _service(name: str) -> Obj:
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": name, "namespace": NAMESPACE},
        "spec": {
            "clusterIP": "None",
            "selector": {"tensorstack.dev/owner-name": name},
            "ports": [{"name": "rdzv", "port": 29500}],
        },
    }


def _event(i: int) -> Obj:
    return {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"name": f"bench-{i}.cost", "namespace": NAMESPACE},
        "involvedObject": {
            "apiVersion": "batch.tensorstack.dev/v1beta1",
            "kind": "PyTorchTrainingJob",
            "name": f"bench-{i}",
            "namespace": NAMESPACE,
        },
        "reason": "PodsCreated",
        "message": f"created bench-{i}-master-0, bench-{i}-worker-0, bench-{i}-worker-1",
        "type": "Normal",
        "source": {"component": "t9k-jobs"},
        "count": 1,
    }


class Meter:
    """CPU seconds of kube-apiserver and etcd around a batch of requests."""

    def __init__(self, cluster: Cluster) -> None:
        pids = cluster.pids()
        self.pids = {k: pids[k] for k in ("kube-apiserver", "etcd")}

    def cpu(self) -> dict[str, float]:
        return {k: cpu_seconds(p) for k, p in self.pids.items()}

    def settled(self, quiet: float = 0.05, window: float = 2.0, limit: float = 30) -> None:
        """Until the API server used under `quiet` of a core over `window` seconds: the watch
        fan-out and the controllers' reactions of a batch count towards that batch."""
        deadline = time.monotonic() + limit
        while time.monotonic() < deadline:
            before = self.cpu()["kube-apiserver"]
            time.sleep(window)
            if self.cpu()["kube-apiserver"] - before < quiet * window:
                return


def run_batch(
    meter: Meter, label: str, send: list[tuple[str, str, Obj]], transport: Transport
) -> Obj:
    meter.settled()
    before = meter.cpu()
    start = time.monotonic()
    with ThreadPoolExecutor(WORKERS) as pool:
        list(pool.map(lambda r: transport.request(r[0], r[1], body=r[2]), send))
    elapsed = time.monotonic() - start
    meter.settled()
    after = meter.cpu()
    row = {
        "request": label,
        "count": len(send),
        "seconds": round(elapsed, 2),
        "per_second": round(len(send) / elapsed, 1),
        **{f"{k}_ms": round(1000 * (after[k] - before[k]) / len(send), 2) for k in before},
    }
    log(f"{label}: {row}")
    return row


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.request_cost", description=__doc__)
    p.add_argument("--count", type=int, default=1000, help="requests of each kind (1000)")
    p.add_argument("--cluster-dir", type=Path, default=Path("/tmp/bench-cluster"))
    p.add_argument("--out", type=Path, default=Path("/tmp/t9kjobs-bench/request-cost"))
    args = p.parse_args(argv)
    n = args.count
    tools = build_tools()
    cluster = Cluster(args.cluster_dir, 110)
    cluster.up()
    try:
        cluster.create_namespace(NAMESPACE)
        OurOperator().prepare(cluster)
        KubeflowOperator(tools).prepare(cluster)
        transport = Transport(load_configuration(cluster.kubeconfig), qps=0)
        meter = Meter(cluster)
        ns = f"namespaces/{NAMESPACE}"
        ours = f"/apis/batch.tensorstack.dev/v1beta1/{ns}/pytorchtrainingjobs"
        theirs = f"/apis/kubeflow.org/v1/{ns}/pytorchjobs"
        names = [f"bench-{i}" for i in range(n)]
        pods = raw_pods(names[: n // 4], 4, 5)
        for pod in pods:
            pod["spec"]["schedulerName"] = "nobody"  # no binding, no KWOK updates
        rows = [
            run_batch(
                meter,
                "POST PyTorchTrainingJob (ours)",
                [("POST", ours, ours_job(m, 4, 5)) for m in names],
                transport,
            ),
            run_batch(
                meter,
                "POST PyTorchJob (training operator)",
                [("POST", theirs, kubeflow_job(m, 4, 5)) for m in names],
                transport,
            ),
            run_batch(
                meter, "POST Pod", [("POST", f"/api/v1/{ns}/pods", q) for q in pods], transport
            ),
            run_batch(
                meter,
                "POST Service (headless)",
                [("POST", f"/api/v1/{ns}/services", _service(m)) for m in names],
                transport,
            ),
            run_batch(
                meter,
                "POST Event",
                [("POST", f"/api/v1/{ns}/events", _event(i)) for i in range(n)],
                transport,
            ),
        ]
        listed = transport.request("GET", ours)["items"]
        writes = []
        for job in listed:
            body = copy.deepcopy(job)
            body["status"] = _status(job["metadata"]["name"])
            writes.append(("PUT", f"{ours}/{job['metadata']['name']}/status", body))
        rows.append(run_batch(meter, "PUT PyTorchTrainingJob status", writes, transport))
        writes = []
        for job in transport.request("GET", theirs)["items"]:
            body = copy.deepcopy(job)
            body["status"] = _kubeflow_status()
            writes.append(("PUT", f"{theirs}/{job['metadata']['name']}/status", body))
        rows.append(run_batch(meter, "PUT PyTorchJob status", writes, transport))
    finally:
        cluster.down()
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "request_cost.json").write_text(json.dumps(rows, indent=1))
    lines = [
        "| request | count | requests/s | kube-apiserver CPU (ms a request) | etcd CPU (ms) |",
        "| --- | ---: | ---: | ---: | ---: |",
        *(
            f"| {r['request']} | {r['count']} | {r['per_second']} | {r['kube-apiserver_ms']}"
            f" | {r['etcd_ms']} |"
            for r in rows
        ),
    ]
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
