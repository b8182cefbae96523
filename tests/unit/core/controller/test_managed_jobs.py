"""The reconciler and `spec.managedBy`, `kueue.x-k8s.io/prebuilt-workload-name`: another
controller's job costs not one request; MultiKueue's gets its Workload and never a status
write once dispatched, and none of a failure's ever (its `Queued` status while it waits for a worker is the operator's); a prebuilt Workload is looked up by name and adopted. The API
server is `FakeTransport`."""

from __future__ import annotations

import copy
from dataclasses import replace
from typing import Any

from t9kjobs.controller.reconciler import Reconciler
from t9kjobs.kube.informer import Store
from t9kjobs.kube.resources import CHILD_RESOURCES
from t9kjobs.kube.transport import ApiError
from t9kjobs.manager import PluginManager
from t9kjobs.vocabulary import Obj
from tests.unit.core.controller.reconciling import JOB, KEY, reconciler, settle, status_writes
from tests.unit.core.kube.fake_transport import FakeTransport

WORKLOADS = CHILD_RESOURCES["Workload"].path("team-a")


def _job(managed_by: str | None = None, **labels: str) -> Obj:
    job = copy.deepcopy(JOB)
    if managed_by is not None:
        job["spec"]["managedBy"] = managed_by
    job["metadata"]["labels"] = dict(labels)
    return job


def _with_kueue(manager: PluginManager, fake: FakeTransport, job: Obj) -> Reconciler:
    """A reconciler that watches Workloads and Kueue's objects (`--kueue auto`)."""
    r, _, _ = reconciler(manager, fake, None, job)
    r.cache = replace(r.cache, kueue_stores={"LocalQueue": Store()})
    return r


def _writes(fake: FakeTransport) -> list[tuple[str, str]]:
    return [(m, p) for m, p, _ in fake.requests if m != "GET"]


def test_another_controllers_job_costs_not_one_request(manager: PluginManager) -> None:
    fake = FakeTransport()
    r = _with_kueue(manager, fake, _job("example.com/other", **{"kueue.x-k8s.io/queue-name": "q"}))
    assert settle(r, KEY) is None
    assert fake.requests == []


def test_multikueues_job_gets_its_workload_and_a_queued_status(manager: PluginManager) -> None:
    fake = FakeTransport()
    r = _with_kueue(
        manager, fake, _job("kueue.x-k8s.io/multikueue", **{"kueue.x-k8s.io/queue-name": "q"})
    )
    settle(r, KEY)
    assert [w for w in _writes(fake) if not w[1].endswith("/status")] == [("POST", WORKLOADS)]
    assert [s["phase"] for s in status_writes(fake)] == ["Queued"]
    (made,) = [b for m, _, b in fake.requests if m == "POST"]
    assert made["metadata"]["name"] == "pytorchtrainingjob-mnist"
    assert [s["count"] for s in made["spec"]["podSets"]] == [1, 3]


def test_multikueues_job_gets_no_failure_written(manager: PluginManager) -> None:
    """Invalid, or its Workload refused: logged, never written into the status MultiKueue
    copies from the worker."""
    invalid = _job("kueue.x-k8s.io/multikueue", **{"kueue.x-k8s.io/queue-name": "q"})
    invalid["spec"]["replicaSpecs"][1]["replicas"] = -1
    fake = FakeTransport()
    settle(_with_kueue(manager, fake, invalid), KEY)
    assert _writes(fake) == []

    def refuse(method: str, path: str, body: Any) -> None:
        if method == "POST" and path == WORKLOADS:
            raise ApiError(422, {"reason": "Invalid", "message": "Workload is invalid"})

    fake = FakeTransport(before=refuse)
    job = _job("kueue.x-k8s.io/multikueue", **{"kueue.x-k8s.io/queue-name": "q"})
    settle(_with_kueue(manager, fake, job), KEY)
    assert _writes(fake) == [("POST", WORKLOADS)]
    assert status_writes(fake) == []


def test_a_prebuilt_workload_is_looked_up_by_name_and_adopted(manager: PluginManager) -> None:
    fake = FakeTransport()
    fake.existing[(WORKLOADS, "from-manager")] = {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "Workload",
        "metadata": {"name": "from-manager", "namespace": "team-a", "resourceVersion": "5"},
        "spec": {
            "queueName": "q",
            "podSets": [
                {"name": "master", "count": 1, "template": {"spec": {}}},
                {"name": "worker", "count": 3, "template": {"spec": {}}},
            ],
        },
    }
    job = _job(**{"kueue.x-k8s.io/prebuilt-workload-name": "from-manager"})
    settle(_with_kueue(manager, fake, job), KEY)
    puts = [b for m, p, b in fake.requests if m == "PUT" and p == f"{WORKLOADS}/from-manager"]
    assert len(puts) == 1
    (owner,) = puts[0]["metadata"]["ownerReferences"]
    assert (owner["uid"], owner["controller"]) == ("job-uid", True)
    assert puts[0]["metadata"]["resourceVersion"] == "5"  # no blind write over Kueue's
    assert not [p for m, p, _ in fake.requests if m == "POST" and p.endswith("/pods")]
    status = status_writes(fake)[-1]
    admitted = next(c for c in status["conditions"] if c["type"] == "Admitted")
    assert admitted["status"] == "False" and "LocalQueue q" in admitted["message"]
