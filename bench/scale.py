"""The scale benchmark: N jobs x R replicas submitted at once to our operator, to Kubeflow's
training operator (at its defaults, then with our client QPS), and the same pods created
directly by a plain parallel client, each phase on a fresh local control plane.

    python -m bench [--jobs 500] [--replicas 4] [--pod-cpu 10m]
        [--phases raw,ours,ours-no-gangs,ours-kueue,to-default,to-qps]

`ours` runs the operator as installed. Its pods reserve nothing unless `--pod-cpu` gives every
pod of every phase a CPU request: then each job is a gang (kube-scheduler's PodGroup, which
the benchmark's cluster serves like every local cluster), else none (docs/scheduling.md,
"Gangs that buy nothing"). `ours-no-gangs` is the same with `--gang-scheduling=none`, pods
placed one by one: with `--pod-cpu`, the cost of gangs is the difference.
`ours-kueue` runs the same jobs through Kueue (hack/cluster/kueue): each labelled with a
LocalQueue whose ClusterQueue has quota for every pod at once, so each waits only for its
admission: the cost of queueing is its difference from `ours`.

With `--arrival-rate R --arrival-seconds S` the jobs are not submitted at once but arrive as a
Poisson process of R jobs a second for S seconds (R x S jobs): the steady-state latency.

Writes results.json, summary.md, pods.png and each phase's logs into --out.
"""

from __future__ import annotations

import argparse
import json
import logging
import math
import os
import platform
import random
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from pathlib import Path

from bench.cluster import Cluster
from bench.operators import KubeflowOperator, OperatorUnderTest, OurOperator
from bench.pprof import ControlPlaneProfiler
from bench.pprof import summarize as summarize_pprof
from bench.procstat import Sampler, cpu_seconds, peak_rss_bytes
from bench.recorder import Recorder
from bench.report import markdown_table, plot_pods, status_writes, timeline_figures
from bench.workload import NAMESPACE, post_items, raw_pods, requesting_cpu
from t9kjobs.controller.operator import Options
from t9kjobs.kube.transport import ApiError, Transport, load_configuration
from t9kjobs.vocabulary import Obj

__all__ = ["main"]

REPO = Path(__file__).resolve().parents[1]
PHASES = ("raw", "ours", "ours-no-gangs", "ours-kueue", "to-default", "to-qps")
QUEUE = "bench"  # the LocalQueue of the ours-kueue phase
NODES = 4  # hack/cluster's default number of fake nodes


