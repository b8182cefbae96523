"""What admission costs a create, now that the operator serves a validating webhook (#52).

    python -m bench.admission_cost [--jobs 300] [--invalid 20] [--in-flight 1] [--out DIR]

Under `failurePolicy: Fail` every create and spec change of a job waits for the operator: the
API server calls it over TLS and it judges the job in Python. On one fresh KWOK control plane,
the same N valid PyTorchTrainingJobs are created twice (a namespace each): with no webhook
registered, then with the chart's configuration (`t9kjobs.testing.harness.webhook`). Per
create: the POST's latency as the client sees it, the CPU of kube-apiserver, etcd and the
operator from the first POST until kube-apiserver is quiet again (`bench.request_cost.Meter`),
the API server's requests by verb and its own timing of the webhook call. Then a few jobs
only the webhook refuses (torchrun without args, inside the schemaless pod template the CRD's
CEL cannot see): admitted without it, refused with it, and how long a refusal takes.

The operator runs in both passes but watches another namespace: it reconciles none of these
jobs, so what it spends in the second pass beyond the first is admission.
"""

from __future__ import annotations

import json
import os
import time
from argparse import ArgumentParser, Namespace
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from prometheus_client.parser import text_string_to_metric_families

from bench.cluster import Cluster
from bench.operators import OurOperator
from bench.procstat import cpu_seconds
from bench.request_cost import Meter
from bench.scale import log
from bench.workload import ours_job
from t9kjobs.kube.transport import ApiError, Transport, load_configuration
from t9kjobs.testing.harness import webhook
from t9kjobs.testing.harness.crds import install_crds
from t9kjobs.testing.harness.process import free_port
from t9kjobs.vocabulary import Obj

__all__ = ["main"]

WEBHOOK = "bench-admission-cost"
WEBHOOK_CALL = "jobs.batch.tensorstack.dev"  # the webhook's name in the API server's metrics
CALLS = "apiserver_admission_webhook_admission_duration_seconds"  # its timing of each call
ELSEWHERE = "bench-elsewhere"  # the one namespace the operator watches
WARM_UP = 10  # creates before each pass, not measured: connections, caches, the CRD's CEL
JOBS = "/apis/batch.tensorstack.dev/v1beta1/namespaces/{}/pytorchtrainingjobs"


def valid_job(name: str, namespace: str) -> Obj:
    job = ours_job(name, 4, 5)
    job["metadata"]["namespace"] = namespace
    return job


def invalid_job(name: str, namespace: str) -> Obj:
    """Refused by `validate` (`spec.replicaSpecs[0].template.spec.containers[0].args`), admitted
    by the CRD alone: what only the webhook refuses."""
    job = valid_job(name, namespace)
    job["spec"]["torchrunConfig"] = {"enabled": True, "procPerNode": "1"}
    return job


def timed_post(transport: Transport, path: str, job: Obj) -> tuple[float, int]:
    """Seconds the POST took as the client saw it, and its HTTP status."""
    start = time.perf_counter()
    try:
        transport.request("POST", path, body=job)
        status = 201
    except ApiError as e:
        status = e.status
    return time.perf_counter() - start, status


def post_all(transport: Transport, path: str, jobs: list[Obj], in_flight: int) -> list[float]:
    """Each POST's seconds; raises if a valid job was refused (the figures would be wrong)."""
    with ThreadPoolExecutor(in_flight) as pool:
        done = list(pool.map(lambda job: timed_post(transport, path, job), jobs))
    refused = [status for _, status in done if status != 201]
    if refused:
        raise RuntimeError(f"{len(refused)} valid jobs refused (HTTP {sorted(set(refused))})")
    return [seconds for seconds, _ in done]


