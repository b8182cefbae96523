"""The operator process stays honest under faults, against a stand-in API server over real
sockets: a controller thread that dies fails liveness and ends the process (and frees the
Lease), start-up discovery errors are waited out while not ready, the Lease is renewed even
when the workers' client is saturated, and a job whose cache changed without an event is
reconciled again after the resync period."""

from __future__ import annotations

import copy
import logging
import threading
import time
from typing import Any

import pytest

from t9kjobs.controller.operator import Operator, Options
from t9kjobs.manager import PluginManager
from tests import waiting
from tests.unit.core.controller.running_operator import Running
from tests.unit.core.kube.standin_api import StandInApi

JOBS = "/apis/batch.tensorstack.dev/v1beta1"


def test_a_controller_thread_that_dies_ends_the_process_and_frees_the_lease(
    api: StandInApi, manager: PluginManager, monkeypatch: pytest.MonkeyPatch
) -> None:
    running = Running(api, manager, leader_elect=True)

    def broken(*_: Any) -> bool:
        raise RuntimeError("an unexpected error after the Lease was won")

    monkeypatch.setattr(running.operator, "_serve", broken)
    running.start()
    try:
        running.thread.join(15)  # it does not go on renewing a Lease it does nothing with
        assert running.result == [1]
        assert running.operator.supervisor.failure == "thread controller died"
        assert not running.operator.supervisor.healthy()
        lease = api.lease("ns", "t9k-jobs-operator")
        assert lease is not None and lease["spec"]["holderIdentity"] == ""  # a standby takes it
    finally:
        running.stop()


def test_a_dead_worker_fails_healthz_and_stops_the_operator(
    api: StandInApi, manager: PluginManager
) -> None:
    running = Running(api, manager).start()
    try:
        waiting.until(
            lambda: running.get("/readyz") == 200,
            10,
            interval=0.05,
            what="running.get('/readyz') == 200",
        )
        assert running.get("/healthz") == 200
        supervisor = running.operator.supervisor
        died = threading.Event()

        def dies() -> None:
            died.wait(5)
            raise MemoryError("as a worker can die")

        supervisor.spawn("worker-x", dies)
        died.set()
        waiting.until(
            lambda: running.get("/healthz") in (0, 500),
            10,
            interval=0.05,
            what="running.get('/healthz') in (0, 500)",
        )  # failing, or already gone
        running.thread.join(15)
        assert running.result == [1]
        assert supervisor.failure == "thread worker-x died"
    finally:
        running.stop()


def test_start_up_discovery_errors_are_waited_out_while_not_ready(
    api: StandInApi, manager: PluginManager, caplog: pytest.LogCaptureFixture
) -> None:
    api.discovery_failures = 2  # the API server is still starting: 503, 503, then answers
    running = Running(api, manager)
    with caplog.at_level(logging.WARNING, logger="t9kjobs.operator"):
        running.start()
        try:
            waiting.until(
                lambda: running.get("/healthz") == 200,
                10,
                interval=0.05,
                what="running.get('/healthz') == 200",
            )
            assert running.get("/readyz") == 503
            waiting.until(
                lambda: running.get("/readyz") == 200,
                20,
                interval=0.05,
                what="running.get('/readyz') == 200",
            )
            assert running.thread.is_alive() and running.result == []
        finally:
            running.stop()
    waits = [r.getMessage() for r in caplog.records if "waiting for" in r.getMessage()]
    assert len(waits) == 2
    assert waits[0].startswith(
        "waiting for the API server's discovery of batch.tensorstack.dev/v1beta1 (not ready"
        " until it answers); next try in 1s: HTTP 503"
    )
    assert running.result == [0]


def test_the_lease_is_renewed_while_the_workers_client_is_saturated(
    api: StandInApi, manager: PluginManager
) -> None:
    running = Running(
        api,
        manager,
        leader_elect=True,
        qps=0.01,
        burst=1,
        lease_duration=3.0,
        renew_deadline=2.0,
        retry_period=0.2,
    )
    running.operator.transport.limiter.acquire()  # the workers' next request waits ~100 s
    running.start()
    try:
        waiting.until(
            lambda: len(api.requests("PUT", "/leases/")) >= 5,
            10,
            interval=0.05,
            what="len(api.requests('PUT', '/leases/')) >= 5",
        )
        assert running.thread.is_alive()
        lease = api.lease("ns", "t9k-jobs-operator")
        assert lease is not None and lease["spec"]["holderIdentity"] == "replica-a"
    finally:
        running.stop()


