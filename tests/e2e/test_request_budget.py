"""The request budget (bench/request_budget.py): a small burst of the benchmark's jobs, each a
gang, costs the API server no more requests per job than `bench/request_budget.json` records.

20 PyTorchTrainingJobs of 1 master + 3 workers, each pod run 5 s by KWOK and exiting 0, as
`python -m bench --pod-cpu 10m` submits them (pods that reserve something: gangs under the
operator's default; docs/scheduling.md, "Gangs that buy nothing"), to an operator that watches this test's namespace alone: every
request it makes between the two scrapes is for these jobs. Counts, not times (the module
docstring of bench/request_budget.py says which status writes the clock decides, and how
they are left out).
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

from bench import request_budget
from bench.operators import scrape
from bench.workload import ours_job, requesting_cpu
from tests import waiting
from tests.e2e.jobs import JOBS as JOBS_API
from tests.e2e.jobs import PLURALS, Kube, Recorder, phase
from tests.operators import OperatorProcess, install_crds, operator_process

JOBS = 20
REPLICAS = 4
RUN_SECONDS = 5
POD_CPU = "10m"
REQUESTS = "t9kjobs_api_requests_total"
KIND = "PyTorchTrainingJob"
STATUS_WRITES = f"PUT {PLURALS[KIND]}/status"


def _requests(op: OperatorProcess) -> dict[str, float]:
    return scrape(f"http://127.0.0.1:{op.metrics_port}/metrics", REQUESTS, ("verb", "resource"))


def _settled(op: OperatorProcess, quiet: float = 3.0) -> dict[str, float]:
    """The counters once they have not moved for `quiet` seconds."""
    last, since = _requests(op), time.monotonic()

    def still() -> dict[str, float] | None:
        nonlocal last, since
        now = _requests(op)
        if now != last:
            last, since = now, time.monotonic()
        return now if time.monotonic() - since >= quiet else None

    return waiting.until(still, 60, interval=0.5, what="the operator's requests to settle")


def _finished(kube: Kube) -> bool:
    jobs = kube.http.request("GET", f"{JOBS_API}/namespaces/{kube.ns}/{PLURALS[KIND]}")["items"]
    pods = kube.pods().values()
    return (
        len(jobs) == JOBS
        and all(phase(j) == "Succeeded" for j in jobs)
        and len(pods) == JOBS * REPLICAS
        and all(phase(p) == "Succeeded" for p in pods)
    )


def test_a_burst_costs_no_more_requests_per_job_than_recorded(
    cluster: Any, namespace: str, tmp_path: Path
) -> None:
    install_crds(cluster)
    kube = Kube(cluster, namespace)
    op = operator_process(cluster, "--namespace", namespace, log=tmp_path / "operator.log")
    try:
        op.wait_ready()
        before = _settled(op)
        with Recorder(kube.http, f"{JOBS_API}/namespaces/{namespace}/{PLURALS[KIND]}") as jobs:
            for i in range(JOBS):
                [doc] = requesting_cpu([ours_job(f"burst-{i:02d}", REPLICAS, RUN_SECONDS)], POD_CPU)
                kube.create(doc)
            waiting.until(lambda: _finished(kube), 180, interval=1.0, what="every job Succeeded")
            after = _settled(op)
            statuses = request_budget.written_statuses(jobs.snapshot())
    finally:
        op.stop()
    assert len(statuses) == JOBS, sorted(statuses)
    # The status writes the clock decided are left out (bench/request_budget.py); none may
    # break the rules they keep to.
    timed, broken = 0, []
    for name, written in sorted(statuses.items()):
        count, wrong = request_budget.timing_writes(written)
        timed += count
        broken += [f"{name}: {w}" for w in wrong]
    assert not broken, "\n".join(broken)
    after = {**after, STATUS_WRITES: after.get(STATUS_WRITES, 0.0) - timed}
    measured = request_budget.per_job(before, after, JOBS)
    if os.environ.get(request_budget.RECORD_ENV) == "1":
        burst = {"jobs": JOBS, "replicas": REPLICAS, "run_seconds": RUN_SECONDS, "pod_cpu": POD_CPU}
        request_budget.write(request_budget.BUDGET_FILE, burst, measured)
    budget = request_budget.recorded()["requests_per_job"]
    lines = request_budget.grown(measured, budget)
    assert not lines, request_budget.message(lines, measured)
