"""What Kueue's Topology-Aware Scheduling costs a job (#53): its requests and its time to
placement, beside the same jobs queued without a topology.

    python -m bench.tas_cost [--jobs 100] [--replicas 4] [--run-seconds 5] [--out DIR]

On one fresh KWOK control plane with Kueue (hack/cluster/kueue, TAS on), its 4 nodes in 2
racks, our operator places the same N PyTorchTrainingJobs (1 master, R-1 workers) twice, a
namespace a pass, all created at once into a LocalQueue whose ClusterQueue has quota for every
pod: first through a ResourceFlavor with no topology (`queued`), then through one naming a
Topology (rack, hostname) with every replica's template asking
`kueue.x-k8s.io/podset-preferred-topology: rack` (`tas`). With TAS each pod is created gated
(`kueue.x-k8s.io/topology`) and Kueue's ungater patches it with its domain's node selector
before kube-scheduler can bind it: that is what the difference shows.

Per pass, from the first POST until every job has succeeded and kube-apiserver is quiet
again: kube-apiserver's requests by verb and resource (every client: the operator, Kueue,
kube-scheduler, KWOK), the operator's own, a job's POST answered until its last pod exists and
until its last pod is bound to a node (p50, p99), and the CPU of kube-apiserver, etcd, Kueue
and the operator. Writes results.json and summary.md into --out.
"""

from __future__ import annotations

import json
import os
import threading
import time
from argparse import ArgumentParser, Namespace
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from bench.admission_cost import apiserver_counters, by_verb, percentile
from bench.cluster import Cluster
from bench.operators import OurOperator
from bench.procstat import cpu_seconds
from bench.recorder import POD
from bench.request_cost import Meter
from bench.scale import log
from bench.workload import ours_job
from t9kjobs.kube.informer import Informer
from t9kjobs.kube.transport import Transport, load_configuration
from t9kjobs.vocabulary import Obj

__all__ = ["main"]

RACK = "bench.t9kjobs.dev/rack"
POOL = "bench.t9kjobs.dev/pool"  # on every node: a TAS flavor needs a node label
HOST = "kubernetes.io/hostname"
TOPOLOGY = "bench-tas"
JOBS = "/apis/batch.tensorstack.dev/v1beta1/namespaces/{}/pytorchtrainingjobs"
OWNER = "tensorstack.dev/owner-name"  # the pod label naming its job


class Placements:
    """When each pod of a namespace was first seen, and first seen bound to a node."""

    def __init__(self, transport: Transport, namespace: str) -> None:
        self.created: dict[str, float] = {}
        self.bound: dict[str, float] = {}
        self.job_of: dict[str, str] = {}
        self._lock = threading.Lock()
        self._informer = Informer(transport, POD, self._on_pod, namespace=namespace)

    def _on_pod(self, event: str, pod: Obj) -> None:
        now = time.time()
        name = pod["metadata"]["name"]
        with self._lock:
            self.created.setdefault(name, now)
            self.job_of[name] = (pod["metadata"].get("labels") or {}).get(OWNER, "")
            if (pod.get("spec") or {}).get("nodeName"):
                self.bound.setdefault(name, now)

    def start(self) -> None:
        self._informer.start()
        if not self._informer.synced.wait(60):
            raise TimeoutError("the watch of pods did not sync")

    def stop(self) -> None:
        self._informer.stop()

    def last(self, times: dict[str, float]) -> dict[str, float]:
        """Per job, the time of its last pod in `times`."""
        with self._lock:
            out: dict[str, float] = {}
            for pod, t in times.items():
                job = self.job_of.get(pod, "")
                out[job] = max(out.get(job, 0.0), t)
            return out


