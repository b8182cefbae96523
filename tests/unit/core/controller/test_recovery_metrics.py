"""`t9kjobs_restarts_total`, `t9kjobs_recovery_seconds` and `t9kjobs_steps_lost_total`
(docs/observability.md): counted from the restart history a successful status write adds and
closes, so a write the API server refuses counts nothing and its retry counts once;
`t9kjobs_pods_force_deleted_total`, by the deletion that forced a pod. The API server is
`FakeTransport`."""

from __future__ import annotations

import copy
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

from t9kjobs.controller.metrics import Metrics
from t9kjobs.kube.transport import ApiError
from t9kjobs.manager import PluginManager
from t9kjobs.models import JobStatus
from t9kjobs.objects import ANNOTATION_INCARNATION
from t9kjobs.planner import ObjectRef, Plan
from t9kjobs.testing.fixtures import pod_in_phase
from tests.unit.core.controller.reconciling import (
    JOB,
    KEY,
    KIND,
    Clock,
    reconciler,
    set_pods,
    settle,
)
from tests.unit.core.kube.fake_transport import FakeTransport

LABELS = {"kind": KIND, "reason": "Error", "action": "RestartJob", "budget": "User"}


def _restarts(metrics: Metrics) -> float:
    return metrics.registry.get_sample_value("t9kjobs_restarts_total", LABELS) or 0.0


def test_a_restart_is_counted_once_after_its_status_is_written(
    manager: PluginManager, creator: ThreadPoolExecutor
) -> None:
    job: Any = copy.deepcopy(JOB)
    job["spec"]["recoveryPolicy"] = {
        "rules": [{"onExitCodes": {"operator": "In", "values": [3]}, "action": "RestartJob"}]
    }
    refuse = {"status": False}

    def conflict(method: str, path: str, body: Any) -> None:
        if refuse["status"] and method == "PUT" and path.endswith("/status"):
            raise ApiError(409, {"message": "the object has been modified", "reason": "Conflict"})

    fake = FakeTransport(before=conflict)
    fake.created_at = "2026-01-01T12:00:00Z"
    the_reconciler, recorder, children = reconciler(manager, fake, creator, job)
    the_reconciler.clock = clock = Clock()
    the_reconciler.metrics = metrics = Metrics()
    settle(the_reconciler, KEY)
    set_pods(children, "Running")
    clock.advance(5)
    settle(the_reconciler, KEY)
    pods = children["Pod"]
    first = [copy.deepcopy(p) for p in pods.owned_by("job-uid")]
    failed = next(p for p in pods.owned_by("job-uid") if p["metadata"]["name"] == "mnist-worker-1")
    pods.put(pod_in_phase(failed, "Failed", 3))
    clock.advance(5)
    refuse["status"] = True
    with pytest.raises(ApiError):
        the_reconciler.reconcile(KEY)
    assert _restarts(metrics) == 0  # refused: nothing written, nothing counted
    refuse["status"] = False
    the_reconciler.reconcile(KEY)
    assert _restarts(metrics) == 1
    the_reconciler.reconcile(KEY)  # the same restart seen again: not counted again
    assert _restarts(metrics) == 1
    # Every pod of the next incarnation running: the recovery is observed once.
    for pod in first:
        again = pod_in_phase(pod, "Running")
        meta = again["metadata"]
        meta.pop("deletionTimestamp", None)
        meta["uid"], meta["resourceVersion"] = f"{meta['name']}-1", "9"
        meta["annotations"][ANNOTATION_INCARNATION] = "1"
        pods.put(again)
    clock.advance(20)
    settle(the_reconciler, KEY)
    settle(the_reconciler, KEY)
    recorder.close()
    count = metrics.registry.get_sample_value(
        "t9kjobs_recovery_seconds_count", {"kind": KIND, "reason": "Error"}
    )
    total = metrics.registry.get_sample_value(
        "t9kjobs_recovery_seconds_sum", {"kind": KIND, "reason": "Error"}
    )
    assert (count, total) == (1.0, 20.0)
    assert _restarts(metrics) == 1


def test_the_steps_a_restart_lost_are_counted_once() -> None:
    metrics = Metrics()
    entry = {
        "time": "2026-01-01T12:00:00Z",
        "replica": "worker-0",
        "reason": "Error",
        "action": "RestartReplica",
        "budget": "User",
        "stepsLost": 7,
    }
    other = entry | {"time": "2026-01-01T12:05:00Z", "stepsLost": 0}
    metrics.count_recoveries(KIND, {}, {"restartHistory": [entry]})
    metrics.count_recoveries(KIND, {"restartHistory": [entry]}, {"restartHistory": [entry, other]})
    assert metrics.registry.get_sample_value("t9kjobs_steps_lost_total", {"kind": KIND}) == 7


def test_a_force_deletion_is_counted_once_the_api_server_took_it(
    manager: PluginManager, creator: ThreadPoolExecutor
) -> None:
    def gone(method: str, path: str, body: Any) -> None:
        if method == "DELETE" and path.endswith("/pods/gone"):
            raise ApiError(404, {"message": "not found", "reason": "NotFound"})

    fake = FakeTransport(before=gone)
    the_reconciler, recorder, _ = reconciler(manager, fake, creator)
    the_reconciler.metrics = metrics = Metrics()
    deletions = (
        ObjectRef("v1", "Pod", "lost", "uid-1", 0, "NodeLost"),
        ObjectRef("v1", "Pod", "stuck", "uid-2", 0, "TerminatingOnLostNode"),
        ObjectRef("v1", "Pod", "gone", "uid-3", 0, "NodeLost"),  # gone already: not forced
        ObjectRef("v1", "Pod", "exited", "uid-4", 0),  # no grace needed: not forced
    )
    plan = Plan(JobStatus(), False, delete=deletions)
    the_reconciler.apply.objects(the_reconciler.cache, "ns", plan, {})
    recorder.close()
    forced = {
        reason: metrics.registry.get_sample_value(
            "t9kjobs_pods_force_deleted_total", {"reason": reason}
        )
        for reason in ("NodeLost", "TerminatingOnLostNode")
    }
    assert forced == {"NodeLost": 1.0, "TerminatingOnLostNode": 1.0}
    assert sum(1 for m, _, _ in fake.requests if m == "DELETE") == 4
