"""bench/admission_cost.py's pure parts (docs/benchmarks.md, "The cost of admission"): the job
only the webhook refuses is one `validate` refuses, at the container's args; percentiles and
the requests by verb; the table's difference column."""

from __future__ import annotations

from bench.admission_cost import by_verb, invalid_job, percentile, table, valid_job
from t9kjobs.loading import judge
from t9kjobs.manager import load_plugins


def test_the_valid_job_passes_and_the_invalid_one_is_refused_at_the_containers_args() -> None:
    manager = load_plugins()
    assert judge(valid_job("a", "ns"), manager).errors == []
    errors = judge(invalid_job("b", "ns"), manager).errors
    assert [p.path for p in errors if p.severity == "error"] == [
        "spec.replicaSpecs[0].template.spec.containers[0].args",
        "spec.replicaSpecs[1].template.spec.containers[0].args",
    ]
    assert invalid_job("b", "ns")["metadata"]["namespace"] == "ns"


def test_percentiles_are_of_the_sorted_values() -> None:
    values = [float(v) for v in range(100, 0, -1)]  # 100 .. 1
    assert percentile(values, 0.5) == 51.0
    assert percentile(values, 0.99) == 100.0
    assert percentile([3.0], 0.99) == 3.0


def test_requests_are_summed_by_verb_commonest_first() -> None:
    requests = {"POST pytorchtrainingjobs": 300.0, "GET leases": 4.0, "PUT leases": 4.0, "GET": 2}
    assert by_verb(requests) == "POST 300, GET 6, PUT 4"


def test_the_table_gives_each_pass_and_the_difference() -> None:
    def row(p50: float, calls: float, refused: int) -> dict[str, object]:
        return {
            "creates": 300,
            "in_flight": 1,
            "p50_ms": p50,
            "p99_ms": 2 * p50,
            "kube-apiserver_cpu_ms": 3.0,
            "etcd_cpu_ms": 1.0,
            "operator_cpu_ms": 0.1,
            "webhook_calls": calls,
            "webhook_call_mean_ms": 2.5 if calls else None,
            "requests": {"POST pytorchtrainingjobs": 300.0},
            "operator_requests": 0.0,
            "invalid": 20,
            "invalid_refused": refused,
            "invalid_p50_ms": p50,
        }

    lines = table(row(10.0, 0, 0), row(13.5, 300, 20), [(0.5, 0.4, 0.3), (0.9, 0.5, 0.3)])
    assert "| POST latency p50 (client) | 10.0 ms | 13.5 ms | +3.50 ms |" in lines
    assert "| POST latency p99 (client) | 20.0 ms | 27.0 ms | +7.00 ms |" in lines
    assert "| webhook call, mean (kube-apiserver's timing) | - | 2.5 ms (300 calls) | |" in lines
    assert "| invalid job (torchrun without args) refused | 0/20 | 20/20 | |" in lines
    assert lines.endswith("before: (0.5, 0.4, 0.3), after: (0.9, 0.5, 0.3)")
