"""What the printer columns of `kubectl get t9k` cost the API server when it lists jobs.

`python -m bench.columns [--jobs 500] [--rounds 40]` starts a KWOK control plane of its own
(`--cluster-dir`), installs the GenericJob CRD, creates N GenericJobs and writes each a status
as the operator would (running or failed, conditions, `ready`, `backoffCount`); no operator
runs, so nothing else loads the API server. It then lists the N jobs R times in each of three
ways, with the CRD's columns set to each variant in turn:

* `json`: the plain list (what `kubectl get -o json` and informers read): no column is built;
* `table`: the list as a Table (what `kubectl get` reads), for the columns variant at hand.

Variants: `none` (no additionalPrinterColumns: NAME and AGE only), `before` (PHASE, RUNNING,
AGE: the columns before this change) and `now` (the generated ones: PHASE, REPLICAS, RESTARTS,
REASON with a JSONPath filter, AGE and four `-o wide` columns). For each: the median and 90th
percentile of the request's wall time and the API server's CPU time per request (from
/proc/<pid>/stat). The columns are JSONPaths evaluated when a Table is built, at read time,
on objects the API server already holds: nothing is stored or computed at write time.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time
from pathlib import Path
from typing import Any

import yaml

from bench.cluster import Cluster
from t9kjobs.crds import crd_for
from t9kjobs.kube.transport import Transport, load_configuration
from t9kjobs.manager import load_plugins

TABLE = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json"
BEFORE = [
    {"name": "Phase", "type": "string", "jsonPath": ".status.phase"},
    {"name": "Running", "type": "integer", "jsonPath": ".status.aggregate.running"},
    {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"},
]


def _cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _status(i: int) -> dict[str, Any]:
    now = "2026-01-01T00:00:00Z"
    failed = i % 3 == 0
    conditions = [
        {"type": "Initialized", "status": "True", "reason": "PodsCreated",
         "lastTransitionTime": now},
        {"type": "Running", "status": "False" if failed else "True", "reason": "PodsRunning",
         "lastTransitionTime": now},
    ]  # fmt: skip
    if failed:
        conditions.append(
            {"type": "Failed", "status": "True", "reason": "ReplicaFailed",
             "message": f"job-{i}-worker-0 failed with exit code 1 (container c)",
             "lastTransitionTime": now}
        )  # fmt: skip
    return {
        "phase": "Failed" if failed else "Running",
        "ready": "0/4" if failed else "4/4",
        "backoffCount": i % 4,
        "runMode": "Immediate",
        "startTime": now,
        "conditions": conditions,
        "aggregate": {"running": 0 if failed else 4, "failed": 1 if failed else 0},
    }


def _job(i: int) -> dict[str, Any]:
    template = {"spec": {"containers": [{"name": "c", "image": "busybox", "command": ["true"]}]}}
    return {
        "apiVersion": "batch.tensorstack.dev/v1beta1",
        "kind": "GenericJob",
        "metadata": {"name": f"job-{i}", "namespace": "default"},
        "spec": {"replicaSpecs": [{"type": "worker", "replicas": 4, "template": template}]},
    }


def _set_columns(cluster: Cluster, crd: dict[str, Any], columns: list[dict[str, Any]]) -> None:
    version = crd["spec"]["versions"][0]
    version.pop("additionalPrinterColumns", None)
    if columns:
        version["additionalPrinterColumns"] = columns
    text = yaml.safe_dump(crd)
    cluster.kubectl("apply", "--server-side", "--force-conflicts", "-f", "-", stdin=text)
    cluster.kubectl("wait", "--for=condition=Established", "crd/genericjobs.batch.tensorstack.dev")
    time.sleep(3)  # the API server swaps in the CRD's new handler


def _measure(http: Transport, accept: str, rounds: int, apiserver: int) -> dict[str, float]:
    path = "/apis/batch.tensorstack.dev/v1beta1/namespaces/default/genericjobs"
    walls = []
    cpu0 = _cpu_seconds(apiserver)
    for _ in range(rounds):
        t0 = time.perf_counter()
        answer = http.request("GET", path, accept=accept)
        walls.append(time.perf_counter() - t0)
        assert answer.get("kind") in ("Table", "GenericJobList"), answer.get("kind")
    cpu = (_cpu_seconds(apiserver) - cpu0) / rounds
    walls.sort()
    return {
        "median_ms": 1000 * statistics.median(walls),
        "p90_ms": 1000 * walls[int(0.9 * (len(walls) - 1))],
        "apiserver_cpu_ms": 1000 * cpu,
    }


def main() -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.columns", description=__doc__)
    parser.add_argument("--jobs", type=int, default=500)
    parser.add_argument("--rounds", type=int, default=40)
    parser.add_argument("--cluster-dir", type=Path, default=Path("/tmp/bench-columns"))
    args = parser.parse_args()

    cluster = Cluster(args.cluster_dir, pods_per_node=110)
    cluster.up()
    try:
        crd = crd_for(load_plugins().kind_info("GenericJob"))
        now = list(crd["spec"]["versions"][0]["additionalPrinterColumns"])
        _set_columns(cluster, crd, now)
        http = Transport(load_configuration(cluster.kubeconfig), qps=0)
        base = "/apis/batch.tensorstack.dev/v1beta1/namespaces/default/genericjobs"
        for i in range(args.jobs):
            created = http.request("POST", base, body=_job(i))
            http.request("PUT", f"{base}/job-{i}/status", body={**created, "status": _status(i)})
        apiserver = cluster.pids()["kube-apiserver"]
        results: dict[str, Any] = {"jobs": args.jobs, "rounds": args.rounds}
        for variant, columns in (("none", []), ("before", BEFORE), ("now", now)):
            _set_columns(cluster, crd, columns)
            _measure(http, TABLE, 5, apiserver)  # warm up
            results[variant] = {
                "json": _measure(http, "application/json", args.rounds, apiserver),
                "table": _measure(http, TABLE, args.rounds, apiserver),
            }
        print(json.dumps(results, indent=2))
    finally:
        cluster.down()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