def apiserver_counters(cluster: Cluster) -> dict[str, float]:
    """kube-apiserver's requests by "verb resource" so far, and its webhook calls and their
    seconds (`apiserver_admission_webhook_admission_duration_seconds`)."""
    counters: dict[str, float] = {}
    for family in text_string_to_metric_families(cluster.kubectl("get", "--raw", "/metrics")):
        for s in family.samples:
            if s.name == "apiserver_request_total":
                key = f"{s.labels.get('verb', '')} {s.labels.get('resource', '')}".strip()
                counters[key] = counters.get(key, 0.0) + s.value
            elif s.name in (f"{CALLS}_sum", f"{CALLS}_count") and s.labels["name"] == WEBHOOK_CALL:
                key = "webhook " + s.name.rsplit("_", 1)[1]  # webhook sum, webhook count
                counters[key] = counters.get(key, 0.0) + s.value
    return counters


def percentile(values: list[float], q: float) -> float:
    return sorted(values)[min(len(values) - 1, int(q * len(values)))]


def run_pass(
    label: str, cluster: Cluster, api: Transport, operator: OurOperator, args: Namespace
) -> Obj:
    """One pass in the namespace `bench-<label>`: its figures."""
    namespace = f"bench-{label}"
    cluster.kubectl("create", "namespace", namespace)
    path = JOBS.format(namespace)
    post_all(api, path, [valid_job(f"warm-{i}", namespace) for i in range(WARM_UP)], 1)
    meter = Meter(cluster)
    pids = {**meter.pids, "operator": operator.pid}
    meter.settled()
    counted, own = apiserver_counters(cluster), operator.api_requests()
    before = {k: cpu_seconds(p) for k, p in pids.items()}
    start = time.monotonic()
    jobs = [valid_job(f"job-{i}", namespace) for i in range(args.jobs)]
    latencies = post_all(api, path, jobs, args.in_flight)
    elapsed = time.monotonic() - start
    meter.settled()
    after = {k: cpu_seconds(p) for k, p in pids.items()}
    counters, own_after = apiserver_counters(cluster), operator.api_requests()
    delta = {k: v - counted.get(k, 0.0) for k, v in counters.items() if v > counted.get(k, 0.0)}
    bad = [invalid_job(f"bad-{i}", namespace) for i in range(args.invalid)]
    invalid = [timed_post(api, path, job) for job in bad]
    calls = delta.pop("webhook count", 0.0)
    called = delta.pop("webhook sum", 0.0)
    row: Obj = {
        "pass": label,
        "creates": args.jobs,
        "in_flight": args.in_flight,
        "seconds": round(elapsed, 2),
        "p50_ms": round(1000 * percentile(latencies, 0.5), 2),
        "p99_ms": round(1000 * percentile(latencies, 0.99), 2),
        **{f"{k}_cpu_ms": round(1000 * (after[k] - before[k]) / args.jobs, 3) for k in pids},
        "webhook_calls": calls,
        "webhook_call_mean_ms": round(1000 * called / calls, 2) if calls else None,
        "requests": dict(sorted(delta.items(), key=lambda kv: -kv[1])),
        "operator_requests": sum(own_after.values()) - sum(own.values()),
        "invalid": args.invalid,
        "invalid_refused": sum(1 for _, status in invalid if status != 201),
        "invalid_p50_ms": round(1000 * percentile([s for s, _ in invalid], 0.5), 2),
    }
    log(f"{label}: {row}")
    return row


def wait_called(transport: Transport, timeout: float = 30) -> None:
    """Until the API server calls the webhook (it takes a moment to use a new configuration):
    a dry run of an invalid job is refused by it."""
    deadline = time.monotonic() + timeout
    probe = invalid_job("probe", ELSEWHERE)
    while True:
        try:
            transport.request("POST", JOBS.format(ELSEWHERE), query={"dryRun": "All"}, body=probe)
        except ApiError as e:
            if "denied the request" in str(e):
                return
        if time.monotonic() > deadline:
            raise RuntimeError(f"the API server does not call the webhook after {timeout} s")
        time.sleep(0.5)


def by_verb(requests: dict[str, float]) -> str:
    """ "POST 310, GET 40, ...": a pass's requests to the API server, by verb."""
    verbs: dict[str, float] = {}
    for key, count in requests.items():
        verbs[key.split(" ")[0]] = verbs.get(key.split(" ")[0], 0.0) + count
    return ", ".join(f"{v} {n:.0f}" for v, n in sorted(verbs.items(), key=lambda kv: -kv[1]))