def log(message: str) -> None:
    print(f"[bench {datetime.now().strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def build_tools() -> Path:
    done = subprocess.run(
        [REPO / "bench" / "build.sh"], stdout=subprocess.PIPE, text=True, timeout=1800
    )
    if done.returncode != 0:
        raise SystemExit("bench/build.sh failed")
    return Path(done.stdout.strip())


def machine() -> Obj:
    with open("/proc/cpuinfo") as f:
        models = [line.split(":", 1)[1].strip() for line in f if line.startswith("model name")]
    with open("/proc/meminfo") as f:
        mem_kib = int(f.readline().split()[1])
    return {
        "cpus": os.cpu_count(),
        "cpu_model": models[0] if models else platform.processor(),
        "memory_gib": round(mem_kib / 2**20, 1),
        "kernel": platform.release(),
        "python": platform.python_version(),
        "go": subprocess.run(["go", "version"], capture_output=True, text=True).stdout.strip(),
    }


def load_average() -> str:
    with open("/proc/loadavg") as f:
        return " ".join(f.read().split()[:3])


class Phase:
    """One run of the workload on a fresh cluster."""

    def __init__(
        self,
        key: str,
        args: argparse.Namespace,
        tools: Path,
        operator: OperatorUnderTest | None,
        title: str,
    ) -> None:
        self.key = key
        self.args = args
        self.tools = tools
        self.operator = operator
        self.title = title
        self.dir: Path = args.out / key
        self.dir.mkdir(parents=True, exist_ok=True)
        self.names = [f"bench-{i}" for i in range(args.jobs)]
        self.pods = args.jobs * args.replicas

    def items(self) -> list[Obj]:
        a = self.args
        if self.operator is None:
            pods = requesting_cpu(raw_pods(self.names, a.replicas, a.run_seconds), a.pod_cpu)
            return post_items(pods, "pods", "v1")
        jobs = [self.operator.job(n, a.replicas, a.run_seconds) for n in self.names]
        requesting_cpu(jobs, a.pod_cpu)
        if self.key == "ours-kueue":
            for job in jobs:
                job["metadata"]["labels"] = {"kueue.x-k8s.io/queue-name": QUEUE}
        return post_items(jobs, self.operator.jobs.plural, self.operator.jobs.api_version)

    def queue(self, cluster: Cluster) -> None:
        """A LocalQueue in the workload's namespace, its ClusterQueue with quota for every pod
        at once (Kueue counts pods, and the CPU they request with `--pod-cpu`)."""
        cpu_quota = "\n      - {name: cpu, nominalQuota: 100000}" if self.args.pod_cpu else ""
        cluster.apply(
            f"""
apiVersion: kueue.x-k8s.io/v1beta2
kind: ResourceFlavor
metadata: {{name: {QUEUE}}}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata: {{name: {QUEUE}}}
spec:
  namespaceSelector: {{}}
  resourceGroups:
  - coveredResources: [pods{", cpu" if self.args.pod_cpu else ""}]
    flavors:
    - name: {QUEUE}
      resources:
      - {{name: pods, nominalQuota: {self.pods}}}{cpu_quota}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: LocalQueue
metadata: {{name: {QUEUE}, namespace: {NAMESPACE}}}
spec: {{clusterQueue: {QUEUE}}}
"""
        )

    def submit(self, cluster: Cluster, items: list[Obj]) -> list[Obj]:
        """POST every item, at once or as they arrive (`--arrival-rate`); their results."""
        if self.args.arrival_rate:
            return self.submit_arriving(cluster, items)
        return self.submit_at_once(cluster, items)

    def submit_arriving(self, cluster: Cluster, items: list[Obj]) -> list[Obj]:
        """POST each item at its arrival time: exponential gaps of mean 1/rate (a seeded
        generator, so runs get the same arrivals). Each result is {name, end, code}, like
        bench-create's."""
        transport = Transport(load_configuration(cluster.kubeconfig), qps=0)
        gaps = random.Random(self.args.seed)
        results: list[Obj] = []

        def post(item: Obj) -> None:
            code = 201
            try:
                transport.request("POST", item["path"], body=item["body"])
            except ApiError as exc:
                code = exc.status
            name = item["body"]["metadata"]["name"]
            results.append({"name": name, "end": time.time(), "code": code})

        start = time.monotonic()
        due = 0.0
        with ThreadPoolExecutor(8) as pool:
            for item in items:
                due += gaps.expovariate(self.args.arrival_rate)
                time.sleep(max(0.0, start + due - time.monotonic()))
                pool.submit(post, item)
        failed = [r for r in results if not 200 <= r["code"] < 300]
        log(f"{len(results)} job(s) submitted over {time.monotonic() - start:.1f}s")
        if failed:
            raise RuntimeError(f"submission failed: {failed[:3]}")
        return results

    def submit_at_once(self, cluster: Cluster, items: list[Obj]) -> list[Obj]:
        """POST every item with bench-create; its per-request results."""
        path = self.dir / "items.jsonl"
        path.write_text("".join(json.dumps(i) + "\n" for i in items))
        done = subprocess.run(
            [
                self.tools / "bench-create",
                "--kubeconfig",
                cluster.kubeconfig,
                "--workers",
                str(self.args.client_workers),
                "--input",
                str(path),
            ],
            capture_output=True,
            text=True,
            timeout=self.timeout(),
        )
        log(done.stderr.strip())
        results = [json.loads(line) for line in done.stdout.splitlines() if line.strip()]
        if done.returncode != 0:
            failed = [r for r in results if not 200 <= r["code"] < 300][:3]
            raise RuntimeError(f"bench-create failed: {failed}")
        return results

    def run(self) -> Obj:
        a = self.args
        pods_per_node = max(110, math.ceil(self.pods / NODES) + 10)
        cluster = Cluster(
            a.cluster_dir,
            pods_per_node,
            kueue=self.key == "ours-kueue",
            profiling=a.profile_control_plane > 0,
        )
        log(f"{self.key}: starting a fresh cluster at {a.cluster_dir}")
        cluster.up()
        op = self.operator
        recorder: Recorder | None = None
        sampler: Sampler | None = None
        profiler: subprocess.Popen[bytes] | None = None
        control_plane: ControlPlaneProfiler | None = None
        try:
            cluster.create_namespace(NAMESPACE)
            if self.key == "ours-kueue":
                self.queue(cluster)
            items = self.items()
            if op is not None:
                op.prepare(cluster)
                op.start(cluster, self.dir / "operator.log")
                op.wait_ready(timeout=120)
                log(f"{self.key}: {op.title} ready (pid {op.pid})")
            transport = Transport(load_configuration(cluster.kubeconfig), qps=0)
            recorder = Recorder(
                transport,
                NAMESPACE,
                op.job_label if op else OurOperator.job_label,
                op.jobs if op else None,
                op.outcome if op else lambda _: None,
                op.status_label if op else lambda _: "",
            )
            recorder.start()
            pids = {**cluster.pids(), "bench": os.getpid()}
            if op is not None:
                pids["operator"] = op.pid
            if op is not None and a.profile and self.key.startswith("ours"):
                profiler = start_profiler(op.pid, self.dir / "profile.txt")
                pids["py-spy"] = profiler.pid  # its CPU is part of the machine's, not ours
            sampler = Sampler(pids)
            sampler.start()
            requests_before = op.api_requests() if op else {}
            cpu_before = cpu_seconds(op.pid) if op else 0.0
            work_before = op.work_counters() if op else {}

            if a.profile_control_plane:
                control_plane = ControlPlaneProfiler(
                    cluster.facts, self.dir, a.profile_control_plane
                )
                control_plane.start()
            t0 = time.time()
            log(f"{self.key}: submitting {len(items)} object(s)")
            created = self.submit(cluster, items)
            submitted = time.time()
            finished, timed_out = self.wait(recorder, op, t0)
            end = time.time()
            log(f"{self.key}: {'TIMED OUT' if timed_out else 'done'} after {end - t0:.1f}s")
            if control_plane is not None:
                for component, error in control_plane.join().items():
                    log(f"{self.key}: no profile of {component}: {error}")
                summarize_pprof(self.dir)
            result: Obj = {"phase": self.key, "title": self.title, "timed_out": timed_out}
            if op is not None:
                result["cpu_s"] = cpu_seconds(op.pid) - cpu_before
                result["peak_rss_mib"] = peak_rss_bytes(op.pid) / 2**20
                requests = settled_requests(op, a.settle)
                by_kind = {
                    k: int(v - requests_before.get(k, 0.0))
                    for k, v in sorted(requests.items())
                    if v > requests_before.get(k, 0.0)
                }
                total = sum(by_kind.values())
                result["requests"] = by_kind
                result["requests_total"] = total
                result["requests_per_job"] = total / a.jobs
                result["minimum_requests_per_job"] = op.minimum_requests(a.replicas)
                result["requests_ratio"] = total / a.jobs / op.minimum_requests(a.replicas)
                work = op.work_counters()
                result["work"] = {
                    k: round(v - work_before.get(k, 0.0), 3) for k, v in sorted(work.items())
                }
                reconciles = sum(v for k, v in result["work"].items() if k.startswith("reconciles"))
                result["reconciles_per_job"] = reconciles / a.jobs if work else None
            sampler.stop()
            cpu = sampler.cpu_between(t0, end)
            result["control_plane_cpu_s"] = {k: round(v, 1) for k, v in cpu.items()}
            result["apiserver_cpu_s"] = cpu.get("kube-apiserver")
            result["submit_s"] = submitted - t0
            result["end_s"] = end - t0
            job_created = {r["name"]: r["end"] for r in created} if op is not None else {}
            timeline = recorder.snapshot()
            result.update(timeline_figures(timeline, t0, job_created))
            if result["all_pods_exist_s"]:
                creating = sampler.cpu_between(t0, t0 + result["all_pods_exist_s"])
                result["creation_cpu_s"] = {k: round(v, 1) for k, v in creating.items()}
            result["cpu_samples"] = [
                [round(s.t - t0, 2), {k: round(v, 2) for k, v in s.cpu.items()}]
                for s in sampler.samples
            ]
            result["pod_times"] = sorted(t - t0 for t in timeline.pod_created.values())
            result["pod_events_per_pod"] = timeline.pod_events / max(1, len(timeline.pod_created))
            if op is not None:
                result["status_writes"] = status_writes(timeline.job_writes, a.jobs)
            result["finished"] = finished
            return result
        finally:
            if profiler is not None:
                stop_profiler(profiler)
            if recorder is not None:
                recorder.stop()
            if sampler is not None:
                sampler.stop()
            if op is not None:
                op.stop()
            cluster.down()
            log(f"{self.key}: cluster stopped")

    def timeout(self) -> float:
        """Seconds the phase may take: the training operator's may be shorter; arrivals add
        their own span."""
        a = self.args
        limit = a.kubeflow_timeout if isinstance(self.operator, KubeflowOperator) else None
        return (limit or a.phase_timeout) + (a.arrival_seconds if a.arrival_rate else 0.0)

    def wait(
        self, recorder: Recorder, op: OperatorUnderTest | None, t0: float
    ) -> tuple[bool, bool]:
        """Until every pod exists and every job has finished (the raw phase: every pod has
        finished), or the phase's time is up. (finished, timed out)."""
        deadline = t0 + self.timeout()
        last_report = time.monotonic()
        while time.time() < deadline:
            pods, finished, succeeded, failed = recorder.counts()
            done = pods >= self.pods and (
                finished >= self.pods if op is None else succeeded + failed >= self.args.jobs
            )
            if done:
                return True, False
            if op is not None and op.exited():
                raise RuntimeError(f"{op.name} exited during the phase: see {op.log}")
            if time.monotonic() - last_report > 15:
                last_report = time.monotonic()
                log(
                    f"{self.key}: {time.time() - t0:.0f}s: pods {pods}/{self.pods}, finished"
                    f" {finished}, jobs succeeded {succeeded}, failed {failed}"
                )
            time.sleep(0.25)
        return False, True


def settled_requests(op: OperatorUnderTest, quiet: float, limit: float = 120) -> dict[str, float]:
    """The operator's request counts once they have not changed for `quiet` seconds: the
    workload's trailing requests (last status writes, queued Events) count too."""
    counts, since, deadline = op.api_requests(), time.monotonic(), time.monotonic() + limit
    while time.monotonic() - since < quiet and time.monotonic() < deadline:
        time.sleep(0.5)
        latest = op.api_requests()
        if latest != counts:
            counts, since = latest, time.monotonic()
    return counts


def wait_for(predicate: Callable[[], bool], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out waiting for {what}")
        time.sleep(0.5)


def start_profiler(pid: int, output: Path) -> subprocess.Popen[bytes]:
    """py-spy sampling the operator (collapsed stacks), installed by bench/requirements.txt."""
    py_spy = Path(sys.executable).parent / "py-spy"
    # What py-spy says, if it stops sampling before the phase ends, beside its output.
    log = output.with_suffix(".log").open("wb")
    return subprocess.Popen(
        [
            py_spy,
            "record",
            "--pid",
            str(pid),
            "--rate",
            "50",
            "--format",
            "raw",
            "--nonblocking",
            "--idle",
            "--threads",
            "--output",
            str(output),
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
    )


def stop_profiler(proc: subprocess.Popen[bytes]) -> None:
    proc.send_signal(signal.SIGINT)  # py-spy writes its output when interrupted
    try:
        proc.wait(60)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def make_phase(key: str, args: argparse.Namespace, tools: Path) -> Phase:
    defaults = Options()
    if key == "raw":
        title = f"raw client ({args.client_workers} parallel)"
        return Phase(key, args, tools, None, title)
    if key in ("ours", "ours-no-gangs", "ours-kueue"):
        extra = [*args.ours_arg, *(["--gang-scheduling=none"] if key == "ours-no-gangs" else [])]
        title = "t9k-jobs (ours)" + "".join(f" {a}" for a in extra)
        ours = OurOperator(extra, reserving=args.pod_cpu is not None)
        if key == "ours-kueue":
            title += " through Kueue"
            ours.queued = 2
        return Phase(key, args, tools, ours, title)
    if key == "to-default":
        return Phase(key, args, tools, KubeflowOperator(tools), "training operator (defaults)")
    qps = [f"--kube-api-qps={int(defaults.qps)}", f"--kube-api-burst={defaults.burst}"]
    return Phase(
        key,
        args,
        tools,
        KubeflowOperator(tools, qps),
        f"training operator (QPS {int(defaults.qps)}/{defaults.burst})",
    )


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m bench", description=__doc__.split("\n\n")[0])
    p.add_argument("--jobs", type=int, default=500, help="jobs to submit at once (500)")
    p.add_argument(
        "--replicas", type=int, default=4, help="pods per job: 1 master + R-1 workers (4)"
    )
    p.add_argument("--run-seconds", type=int, default=5, help="simulated run time of every pod (5)")
    p.add_argument(
        "--phases", default=",".join(PHASES), help=f"comma-separated subset of {','.join(PHASES)}"
    )
    p.add_argument(
        "--pod-cpu",
        help="CPU every pod of every phase requests (e.g. 10m); pods that reserve something are"
        " gangs under the operator's default, pods that reserve nothing are not (default: none)",
    )
    p.add_argument(
        "--client-workers", type=int, default=32, help="parallel requests of the plain client (32)"
    )
    p.add_argument(
        "--phase-timeout", type=float, default=900, help="seconds a phase may take (900)"
    )
    p.add_argument(
        "--kubeflow-timeout",
        type=float,
        help="seconds a training operator phase may take (default: --phase-timeout)",
    )
    p.add_argument(
        "--arrival-rate",
        type=float,
        help="jobs a second arriving as a Poisson process, instead of all at once",
    )
    p.add_argument(
        "--arrival-seconds",
        type=float,
        default=300,
        help="how long jobs arrive, with --arrival-rate (300); --jobs is then rate x seconds",
    )
    p.add_argument("--seed", type=int, default=1, help="seed of the arrival times (1)")
    p.add_argument(
        "--settle",
        type=float,
        default=3,
        help="seconds without a new request before the final count (3)",
    )
    p.add_argument(
        "--cluster-dir",
        type=Path,
        default=Path("/tmp/bench-cluster"),
        help="the benchmark's own cluster dir",
    )
    p.add_argument("--out", type=Path, help="output dir (default /tmp/t9kjobs-bench/<time>)")
    p.add_argument(
        "--profile",
        action="store_true",
        help="sample our operator with py-spy in each of its phases (skews its figures)",
    )
    p.add_argument(
        "--profile-control-plane",
        type=int,
        default=0,
        metavar="SECONDS",
        help="a CPU profile of kube-apiserver, kube-scheduler and kube-controller-manager over"
        " the first SECONDS of each phase, into its output dir (bench/pprof.py)",
    )
    p.add_argument(
        "--ours-arg",
        action="append",
        default=[],
        metavar="ARG",
        help="extra argument of `t9kjobs operator` (repeatable)",
    )
    p.add_argument(
        "--report",
        type=Path,
        metavar="RESULTS",
        help="only redo summary.md and pods.png from a results.json, into --out",
    )
    args = p.parse_args(argv)
    args.phases = [k for k in args.phases.split(",") if k]
    unknown = set(args.phases) - set(PHASES)
    if unknown:
        p.error(f"unknown phase(s): {', '.join(sorted(unknown))}")
    if args.replicas < 2:
        p.error("--replicas must be at least 2 (a master and a worker)")
    if args.arrival_rate is not None:
        if args.arrival_rate <= 0 or args.arrival_seconds <= 0:
            p.error("--arrival-rate and --arrival-seconds must be positive")
        if "raw" in args.phases:
            p.error("--arrival-rate: the raw phase submits pods, not jobs; leave it out")
        args.jobs = max(1, round(args.arrival_rate * args.arrival_seconds))
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    args.out = (args.out or Path("/tmp/t9kjobs-bench") / stamp).resolve()
    return args


def write_report(info: Obj, results: list[Obj], out: Path) -> str:
    """summary.md and pods.png of the phases that ran; the table."""
    ok = [r for r in results if "error" not in r]
    table = markdown_table(ok)
    title = f"{info['jobs']} jobs x {info['replicas']} pods: pods created over time"
    plot_pods(ok, out / "pods.png", title)
    (out / "summary.md").write_text(table + "\n")
    return table


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    if args.report:
        saved = json.loads(args.report.read_text())
        print(write_report(saved, saved["results"], args.out))
        return 0
    # The recorder's watches end with the cluster of each phase; that is not worth a warning.
    logging.getLogger("t9kjobs").setLevel(logging.ERROR)
    tools = build_tools()
    info: Obj = {
        "command": " ".join(["python -m bench", *(argv if argv is not None else sys.argv[1:])]),
        "arrival_rate": args.arrival_rate,
        "arrival_seconds": args.arrival_seconds if args.arrival_rate else None,
        "started": datetime.now(UTC).isoformat(timespec="seconds"),
        "machine": machine(),
        "load_before": load_average(),
        "jobs": args.jobs,
        "replicas": args.replicas,
        "run_seconds": args.run_seconds,
        "tools": (tools / "BUILD_INFO").read_text().splitlines(),
    }
    log(
        f"{args.jobs} jobs x {args.replicas} replicas; load average {info['load_before']};"
        f" out {args.out}"
    )
    results = []
    for key in args.phases:
        try:
            results.append(make_phase(key, args, tools).run())
        except Exception as exc:  # one broken phase must not lose the others' figures
            log(f"{key}: FAILED: {exc}")
            results.append({"phase": key, "title": key, "error": str(exc)})
        (args.out / "results.json").write_text(json.dumps({**info, "results": results}, indent=1))
    info["load_after"] = load_average()
    (args.out / "results.json").write_text(json.dumps({**info, "results": results}, indent=1))
    print(write_report(info, results, args.out))
    log(f"load average after: {info['load_after']}; results in {args.out}")
    return 0 if all("error" not in r for r in results) else 1
