"""`python -m bench.recovery` (`make bench-recovery`): how long a running job waits when a node
under it is lost (docs/lifecycle.md, "Lost nodes"; issue #48). On a fresh KWOK control plane
(bench/cluster.py) with our operator (bench/operators.py, `--lost-node-seconds`, 10 by
default), for each scenario and each of `--repetitions` runs:

- a GenericJob of two workers, 8 GPUs each, on a pool of three 8-GPU KWOK nodes of its own
  (tests/kwok_nodes.py), its pods running for ever;
- once both run, the node of worker-1 is broken as the node lifecycle controller sees a dead
  kubelet: `unreachable` (Ready Unknown, the unreachable taints), `notready` (Ready False, the
  not-ready taints), or `deleted` outright (KWOK stops driving it first, as a machine gone);
- timed from that moment (the Ready transition written, or the DELETE sent; this host's clock):
  the lost pod gone from the API (force-deleted by the operator), and its replacement Running
  on another node, as first seen by polling the pod every 0.1 s.

Prints a table of min / median / max (seconds) per scenario, written with every run's figures
to `--out` (recovery.md, recovery.json). On demand, never in CI (speed is measured here, never
asserted in tests); about 5 minutes at 5 repetitions.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from collections.abc import Callable
from pathlib import Path

from bench.cluster import Cluster
from bench.operators import OurOperator
from bench.scale import log
from bench.workload import NAMESPACE
from t9kjobs.kube.transport import ApiError, Transport, load_configuration
from t9kjobs.vocabulary import Obj
from tests.kwok_nodes import NodePool, pool_pod

__all__ = ["main"]

REPO = Path(__file__).resolve().parents[1]
JOBS = f"/apis/batch.tensorstack.dev/v1beta1/namespaces/{NAMESPACE}/genericjobs"
PODS = f"/api/v1/namespaces/{NAMESPACE}/pods"
SCENARIOS = ("unreachable", "notready", "deleted")


def _job(name: str, pool: str) -> Obj:
    container = {"name": "main", "image": "busybox", "command": ["train"]}
    template = pool_pod({"spec": {"containers": [container]}}, pool)
    spec = {"type": "worker", "replicas": 2, "restartPolicy": "Never", "template": template}
    return {
        "apiVersion": "batch.tensorstack.dev/v1beta1",
        "kind": "GenericJob",
        "metadata": {"name": name, "namespace": NAMESPACE},
        "spec": {"replicaSpecs": [spec]},
    }


def _pod(http: Transport, name: str) -> Obj | None:
    try:
        return http.request("GET", f"{PODS}/{name}")
    except ApiError as exc:
        if exc.status == 404:
            return None
        raise


def _running(pod: Obj | None) -> bool:
    return (
        pod is not None
        and (pod.get("status") or {}).get("phase") == "Running"
        and not pod["metadata"].get("deletionTimestamp")
    )


def _poll(what: str, look: Callable[[], bool], timeout: float, interval: float = 0.1) -> float:
    """The time `look()` first answered true (polled every `interval`)."""
    deadline = time.monotonic() + timeout
    while not look():
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(interval)
    return time.time()


def one_run(http: Transport, scenario: str, index: int, timeout: float) -> Obj:
    """One job, one node lost: the figures of the run."""
    name = f"rec-{scenario}-{index}"
    pool = NodePool(http, name, f"kwok-{name}", 3)
    pool.create()
    try:
        http.request("POST", JOBS, body=_job(name, name))
        pods = [f"{name}-worker-{i}" for i in range(2)]
        _poll(f"{pods} Running", lambda: all(_running(_pod(http, p)) for p in pods), timeout, 0.5)
        lost = _pod(http, pods[1])
        assert lost is not None
        node, uid = lost["spec"]["nodeName"], lost["metadata"]["uid"]
        if scenario == "deleted":
            pool.unmanage(node)  # KWOK stops driving it first: a machine gone
            broken = pool.remove(node)
        else:
            broken = pool.break_node(node, "Unknown" if scenario == "unreachable" else "False")

        def gone() -> bool:
            pod = _pod(http, pods[1])
            return pod is None or pod["metadata"]["uid"] != uid

        def replaced() -> bool:
            pod = _pod(http, pods[1])
            return _running(pod) and pod is not None and pod["metadata"]["uid"] != uid

        gone_at = _poll(f"{pods[1]} gone from {node}", gone, timeout)
        running_at = _poll(f"{pods[1]} replaced and Running", replaced, timeout)
        again = _pod(http, pods[1])
        assert again is not None and again["spec"]["nodeName"] != node, "replaced on the lost node"
        status = http.request("GET", f"{JOBS}/{name}").get("status") or {}
        return {
            "scenario": scenario,
            "run": index,
            "node": node,
            "lost_pod_gone_s": round(gone_at - broken, 2),
            "replacement_running_s": round(running_at - broken, 2),
            "infrastructureRestartCount": status.get("infrastructureRestartCount", 0),
            "backoffCount": status.get("backoffCount", 0),
        }
    finally:
        body = {"kind": "DeleteOptions", "apiVersion": "v1", "propagationPolicy": "Background"}
        try:
            http.request("DELETE", f"{JOBS}/{name}", body=body)
        except ApiError as exc:
            if exc.status != 404:
                raise
        pool.delete()


def table(runs: list[Obj], bound: float) -> str:
    lines = [
        f"`--lost-node-seconds {bound:g}`; seconds from the node lost (Ready transition written,"
        " or node deleted) to:",
        "",
        "| scenario | runs | lost pod gone: min / median / max | replacement Running: min / median"
        " / max |",
        "| --- | ---: | ---: | ---: |",
    ]
    for scenario in SCENARIOS:
        mine = [r for r in runs if r["scenario"] == scenario]
        if not mine:
            continue
        cells = []
        for key in ("lost_pod_gone_s", "replacement_running_s"):
            values = [r[key] for r in mine]
            cells.append(f"{min(values):.1f} / {statistics.median(values):.1f} / {max(values):.1f}")
        lines.append(f"| {scenario} | {len(mine)} | {cells[0]} | {cells[1]} |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.recovery", description=__doc__)
    parser.add_argument("--repetitions", type=int, default=5, help="runs per scenario (5)")
    parser.add_argument("--scenarios", default=",".join(SCENARIOS), help="(all three)")
    parser.add_argument("--lost-node-seconds", type=float, default=10.0, help="the bound (10)")
    parser.add_argument("--cluster-dir", type=Path, default=Path("/tmp/recovery-cluster"))
    parser.add_argument("--out", type=Path, default=REPO / "build" / "bench-recovery")
    parser.add_argument("--timeout", type=float, default=180.0, help="a wait's limit (180 s)")
    a = parser.parse_args(argv)
    scenarios = [s for s in a.scenarios.split(",") if s]
    unknown = set(scenarios) - set(SCENARIOS)
    if unknown:
        parser.error(f"--scenarios: unknown {sorted(unknown)}; choose among {list(SCENARIOS)}")
    a.out.mkdir(parents=True, exist_ok=True)
    cluster = Cluster(a.cluster_dir, pods_per_node=110)
    log(f"recovery: starting a fresh cluster at {a.cluster_dir}")
    cluster.up()
    op = OurOperator(["--lost-node-seconds", f"{a.lost_node_seconds:g}"])
    runs: list[Obj] = []
    try:
        cluster.create_namespace(NAMESPACE)
        op.prepare(cluster)
        op.start(cluster, a.out / "operator.log")
        op.wait_ready(timeout=120)
        http = Transport(load_configuration(cluster.kubeconfig), qps=0)
        for index in range(a.repetitions):
            for scenario in scenarios:
                runs.append(one_run(http, scenario, index, a.timeout))
                log(f"recovery: {runs[-1]}")
                if op.exited():
                    raise RuntimeError(f"the operator exited: see {op.log}")
    finally:
        op.stop()
        cluster.down()
    text = table(runs, a.lost_node_seconds)
    (a.out / "recovery.json").write_text(json.dumps(runs, indent=2) + "\n")
    (a.out / "recovery.md").write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