def setup(cluster: Cluster, label: str, pods: int, tas: bool) -> str:
    """The pass's namespace, ResourceFlavor (naming the Topology with `tas`), ClusterQueue
    with quota for every pod, and LocalQueue; the namespace."""
    namespace = f"bench-{label}"
    cluster.create_namespace(namespace)
    topology = f"\n  topologyName: {TOPOLOGY}" if tas else ""
    cluster.apply(
        f"""
apiVersion: kueue.x-k8s.io/v1beta2
kind: ResourceFlavor
metadata: {{name: {namespace}}}
spec:
  nodeLabels: {{{POOL}: bench}}{topology}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata: {{name: {namespace}}}
spec:
  namespaceSelector: {{}}
  resourceGroups:
  - coveredResources: [pods]
    flavors:
    - name: {namespace}
      resources:
      - {{name: pods, nominalQuota: {pods}}}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: LocalQueue
metadata: {{name: bench, namespace: {namespace}}}
spec: {{clusterQueue: {namespace}}}
"""
    )
    cluster.kubectl(
        "wait",
        "--for=condition=Active",
        f"clusterqueues.kueue.x-k8s.io/{namespace}",
        "--timeout=60s",
    )
    return namespace


def topology(cluster: Cluster) -> None:
    """The nodes in 2 racks (in name order, half in each) and the Topology of rack and
    hostname."""
    names = sorted(cluster.kubectl("get", "nodes", "-o", "name").split())
    for i, node in enumerate(names):
        rack = f"{RACK}=rack-{i * 2 // len(names)}"
        cluster.kubectl("label", "--overwrite", node, rack, f"{POOL}=bench")
    cluster.apply(
        f"""
apiVersion: kueue.x-k8s.io/v1beta2
kind: Topology
metadata: {{name: {TOPOLOGY}}}
spec:
  levels: [{{nodeLabel: {RACK}}}, {{nodeLabel: {HOST}}}]
"""
    )


def job(name: str, namespace: str, args: Namespace, tas: bool) -> Obj:
    doc = ours_job(name, args.replicas, args.run_seconds)
    doc["metadata"]["namespace"] = namespace
    doc["metadata"]["labels"] = {"kueue.x-k8s.io/queue-name": "bench"}
    if tas:
        for spec in doc["spec"]["replicaSpecs"]:
            notes = spec["template"].setdefault("metadata", {}).setdefault("annotations", {})
            notes["kueue.x-k8s.io/podset-preferred-topology"] = RACK
    return doc


def run_pass(
    label: str, cluster: Cluster, api: Transport, operator: OurOperator, args: Namespace
) -> Obj:
    tas = label == "tas"
    namespace = setup(cluster, label, args.jobs * args.replicas, tas)
    path = JOBS.format(namespace)
    docs = [job(f"job-{i}", namespace, args, tas) for i in range(args.jobs)]
    placements = Placements(api, namespace)
    placements.start()
    meter = Meter(cluster)
    pids = {**meter.pids, "kueue": cluster.pids()["kueue"], "operator": operator.pid}
    meter.settled()
    counted, own = apiserver_counters(cluster), operator.api_requests()
    before = {k: cpu_seconds(p) for k, p in pids.items()}
    posted: dict[str, float] = {}

    def post(doc: Obj) -> None:
        api.request("POST", path, body=doc)
        posted[doc["metadata"]["name"]] = time.time()

    start = time.monotonic()
    with ThreadPoolExecutor(8) as pool:
        list(pool.map(post, docs))
    deadline = start + args.timeout
    while not all_succeeded(api, path, args.jobs):
        if time.monotonic() > deadline:
            raise RuntimeError(f"{label}: the jobs did not all succeed in {args.timeout} s")
        time.sleep(1)
    elapsed = time.monotonic() - start
    meter.settled()
    after = {k: cpu_seconds(p) for k, p in pids.items()}
    counters, own_after = apiserver_counters(cluster), operator.api_requests()
    placements.stop()
    delta = {k: v - counted.get(k, 0.0) for k, v in counters.items() if v > counted.get(k, 0.0)}
    exist = [t - posted[j] for j, t in placements.last(placements.created).items() if j in posted]
    bound = [t - posted[j] for j, t in placements.last(placements.bound).items() if j in posted]
    row: Obj = {
        "pass": label,
        "jobs": args.jobs,
        "replicas": args.replicas,
        "seconds": round(elapsed, 2),
        "requests_per_job": round(sum(delta.values()) / args.jobs, 2),
        "requests": {k: round(v) for k, v in sorted(delta.items(), key=lambda kv: -kv[1])},
        "operator_requests_per_job": round(
            (sum(own_after.values()) - sum(own.values())) / args.jobs, 2
        ),
        "to_last_pod_p50_s": round(percentile(exist, 0.5), 3),
        "to_last_pod_p99_s": round(percentile(exist, 0.99), 3),
        "to_placed_p50_s": round(percentile(bound, 0.5), 3),
        "to_placed_p99_s": round(percentile(bound, 0.99), 3),
        **{f"{k}_cpu_ms": round(1000 * (after[k] - before[k]) / args.jobs, 2) for k in pids},
    }
    log(f"{label}: {row}")
    return row


