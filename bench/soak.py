"""`python -m bench.soak` (`make soak`): does the operator give memory back? 2,000 jobs created
and deleted in waves against one operator process on a fresh control plane, its resident memory
(VmRSS) measured once each wave is gone and the operator idle. It passes when the RSS after the
last wave is within 10% of the RSS after the first (docs/reliability.md).

Each wave: N PyTorchTrainingJobs (a master and a worker, pods run 2 s and exit 0) created at
once, all of them Succeeded, all deleted, every pod gone, the operator's queue empty for a few
seconds. Not part of `make test` (about 15 minutes on 2 cores).
"""

from __future__ import annotations

import argparse
import json
import math
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from bench.cluster import Cluster
from bench.operators import OurOperator, scrape
from bench.scale import log, wait_for
from bench.workload import NAMESPACE
from t9kjobs.kube.transport import ApiError, Transport, load_configuration
from t9kjobs.vocabulary import Obj

__all__ = ["main"]

REPO = Path(__file__).resolve().parents[1]
JOBS = f"/apis/batch.tensorstack.dev/v1beta1/namespaces/{NAMESPACE}/pytorchtrainingjobs"
PODS = f"/api/v1/namespaces/{NAMESPACE}/pods"


def rss_mib(pid: int) -> float:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0


def count(transport: Transport, path: str, keep: Callable[[Obj], bool] = lambda _: True) -> int:
    return sum(1 for o in transport.request("GET", path).get("items") or [] if keep(o))


def succeeded(job: Obj) -> bool:
    return (job.get("status") or {}).get("phase") == "Succeeded"


def idle(op: OurOperator, quiet: float) -> None:
    """Until the operator's request counts stood still for `quiet` seconds."""
    url = f"http://127.0.0.1:{op.metrics_port}/metrics"
    last, since = scrape(url, "t9kjobs_api_requests_total", ("verb",)), time.monotonic()
    while time.monotonic() - since < quiet:
        time.sleep(0.5)
        now = scrape(url, "t9kjobs_api_requests_total", ("verb",))
        if now != last:
            last, since = now, time.monotonic()


def wave(op: OurOperator, transport: Transport, index: int, size: int, timeout: float) -> None:
    names = [f"soak-{index}-{i}" for i in range(size)]
    with ThreadPoolExecutor(16) as pool:
        list(pool.map(lambda n: transport.request("POST", JOBS, body=op.job(n, 2, 2)), names))
    wait_for(lambda: count(transport, JOBS, succeeded) == size, timeout, f"wave {index} to succeed")
    body = {"kind": "DeleteOptions", "apiVersion": "v1", "propagationPolicy": "Background"}

    def delete(name: str) -> None:
        try:
            transport.request("DELETE", f"{JOBS}/{name}", body=body)
        except ApiError as exc:
            if exc.status != 404:
                raise

    with ThreadPoolExecutor(16) as pool:
        list(pool.map(delete, names))
    wait_for(
        lambda: count(transport, JOBS) == 0 and count(transport, PODS) == 0,
        timeout,
        f"wave {index} and its pods to be gone",
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.soak", description=__doc__)
    parser.add_argument("--jobs", type=int, default=2000, help="jobs in all (2000)")
    parser.add_argument("--waves", type=int, default=10, help="waves (10)")
    parser.add_argument("--cluster-dir", type=Path, default=Path("/tmp/soak-cluster"))
    parser.add_argument("--out", type=Path, default=REPO / "build" / "soak")
    parser.add_argument("--quiet", type=float, default=10.0, help="idle seconds before a sample")
    parser.add_argument("--wave-timeout", type=float, default=600.0)
    a = parser.parse_args(argv)
    size = math.ceil(a.jobs / a.waves)
    a.out.mkdir(parents=True, exist_ok=True)
    cluster = Cluster(a.cluster_dir, pods_per_node=max(110, size))
    log(f"soak: starting a fresh cluster at {a.cluster_dir}")
    cluster.up()
    op = OurOperator()
    samples: list[Obj] = []
    try:
        cluster.create_namespace(NAMESPACE)
        op.prepare(cluster)
        op.start(cluster, a.out / "operator.log")
        op.wait_ready(timeout=120)
        transport = Transport(load_configuration(cluster.kubeconfig), qps=0)
        idle(op, a.quiet)
        samples.append({"wave": 0, "jobs": 0, "rss_mib": round(rss_mib(op.pid), 1)})
        log(f"soak: idle before any job, RSS {samples[-1]['rss_mib']} MiB")
        started = time.monotonic()
        for index in range(1, a.waves + 1):
            wave(op, transport, index, size, a.wave_timeout)
            idle(op, a.quiet)
            samples.append(
                {
                    "wave": index,
                    "jobs": index * size,
                    "rss_mib": round(rss_mib(op.pid), 1),
                    "seconds": round(time.monotonic() - started),
                }
            )
            log(f"soak: wave {index}/{a.waves} done, RSS {samples[-1]['rss_mib']} MiB")
            if op.exited():
                raise RuntimeError(f"the operator exited: see {op.log}")
    finally:
        op.stop()
        cluster.down()
    first, last = samples[1]["rss_mib"], samples[-1]["rss_mib"]
    growth = (last - first) / first
    result = {
        "jobs": a.waves * size,
        "waves": a.waves,
        "samples": samples,
        "growth_after_first_wave": round(growth, 3),
        "pass": growth <= 0.10,
    }
    (a.out / "soak.json").write_text(json.dumps(result, indent=2) + "\n")
    table = ["| after wave | jobs so far | RSS (MiB) |", "| --- | --- | --- |"]
    table += [f"| {s['wave']} | {s['jobs']} | {s['rss_mib']} |" for s in samples]
    (a.out / "soak.md").write_text("\n".join(table) + "\n")
    print("\n".join(table))
    verdict = "pass" if result["pass"] else "FAIL"
    print(f"RSS after the last wave vs after the first: {growth:+.1%} ({verdict})")
    return 0 if result["pass"] else 1


if __name__ == "__main__":
    raise SystemExit(main())
