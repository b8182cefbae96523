"""The benchmark's report logic (bench/), which turns raw samples into the figures of
docs/benchmarks.md: a wrong sum there is a wrong page, so it is tested like the product."""

from __future__ import annotations

import pytest

from bench.profile import shares
from bench.report import markdown_table, status_writes
from bench.series import cost_rows, scale_rows
from bench.store_churn import main as store_churn

WORKER = "Thread.run (threading.py:982);Reconciler.reconcile (core/controller/reconciler.py:86)"
PROFILE = "\n".join(
    [
        # on the CPU: planning, then the HTTP client
        f"thread (0x1): worker-1;{WORKER};plan (core/planner/plan.py:54) 3",
        f"thread (0x1): worker-1;{WORKER};HTTPConnection.send (http/client.py:1000) 1",
        # waiting: not on the CPU, left out
        f"thread (0x2): create_3;{WORKER};SSLSocket.read (ssl.py:1100) 50",
        "thread (0x3): informer-pods;Informer._watch (core/controller/informer.py:285);"
        "JSONDecoder.raw_decode (json/decoder.py:353) 4",
    ]
)


def test_profile_shares_count_only_samples_on_the_cpu() -> None:
    text = shares(PROFILE)
    assert text.startswith("8 samples on the CPU")
    assert "| worker-* | 50% |" in text
    assert "| informer-pods | 50% |" in text
    assert "create" not in text  # its only samples waited for an answer
    assert "| planning (core/planner) | 38% |" in text
    assert "| the HTTP client (urllib3, TLS, http.client) | 12% |" in text
    assert "| decoding and encoding JSON | 50% |" in text


def _result(**extra: object) -> dict[str, object]:
    return {
        "phase": "to-qps",
        "title": "training operator",
        "pods_seen": 16,
        "all_pods_exist_s": 12.0,
        "all_jobs_succeeded_s": 20.0,
        "jobs_succeeded": 4,
        "peak_rss_mib": 100.0,
        "cpu_s": 8.0,
        "requests_per_job": 23.0,
        **extra,
    }


def test_a_phase_stopped_at_its_limit_reports_what_it_had_done_by_then() -> None:
    stopped = _result(timed_out=True, end_s=10.0, pod_times=[1.0, 5.0, 10.0, 11.0, 15.0])
    run = {"jobs": 4, "replicas": 4, "results": [_result(), stopped]}
    finished_row, stopped_row = scale_rows([run])[2:]
    assert "| 16 | 12.0 | 20.0 (4 Succeeded) | 100 | 8.0 | 2000.0 | 23.0 |" in finished_row
    # 3 pods by its 10 s limit, not the 5 the watcher saw while it was being stopped; no
    # figure a job, which would divide what it reached by every job submitted.
    assert "stopped at its 10 s limit | 3 by then |" in stopped_row
    assert "2000.0" not in stopped_row and "23.0" not in stopped_row


def test_store_churn_prints_a_line_a_size(capsys: pytest.CaptureFixture[str]) -> None:
    assert store_churn(["--sizes", "10,30"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert [line.split()[0] for line in lines] == ["10", "30"]
    assert all(float(line.split()[-4]) >= 0 for line in lines)


def test_status_writes_count_each_jobs_writes_and_their_commonest_sequences() -> None:
    writes = {
        "a": ["Pending", "Running", "Succeeded"],
        "b": ["Pending", "Running", "Succeeded"],
        "c": ["Running", "Succeeded"],
    }
    found = status_writes(writes, jobs=4)
    assert found["per_job"] == 2.0
    assert found["jobs_by_count"] == {"0": 1, "2": 1, "3": 2}
    assert found["commonest"] == [
        {"jobs": 2, "writes": "Pending -> Running -> Succeeded"},
        {"jobs": 1, "writes": "Running -> Succeeded"},
    ]


def test_the_cost_table_divides_each_process_by_pods_and_the_operator_by_pod_events() -> None:
    ours = {
        "phase": "ours",
        "title": "t9k-jobs (ours)",
        "pods_seen": 400,
        "all_jobs_succeeded_s": 50.0,
        "pod_events_per_pod": 5.0,
        "control_plane_cpu_s": {"kube-apiserver": 8.0, "operator": 2.0, "py-spy": 4.0},
    }
    run = {"jobs": 100, "replicas": 4, "results": [ours]}
    header, _, row = cost_rows([run])
    assert header.count("|") == row.count("|")
    # 8 s and 2 s over 400 pods; 2 s over 2,000 pod events; the profiler is not in "all".
    assert row.startswith("| 100 x 4 | 50 | 5.00 | 20.0 | - | - | - | - | - | 5.0 | 25.0 | 1.00 |")


def test_the_table_says_the_whole_runs_cpu_against_the_raw_phase() -> None:
    raw = {"phase": "raw", "title": "raw", "control_plane_cpu_s": {"etcd": 1.0, "kwok": 3.0}}
    ours = {
        "phase": "ours",
        "title": "ours",
        # the profiler's CPU is the machine's, not the run's
        "control_plane_cpu_s": {"etcd": 2.0, "operator": 4.0, "py-spy": 9.0},
    }
    table = markdown_table([raw, ours])
    assert "| every process's CPU (s) | 4.0 | 6.0 |  |" in table
    assert "| every process's CPU vs the raw phase | 1.00x | 1.50x | ≤ 1.6x, then 1.3x |" in table
    assert "vs the raw phase" not in markdown_table([ours])  # no raw phase: not said
