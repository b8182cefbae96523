"""A `Reconciler` against the stand-in API server, and what its tests read back (status writes,
settled reconciles)."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime, timedelta
from typing import Any

import yaml

from t9kjobs.controller.cache import Cache
from t9kjobs.controller.events import EventRecorder
from t9kjobs.controller.reconciler import Reconciler
from t9kjobs.kube.informer import Store
from t9kjobs.kube.resources import CHILD_RESOURCES, job_resource
from t9kjobs.kube.transport import ApiError
from t9kjobs.manager import PluginManager
from t9kjobs.testing.fixtures import pod_in_phase
from tests.unit.configuring import NO_GANGS
from tests.unit.core.kube.fake_transport import FakeTransport

NO_GANGS_NOR_TENSORBOARDS = NO_GANGS | {"TensorBoard"}

KIND = "PyTorchTrainingJob"


KEY = (KIND, "team-a", "mnist")


WORKERS = 3


JOB = yaml.safe_load(
    f"""
apiVersion: batch.tensorstack.dev/v1beta1
kind: {KIND}
metadata: {{name: mnist, namespace: team-a, uid: job-uid, resourceVersion: "1"}}
spec:
  replicaSpecs:
    - type: master
      replicas: 1
      template:
        spec:
          containers: [{{name: pytorch, image: pytorch:2, command: [python, train.py]}}]
    - type: worker
      replicas: {WORKERS}
      template:
        spec:
          containers: [{{name: pytorch, image: pytorch:2, command: [python, train.py]}}]
"""
)


def reconciler(
    manager: PluginManager,
    fake: FakeTransport,
    creator: ThreadPoolExecutor | None,
    job: Any = JOB,
) -> tuple[Reconciler, EventRecorder, dict[str, Store]]:
    jobs = Store()
    jobs.put(job)
    children = {kind: Store() for kind in CHILD_RESOURCES}
    recorder = EventRecorder(fake.as_transport())
    kind = job["kind"]
    resource = job_resource(manager.kind_info(kind))
    meta = job["metadata"]
    fake.seed(resource.path(meta["namespace"], meta["name"]), job)
    return (
        Reconciler(
            fake.as_transport(),
            manager,
            Cache({kind: resource}, {kind: jobs}, children, NO_GANGS_NOR_TENSORBOARDS),
            recorder,
            creator=creator,
        ),
        recorder,
        children,
    )


def settle(the_reconciler: Reconciler, key: Any) -> float | None:
    """Reconcile `key` as the work queue does: again at once while the reconcile asks for it
    (after its creations); then, seconds until it must run again (None: when a change comes)."""
    for _ in range(5):
        result = the_reconciler.reconcile(key)
        if not result.at_once:
            return result.requeue_after
    raise AssertionError(f"{key} still asks to be reconciled at once after 5 reconciles")


def status_writes(fake: FakeTransport) -> list[Any]:
    return [b["status"] for m, p, b in fake.requests if m == "PUT" and p.endswith("/status") and b]


def already_exists(path: str) -> ApiError:
    return ApiError(409, {"message": f"{path} already exists", "reason": "AlreadyExists"})


class Clock:
    """The reconciler's clock, moved on by the test."""

    def __init__(self) -> None:
        self.now = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)

    def __call__(self) -> datetime:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += timedelta(seconds=seconds)


def set_pods(children: dict[str, Store], phase: str) -> None:
    for pod in children["Pod"].owned_by("job-uid"):
        children["Pod"].put(pod_in_phase(pod, phase))