def table(off: Obj, on: Obj, load: list[tuple[float, ...]]) -> str:
    def ms(title: str, key: str) -> str:
        return f"| {title} | {off[key]} ms | {on[key]} ms | {on[key] - off[key]:+.2f} ms |"

    return "\n".join(
        [
            f"{off['creates']} valid PyTorchTrainingJobs a pass, {off['in_flight']} POST in flight",
            "",
            "| a create | no webhook | webhook (Fail) | difference |",
            "| --- | ---: | ---: | ---: |",
            ms("POST latency p50 (client)", "p50_ms"),
            ms("POST latency p99 (client)", "p99_ms"),
            ms("kube-apiserver CPU", "kube-apiserver_cpu_ms"),
            ms("etcd CPU", "etcd_cpu_ms"),
            ms("operator CPU (with the webhook: admission)", "operator_cpu_ms"),
            f"| webhook call, mean (kube-apiserver's timing) | - | {on['webhook_call_mean_ms']} ms"
            f" ({on['webhook_calls']:.0f} calls) | |",
            f"| requests by verb (kube-apiserver, whole pass) | {by_verb(off['requests'])}"
            f" | {by_verb(on['requests'])} | |",
            f"| operator's own API requests (whole pass) | {off['operator_requests']:.0f}"
            f" | {on['operator_requests']:.0f} | |",
            f"| invalid job (torchrun without args) refused | {off['invalid_refused']}"
            f"/{off['invalid']} | {on['invalid_refused']}/{on['invalid']} | |",
            ms("invalid job: POST latency p50", "invalid_p50_ms"),
            "",
            "load average (1, 5, 15 min) before: {}, after: {}".format(*load),
        ]
    )


def main(argv: list[str] | None = None) -> int:
    p = ArgumentParser(prog="python -m bench.admission_cost", description=__doc__)
    p.add_argument("--jobs", type=int, default=300, help="valid jobs created a pass (300)")
    p.add_argument("--invalid", type=int, default=20, help="invalid jobs a pass (20)")
    p.add_argument("--in-flight", type=int, default=1, help="POSTs at once (1: a lone create)")
    p.add_argument("--cluster-dir", type=Path, default=Path("/tmp/bench-cluster"))
    p.add_argument("--out", type=Path, default=Path("/tmp/t9kjobs-bench/admission-cost"))
    args = p.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    load = [os.getloadavg()]
    cluster = Cluster(args.cluster_dir, 110)
    operator = OurOperator()
    cluster.up()
    try:
        install_crds(cluster.kubectl_path, cluster.kubeconfig)
        cluster.kubectl("create", "namespace", ELSEWHERE)
        port, certs = free_port(), args.out / "webhook-certs"
        ca = webhook.write_certificate(certs)
        operator.extra_args = [
            f"--namespace={ELSEWHERE}",
            f"--webhook-bind-address=127.0.0.1:{port}",
            f"--webhook-cert-dir={certs}",
        ]
        operator.start(cluster, args.out / "operator.log")
        operator.wait_ready()
        transport = Transport(load_configuration(cluster.kubeconfig), qps=0)
        rows = [run_pass("off", cluster, transport, operator, args)]
        url = f"https://127.0.0.1:{port}{webhook.PATH}"
        config = webhook.webhook_configuration(WEBHOOK, url, ca, "Fail")
        webhook.register_webhook(cluster.kubectl_path, cluster.kubeconfig, config)
        wait_called(transport)
        rows.append(run_pass("on", cluster, transport, operator, args))
    finally:
        operator.stop()
        cluster.down()  # the webhook's configuration goes with the cluster
    load.append(os.getloadavg())
    report = table(rows[0], rows[1], [tuple(round(x, 2) for x in la) for la in load])
    (args.out / "results.json").write_text(json.dumps({"rows": rows, "load": load}, indent=1))
    (args.out / "summary.md").write_text(report + "\n")
    print(report)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
