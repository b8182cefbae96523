"""The operator's metrics: docs/observability.md lists every one the registry serves, and the
collector's time is counted while it is timed, not after."""

from __future__ import annotations

import gc
import re

from prometheus_client import generate_latest

from t9kjobs.controller.metrics import Metrics
from tests.repo import REPO


def served(metrics: Metrics) -> set[str]:
    text = generate_latest(metrics.registry).decode()
    types = (line.split()[2] for line in text.splitlines() if line.startswith("# TYPE"))
    return {name for name in types if not name.endswith("_created")}


def test_the_doc_lists_every_metric_the_operator_serves() -> None:
    metrics = Metrics()
    metrics.watch_jobs(lambda: [("GenericJob", {"status": {"phase": "Running"}})])
    metrics.gc_seconds.labels("2").inc(0)  # a labelled family shows once it has a child
    metrics.steps_lost.labels("GenericJob").inc(0)
    metrics.pods_force_deleted.labels("NodeLost").inc(0)
    metrics.reconciles.labels("GenericJob", "ok").inc()
    metrics.reconcile_errors.labels("GenericJob", "conflict").inc()
    metrics.reconcile_seconds.labels("GenericJob").observe(0.1)
    metrics.api_request("GET", "/api/v1/namespaces/ns/pods", 200)
    metrics.kinds_served.labels("GenericJob").set(1)
    doc = (REPO / "docs" / "observability.md").read_text()
    listed = set(re.findall(r"^\| `(t9kjobs_[a-z_]+)`", doc, re.MULTILINE))
    assert listed == served(metrics)


def _stalled(phase: str, stalled: str | None) -> dict[str, object]:
    conditions = [{"type": "Stalled", "status": stalled}] if stalled else []
    return {"status": {"phase": phase, "conditions": conditions}}


def test_stalled_jobs_are_counted_by_kind_from_the_cache_at_scrape_time() -> None:
    metrics = Metrics()
    jobs = [
        ("GenericJob", _stalled("Running", "True")),
        ("GenericJob", _stalled("Running", "True")),
        ("GenericJob", _stalled("Running", "False")),  # reported again: Progressing
        ("GenericJob", _stalled("Failed", "True")),  # finished: no longer hung
        ("DeepSpeedJob", _stalled("Running", None)),
        ("DeepSpeedJob", {}),  # no status yet: Pending
    ]
    metrics.watch_jobs(lambda: jobs)
    sample = metrics.registry.get_sample_value
    assert sample("t9kjobs_stalled_jobs", {"kind": "GenericJob"}) == 2
    assert sample("t9kjobs_stalled_jobs", {"kind": "DeepSpeedJob"}) == 0
    assert sample("t9kjobs_jobs", {"kind": "GenericJob", "phase": "Running"}) == 3
    assert sample("t9kjobs_jobs", {"kind": "DeepSpeedJob", "phase": "Pending"}) == 1
    jobs.pop(0)  # counted again at the next scrape
    assert sample("t9kjobs_stalled_jobs", {"kind": "GenericJob"}) == 1


def test_the_collectors_time_is_counted_by_generation_while_timed() -> None:
    metrics = Metrics()

    def seconds() -> float:
        return sum(
            s.value
            for family in metrics.registry.collect()
            for s in family.samples
            if s.name == "t9kjobs_gc_seconds_total"
        )

    metrics.time_gc()
    try:
        garbage = [[i] for i in range(200_000)]
        gc.collect()
    finally:
        metrics.untime_gc()
    counted = seconds()
    assert counted > 0
    assert metrics.gc_seconds.labels("2")._value.get() > 0  # gc.collect() is a full collection
    del garbage
    gc.collect()
    assert seconds() == counted  # untimed: no callback left behind