def all_succeeded(api: Transport, path: str, count: int) -> bool:
    items = api.request("GET", path)["items"]
    done = [j for j in items if (j.get("status") or {}).get("phase") == "Succeeded"]
    return len(done) == count


def table(off: Obj, on: Obj, load: list[tuple[float, ...]]) -> str:
    def row(title: str, key: str, unit: str = "") -> str:
        return f"| {title} | {off[key]}{unit} | {on[key]}{unit} | {on[key] - off[key]:+.2f}{unit} |"

    return "\n".join(
        [
            f"{off['jobs']} PyTorchTrainingJobs of {off['replicas']} pods a pass, created at once",
            "",
            "| a job | queued (no topology) | queued with TAS | difference |",
            "| --- | ---: | ---: | ---: |",
            row("requests to kube-apiserver (every client)", "requests_per_job"),
            row("the operator's own requests", "operator_requests_per_job"),
            row("POST answered -> last pod exists, p50", "to_last_pod_p50_s", " s"),
            row("POST answered -> last pod exists, p99", "to_last_pod_p99_s", " s"),
            row("POST answered -> last pod bound (placed), p50", "to_placed_p50_s", " s"),
            row("POST answered -> last pod bound (placed), p99", "to_placed_p99_s", " s"),
            row("kube-apiserver CPU", "kube-apiserver_cpu_ms", " ms"),
            row("etcd CPU", "etcd_cpu_ms", " ms"),
            row("Kueue CPU", "kueue_cpu_ms", " ms"),
            row("operator CPU", "operator_cpu_ms", " ms"),
            f"| requests by verb (whole pass) | {by_verb(off['requests'])}"
            f" | {by_verb(on['requests'])} | |",
            "",
            "load average (1, 5, 15 min) before: {}, after: {}".format(*load),
        ]
    )


def main(argv: list[str] | None = None) -> int:
    p = ArgumentParser(prog="python -m bench.tas_cost", description=__doc__)
    p.add_argument("--jobs", type=int, default=100, help="jobs a pass (100)")
    p.add_argument("--replicas", type=int, default=4, help="pods a job (4)")
    p.add_argument("--run-seconds", type=int, default=5, help="seconds each pod runs (5)")
    p.add_argument("--timeout", type=float, default=600, help="seconds a pass may take (600)")
    p.add_argument("--cluster-dir", type=Path, default=Path("/tmp/bench-cluster"))
    p.add_argument("--out", type=Path, default=Path("/tmp/t9kjobs-bench/tas-cost"))
    args = p.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    load = [os.getloadavg()]
    cluster = Cluster(args.cluster_dir, max(110, args.jobs * args.replicas // 4 + 10), kueue=True)
    operator = OurOperator()
    cluster.up()
    try:
        operator.prepare(cluster)
        operator.start(cluster, args.out / "operator.log")
        operator.wait_ready()
        topology(cluster)
        transport = Transport(load_configuration(cluster.kubeconfig), qps=0)
        rows = [run_pass(label, cluster, transport, operator, args) for label in ("queued", "tas")]
    finally:
        operator.stop()
        cluster.down()
    load.append(os.getloadavg())
    report = table(rows[0], rows[1], [tuple(round(x, 2) for x in la) for la in load])
    (args.out / "results.json").write_text(json.dumps({"rows": rows, "load": load}, indent=1))
    (args.out / "summary.md").write_text(report + "\n")
    print(report)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
