"""`python -m bench.progress` (`make bench-progress`): what reading training progress costs at
N running jobs (500) on KWOK nodes, in requests per running job per minute.

On a fresh control plane, N PyTorchTrainingJobs of `--replicas` pods (2) that run for as long
as the benchmark does, in the namespace whose pods KWOK serves a log (hack/cluster/kwok): every
pod's log is one file, to which a writer appends a new progress report every second, so every
read the operator makes finds a newer report than the last: the dearest case, a status write
for every read. Once every job runs and the operator has read each at least once, its request
counters and the CPU seconds of it and of kube-apiserver are taken over `--window` seconds
(300). `--ours-arg` passes flags to the operator (`--progress-qps=0`: progress off, the
baseline the difference is measured against). Not part of `make test`.
"""

from __future__ import annotations

import argparse
import json
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from pathlib import Path

from bench.cluster import Cluster
from bench.operators import OurOperator
from bench.procstat import cpu_seconds
from bench.scale import log, wait_for
from t9kjobs.kube.transport import Transport, load_configuration
from t9kjobs.progress import MARKER
from t9kjobs.vocabulary import Obj

__all__ = ["main"]

REPO = Path(__file__).resolve().parents[1]


def writer(path: Path, stop: threading.Event) -> None:
    """A new report every second, in the CRI form kwok serves."""
    step = 0
    while not stop.wait(1.0):
        step += 1
        stamp = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
        with path.open("a") as f:
            f.write(f"{stamp} stdout F {MARKER} step={step} total=1000000 loss={1 / step:.6f}\n")


def running(transport: Transport, path: str) -> tuple[int, int]:
    """Jobs Running, and of them those with a progress in their status."""
    items = transport.request("GET", path).get("items") or []
    up = [j for j in items if (j.get("status") or {}).get("phase") == "Running"]
    return len(up), sum(1 for j in up if (j.get("status") or {}).get("progress"))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.progress", description=__doc__)
    parser.add_argument("--jobs", type=int, default=500, help="running jobs (500)")
    parser.add_argument("--replicas", type=int, default=2, help="pods a job (2)")
    parser.add_argument("--window", type=float, default=300.0, help="seconds measured (300)")
    parser.add_argument("--ours-arg", action="append", default=[], help="an operator flag")
    parser.add_argument("--cluster-dir", type=Path, default=Path("/tmp/bench-cluster"))
    parser.add_argument("--out", type=Path, default=REPO / "build" / "bench-progress")
    a = parser.parse_args(argv)
    a.out.mkdir(parents=True, exist_ok=True)
    cluster = Cluster(a.cluster_dir, pods_per_node=a.jobs * a.replicas // 4 + 110)
    log(f"progress: starting a fresh cluster at {a.cluster_dir}")
    cluster.up()
    namespace = cluster.facts["KWOK_LOG_NAMESPACE"]
    path = f"/apis/batch.tensorstack.dev/v1beta1/namespaces/{namespace}/pytorchtrainingjobs"
    op = OurOperator(a.ours_arg)
    stop = threading.Event()
    feeder = threading.Thread(
        target=writer, args=(Path(cluster.facts["KWOK_LOG_FILE"]), stop), daemon=True
    )
    try:
        cluster.create_namespace(namespace)
        op.prepare(cluster)
        op.start(cluster, a.out / "operator.log")
        op.wait_ready(timeout=120)
        feeder.start()
        transport = Transport(load_configuration(cluster.kubeconfig), qps=0)

        def submit(i: int) -> None:
            job: Obj = op.job(f"progress-{i}", a.replicas, 24 * 3600)
            job["metadata"]["namespace"] = namespace
            transport.request("POST", path, body=job)

        with ThreadPoolExecutor(16) as pool:
            list(pool.map(submit, range(a.jobs)))
        log(f"progress: {a.jobs} jobs submitted; waiting for them to run")
        wait_for(lambda: running(transport, path)[0] == a.jobs, 900, "every job Running")
        off = any(arg.startswith("--progress-qps=0") for arg in a.ours_arg)
        if not off:
            wait_for(
                lambda: running(transport, path)[1] == a.jobs, 900, "every job's first progress"
            )
        log(f"progress: every job runs{'' if off else ' with its progress'}; measuring")
        pids = cluster.pids()
        before = op.api_requests()
        cpu_before = {
            "operator": cpu_seconds(op.pid),
            "kube-apiserver": cpu_seconds(pids["kube-apiserver"]),
        }
        started = time.monotonic()
        time.sleep(a.window)
        after = op.api_requests()
        cpu_after = {
            "operator": cpu_seconds(op.pid),
            "kube-apiserver": cpu_seconds(pids["kube-apiserver"]),
        }
        minutes = (time.monotonic() - started) / 60
        up, with_progress = running(transport, path)
    finally:
        stop.set()
        op.stop()
        cluster.down()
    delta = {k: after.get(k, 0.0) - before.get(k, 0.0) for k in after}
    per_job_minute = {k: round(v / a.jobs / minutes, 3) for k, v in sorted(delta.items()) if v > 0}
    result = {
        "jobs": a.jobs,
        "replicas": a.replicas,
        "operator_args": a.ours_arg,
        "window_seconds": round(minutes * 60, 1),
        "running_at_end": up,
        "with_progress_at_end": with_progress,
        "requests": {k: int(v) for k, v in sorted(delta.items()) if v > 0},
        "requests_per_job_minute": per_job_minute,
        "all_requests_per_job_minute": round(sum(delta.values()) / a.jobs / minutes, 3),
        "cpu_seconds": {k: round(cpu_after[k] - cpu_before[k], 1) for k in cpu_before},
    }
    name = "off" if any(arg.startswith("--progress-qps=0") for arg in a.ours_arg) else "on"
    (a.out / f"progress-{name}.json").write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
