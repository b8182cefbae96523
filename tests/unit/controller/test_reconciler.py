"""Applying a Plan: the objects the pods use, then a job's pods all at once, then the status they
lead to (the status comes first only when the Plan deletes); Events go to the recorder. The API
server is `FakeTransport` (the I/O boundary)."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
import yaml

from t9kjobs.controller.events import EventRecorder
from t9kjobs.controller.informer import Store
from t9kjobs.controller.reconciler import Reconciler
from t9kjobs.controller.resources import CHILD_RESOURCES, job_resource
from t9kjobs.controller.transport import ApiError
from t9kjobs.manager import PluginManager

from .fake_transport import FakeTransport

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


@pytest.fixture
def creator() -> Iterator[ThreadPoolExecutor]:
    with ThreadPoolExecutor(8) as pool:
        yield pool


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
            {kind: resource},
            {kind: jobs},
            children,
            frozenset({"PodGroup", "TensorBoard"}),
            recorder,
            creator,
        ),
        recorder,
        children,
    )


def status_writes(fake: FakeTransport) -> list[Any]:
    return [b["status"] for m, p, b in fake.requests if m == "PUT" and p.endswith("/status") and b]


def initialized(status: Any) -> tuple[str, str]:
    condition = next(c for c in status["conditions"] if c["type"] == "Initialized")
    return condition["status"], condition["reason"]


def test_the_service_then_all_pods_at_once_then_one_status_write(
    manager: PluginManager, creator: ThreadPoolExecutor
) -> None:
    pods = 1 + WORKERS
    together = threading.Barrier(pods, timeout=5)  # broken unless every pod is in flight at once

    def hold_pods(method: str, path: str, body: Any) -> None:
        if method == "POST" and path.endswith("/pods"):
            together.wait()

    fake = FakeTransport(before=hold_pods)
    the_reconciler, recorder, children = reconciler(manager, fake, creator)
    the_reconciler.reconcile(KEY)
    recorder.close()

    writes = [(m, p.rsplit("/", 1)[-1]) for m, p, _ in fake.requests if not p.endswith("/events")]
    assert writes[0] == ("POST", "services")
    assert writes[1:-1] == [("POST", "pods")] * pods
    assert writes[-1] == ("PUT", "status")
    assert len(children["Pod"].owned_by("job-uid")) == pods  # the answers are in the store
    [status] = status_writes(fake)  # "created", without "creating" before it
    assert initialized(status) == ("True", "PodsCreated")
    assert status["aggregate"]["creating"] == 0
    assert [b["reason"] for b in fake.posted("events")] == ["PodsCreated"]


def test_without_a_creator_the_pods_are_created_one_after_another(
    manager: PluginManager,
) -> None:
    in_flight: list[int] = [0]
    most: list[int] = [0]
    lock = threading.Lock()

    def count(method: str, path: str, body: Any) -> None:
        if path.endswith("/events"):
            return  # the recorder's thread, not the reconcile
        with lock:
            in_flight[0] += 1
            most[0] = max(most[0], in_flight[0])
        threading.Event().wait(0.01)
        with lock:
            in_flight[0] -= 1

    fake = FakeTransport(before=count)
    the_reconciler, recorder, children = reconciler(manager, fake, None)
    the_reconciler.reconcile(KEY)
    recorder.close()
    assert len(children["Pod"].owned_by("job-uid")) == 1 + WORKERS
    assert most == [1]


def test_a_refused_pod_fails_the_reconcile_once_the_others_are_created(
    manager: PluginManager, creator: ThreadPoolExecutor
) -> None:
    def refuse_one(method: str, path: str, body: Any) -> None:
        if method == "POST" and body and body["metadata"]["name"] == "mnist-worker-1":
            raise ApiError(403, {"message": 'pods "mnist-worker-1" is forbidden: quota'})

    fake = FakeTransport(before=refuse_one)
    the_reconciler, recorder, children = reconciler(manager, fake, creator)
    with pytest.raises(ApiError, match="quota"):
        the_reconciler.reconcile(KEY)
    recorder.close()
    created = sorted(p["metadata"]["name"] for p in children["Pod"].owned_by("job-uid"))
    assert created == ["mnist-master-0", "mnist-worker-0", "mnist-worker-2"]
    # What exists is in the status all the same; then, while the refusal may pass (a quota),
    # a Degraded condition says what is retried.
    [status, retrying] = status_writes(fake)
    assert initialized(status) == ("False", "CreatingPods")
    assert status["aggregate"]["creating"] == 1
    degraded = next(c for c in retrying["conditions"] if c["type"] == "Degraded")
    assert (degraded["status"], degraded["reason"]) == ("True", "ApiError")
    assert "quota" in degraded["message"]
    assert retrying["phase"] != "Failed"
    assert fake.posted("events") == []  # the Plan's events wait for a reconcile that succeeds


def test_already_existing_pods_are_not_an_error(
    manager: PluginManager, creator: ThreadPoolExecutor
) -> None:
    def exists(method: str, path: str, body: Any) -> None:
        if method == "POST" and path.endswith("/pods"):
            raise ApiError(409, {"message": "already exists", "reason": "AlreadyExists"})

    fake = FakeTransport(before=exists)
    the_reconciler, recorder, _ = reconciler(manager, fake, creator)
    the_reconciler.reconcile(KEY)
    recorder.close()
    assert len(fake.posted("pods")) == 1 + WORKERS


DEEPSPEED_JOB = yaml.safe_load(
    """
apiVersion: batch.tensorstack.dev/v1beta1
kind: DeepSpeedJob
metadata: {name: ds, namespace: team-a, uid: ds-uid, resourceVersion: "1"}
spec:
  config: {run: {python: [train.py]}}
  worker:
    replicas: 2
    template:
      spec:
        containers: [{name: worker, image: ds:1, command: [python], args: [train.py]}]
"""
)


def test_validation_warnings_are_warning_events_when_pods_are_created(
    manager: PluginManager, creator: ThreadPoolExecutor
) -> None:
    """A field the operator overrides (DeepSpeed's own command and args) is said where a user
    of kubectl sees it: `kubectl describe` lists the warnings of `t9kjobs validate`."""
    fake = FakeTransport()
    the_reconciler, recorder, children = reconciler(manager, fake, creator, DEEPSPEED_JOB)
    key = ("DeepSpeedJob", "team-a", "ds")
    the_reconciler.reconcile(key)
    assert len(children["Pod"].owned_by("ds-uid")) == 2
    the_reconciler.reconcile(key)  # nothing to create: nothing said again
    recorder.close()
    base = "spec.worker.template.spec.containers[0]"
    ignored = "ignored: worker-0 runs sshd and the launcher"
    events = [(b["type"], b["reason"], b["message"]) for b in fake.posted("events")]
    assert [e[:2] for e in events] == [
        ("Warning", "SpecWarning"),
        ("Warning", "SpecWarning"),
        ("Normal", "PodsCreated"),
    ]
    assert events[0][2].startswith(f"{base}.command: {ignored}")
    assert events[1][2].startswith(f"{base}.args: {ignored}")
