"""bench/tas_cost.py's pure parts (docs/benchmarks.md, "The cost of topology-aware placement"):
the TAS pass's job asks for a rack on every replica, and the operator queues it so (each
podSet's topologyRequest ranked by tensorstack.dev/rank), the other pass's for none; the
table's difference column."""

from __future__ import annotations

from argparse import Namespace

from bench.tas_cost import RACK, job, table
from t9kjobs.loading import judge, parse_job
from t9kjobs.manager import load_plugins
from t9kjobs.planner import Kueue, Observed, plan
from t9kjobs.testing.fixtures import NOW

ARGS = Namespace(replicas=4, run_seconds=5)


def _requests(doc: dict[str, object]) -> list[object]:
    manager = load_plugins()
    assert judge(doc, manager).errors == []
    parsed = parse_job(doc, manager)
    fresh = parsed.model_copy(update={"status": manager.kind_info(parsed.kind).status_model()})
    created = plan(fresh, Observed(kueue=Kueue()), NOW, manager.hooks_for(parsed.kind)).create
    (workload,) = [o for o in created if o.get("kind") == "Workload"]
    return [s.get("topologyRequest") for s in workload["spec"]["podSets"]]


def test_only_the_tas_pass_asks_kueue_for_a_rack_ranked() -> None:
    asked = {"preferred": RACK, "podIndexLabel": "tensorstack.dev/rank"}
    assert _requests(job("a", "ns", ARGS, tas=True)) == [asked, asked]
    assert _requests(job("a", "ns", ARGS, tas=False)) == [None, None]


def test_the_table_gives_each_pass_and_the_difference() -> None:
    def row(placed: float, requests: float) -> dict[str, object]:
        return {
            "jobs": 100,
            "replicas": 4,
            "requests_per_job": requests,
            "operator_requests_per_job": 12.0,
            "to_last_pod_p50_s": 1.0,
            "to_last_pod_p99_s": 2.0,
            "to_placed_p50_s": placed,
            "to_placed_p99_s": 2 * placed,
            "kube-apiserver_cpu_ms": 30.0,
            "etcd_cpu_ms": 10.0,
            "kueue_cpu_ms": 5.0,
            "operator_cpu_ms": 20.0,
            "requests": {"PATCH pods": requests},
        }

    lines = table(row(1.5, 40.0), row(2.0, 44.0), [(0.5, 0.4, 0.3), (0.9, 0.5, 0.3)])
    assert "| requests to kube-apiserver (every client) | 40.0 | 44.0 | +4.00 |" in lines
    assert "| POST answered -> last pod bound (placed), p99 | 3.0 s | 4.0 s | +1.00 s |" in lines
    assert "| requests by verb (whole pass) | PATCH 40 | PATCH 44 | |" in lines
    assert lines.endswith("before: (0.5, 0.4, 0.3), after: (0.9, 0.5, 0.3)")
