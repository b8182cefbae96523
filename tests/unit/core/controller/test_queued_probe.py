"""A queued job that the operator would fail once its pods are created fails before Kueue
admits its Workload (#52): the first plan of a queued job submits its children as a dry run,
one pod of each replica type and every other child, before the Workload is made; a refusal for
good fails the job (`ChildRejected`) and no Workload is made, a transient answer holds nothing
back. The API server is `FakeTransport`."""

from __future__ import annotations

import copy
from typing import Any

from t9kjobs.controller.cache import Cache
from t9kjobs.kube.informer import Store
from t9kjobs.kube.resources import KUEUE_RESOURCES
from t9kjobs.kube.transport import ApiError
from t9kjobs.manager import PluginManager
from t9kjobs.planner.queueing import LABEL_QUEUE_NAME
from tests.unit.core.controller.failing_harness import Harness, condition
from tests.unit.core.controller.reconciling import JOB, KEY, settle, status_writes
from tests.unit.core.kube.fake_transport import FakeTransport

QUEUED = copy.deepcopy(JOB)
QUEUED["metadata"]["labels"] = {LABEL_QUEUE_NAME: "team"}


def _queueing(manager: PluginManager, fake: FakeTransport) -> Harness:
    """The harness's reconciler, with Kueue's objects watched (as `--kueue auto` where the
    cluster serves Workloads): the queued job waits in its queue."""
    h = Harness(manager, fake, QUEUED)
    cache = h.reconciler.cache
    h.reconciler.cache = Cache(
        cache.job_resources,
        cache.job_stores,
        cache.child_stores,
        cache.absent_kinds,
        {kind: Store() for kind in KUEUE_RESOURCES},
    )
    return h


def _dry_runs(fake: FakeTransport) -> list[tuple[str, str]]:
    return [(kind, name) for kind, name in fake.dry_runs]


def test_a_child_the_api_server_refuses_fails_a_queued_job_before_its_workload(
    manager: PluginManager,
) -> None:
    def refuse(method: str, path: str, body: Any) -> None:
        if method == "POST" and path.endswith("/pods"):
            message = 'Pod "mnist-worker-0" is invalid: spec.containers[0].resources: bad'
            raise ApiError(422, {"reason": "Invalid", "message": message})

    h = _queueing(manager, FakeTransport(before=refuse))
    settle(h.reconciler, KEY)
    status = status_writes(h.fake)[-1]
    assert status["phase"] == "Failed"
    ok, reason, message = condition(status, "Failed")
    assert (ok, reason) == ("True", "ChildRejected") and "resources: bad" in message
    assert _dry_runs(h.fake)[0] == ("Pod", "mnist-master-0")  # tried as a dry run
    assert h.fake.posted("workloads") == []  # so no Workload: Kueue never sees the job
    assert [(e["type"], e["reason"]) for e in h.events()] == [("Warning", "ChildRejected")]


def test_a_queued_job_probes_one_pod_a_replica_type_then_waits_in_its_queue(
    manager: PluginManager,
) -> None:
    h = _queueing(manager, FakeTransport())
    settle(h.reconciler, KEY)
    kinds = [kind for kind, _ in _dry_runs(h.fake)]
    pods = [name for kind, name in _dry_runs(h.fake) if kind == "Pod"]
    assert pods == ["mnist-master-0", "mnist-worker-0"]
    assert "Workload" not in kinds and "Service" in kinds
    assert [w["metadata"]["name"] for w in h.fake.posted("workloads")]
    assert status_writes(h.fake)[-1]["phase"] == "Queued"
    created = [p for p in h.fake.posted("pods") if p["metadata"]["name"] not in pods]
    assert created == []  # nothing but the dry runs: no pod before admission
    probed = len(h.fake.dry_runs)
    h.reconcile_stored()  # its Workload made: no dry run again
    assert len(h.fake.dry_runs) == probed


def test_a_transient_answer_to_a_dry_run_holds_nothing_back(manager: PluginManager) -> None:
    def over_quota(method: str, path: str, body: Any) -> None:
        if method == "POST" and path.endswith("/pods"):
            raise ApiError(403, {"reason": "Forbidden", "message": "exceeded quota"})

    h = _queueing(manager, FakeTransport(before=over_quota))
    settle(h.reconciler, KEY)
    assert [w["metadata"]["name"] for w in h.fake.posted("workloads")]
    assert status_writes(h.fake)[-1]["phase"] == "Queued"