def job(name: str) -> dict[str, Any]:
    return {
        "apiVersion": "batch.tensorstack.dev/v1beta1",
        "kind": "GenericJob",
        "metadata": {"name": name, "namespace": "ns", "uid": f"uid-{name}", "resourceVersion": "1"},
        "spec": {
            "replicaSpecs": [
                {
                    "type": "worker",
                    "template": {"spec": {"containers": [{"name": "c", "image": "i"}]}},
                }
            ]
        },
    }


def reconciles(operator: Operator) -> float:
    return float(operator.metrics.reconciles.labels("GenericJob", "ok")._value.get())


def test_the_resync_reconciles_a_job_whose_cache_changed_without_an_event(
    api: StandInApi, manager: PluginManager
) -> None:
    """A change of the caches that queued nothing (a missed event) is reconciled by the next
    sweep; a job as a reconcile with nothing to do left it is not reconciled again."""
    api.objects[f"{JOBS}/genericjobs"] = [job("quiet")]  # no event ever comes for it
    running = Running(api, manager, resync_period=0.3).start()
    operator = running.operator
    key = ("GenericJob", "ns", "quiet")
    try:
        # Its pods are created, its first status written (FOLDED_STATUS_SECONDS later), and a
        # sweep after that finds nothing to do.
        waiting.until(
            lambda: operator.jobs.reconciler.unchanged(key),
            15,
            interval=0.05,
            what="operator.jobs.reconciler.unchanged(key)",
        )
        settled = reconciles(operator)
        time.sleep(1.5)  # about five sweeps
        assert reconciles(operator) == settled
        pods = operator.cache.child_stores["Pod"]
        pod = copy.deepcopy(pods.owned_by("uid-quiet")[0])
        pod["metadata"]["resourceVersion"] = "1000000"
        pod["status"] = {"phase": "Running"}
        pods.put(pod)  # as an informer would, had its handler's event been lost
        assert not operator.jobs.reconciler.unchanged(key)
        waiting.until(
            lambda: reconciles(operator) > settled,
            5,
            interval=0.05,
            what="reconciles(operator) > settled",
        )
    finally:
        running.stop()
    assert running.result == [0]


def test_the_resync_leaves_out_a_finished_job_whose_replicas_have_all_ended(
    api: StandInApi, manager: PluginManager, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A job still running, and one finished with a replica still running (it is followed to
    its end), are reconciled again by every sweep; one finished with every replica ended is
    not, after the reconcile at start-up."""
    settled = job("settled")
    settled["status"] = {"phase": "Succeeded", "aggregate": {"succeeded": 1, "deleted": 2}}
    following = job("following")
    following["status"] = {"phase": "Succeeded", "aggregate": {"succeeded": 1, "running": 1}}
    api.objects[f"{JOBS}/genericjobs"] = [job("quiet"), settled, following]
    running = Running(api, manager, resync_period=0.3)
    seen: list[str] = []
    reconcile = running.operator.jobs.reconciler.reconcile

    def counted(key: Any) -> Any:
        seen.append(key[2])
        return reconcile(key)

    monkeypatch.setattr(running.operator.jobs.reconciler, "reconcile", counted)
    # As if every job's cache changed between sweeps: only `in_flight` leaves one out.
    monkeypatch.setattr(running.operator.jobs.reconciler, "unchanged", lambda key: False)
    running.start()
    try:
        waiting.until(
            lambda: seen.count("quiet") >= 4 and seen.count("following") >= 4,
            15,
            interval=0.05,
            what="seen.count('quiet') >= 4 and seen.count('following') >= 4",
        )
    finally:
        running.stop()
    assert seen.count("settled") == 1, seen


@pytest.mark.parametrize("flag", [[], ["--routine-events"]])
def test_routine_events_are_off_unless_the_operator_is_asked_for_them(
    api: StandInApi, manager: PluginManager, monkeypatch: pytest.MonkeyPatch, flag: list[str]
) -> None:
    """`t9kjobs operator --routine-events` reaches the reconciler that drops them."""
    import t9kjobs.controller.operator as operator_module
    from t9kjobs.cli.main import main

    built: list[Operator] = []

    class Built(Operator):
        def __init__(self, options: Options, manager: PluginManager) -> None:
            super().__init__(options, manager, api.configuration())
            built.append(self)

        def run(self) -> int:
            self.creator.shutdown()
            return 0

    monkeypatch.setattr(operator_module, "Operator", Built)
    assert main(["operator", "--metrics-bind-address=127.0.0.1:0", *flag]) == 0
    assert built[0].jobs.reconciler.routine_events is bool(flag)
