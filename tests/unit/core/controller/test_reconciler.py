"""Applying a Plan: the objects the pods use, then a job's pods all at once, then the status they
lead to (the status comes first only when the Plan deletes; after creations it is the next
reconcile's, at once; a new job's waits for its pods to run, FOLDED_STATUS_SECONDS at the most);
Events go to the recorder, routine ones only when asked for. The API server is `FakeTransport`
(the I/O boundary); `settle` takes a job's reconciles as the work queue does."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
import yaml

from t9kjobs.controller.events import EventRecorder
from t9kjobs.kube.transport import ApiError
from t9kjobs.manager import PluginManager
from t9kjobs.planner import FOLDED_STATUS_SECONDS
from t9kjobs.testing.fixtures import pod_in_phase
from tests.unit.core.controller.reconciling import (
    JOB,
    KEY,
    KIND,
    WORKERS,
    Clock,
    already_exists,
    reconciler,
    set_pods,
    settle,
    status_writes,
)
from tests.unit.core.kube.fake_transport import FakeTransport


def initialized(status: Any) -> tuple[str, str]:
    condition = next(c for c in status["conditions"] if c["type"] == "Initialized")
    return condition["status"], condition["reason"]


def test_the_service_then_all_pods_at_once_then_the_status_once_they_run(
    manager: PluginManager, creator: ThreadPoolExecutor
) -> None:
    pods = 1 + WORKERS
    together = threading.Barrier(pods, timeout=5)  # broken unless every pod is in flight at once

    def hold_pods(method: str, path: str, body: Any) -> None:
        if method == "POST" and path.endswith("/pods"):
            together.wait()

    fake = FakeTransport(before=hold_pods)
    fake.created_at = "2026-01-01T12:00:00Z"
    the_reconciler, recorder, children = reconciler(manager, fake, creator)
    the_reconciler.clock = clock = Clock()
    # No status yet: a reconcile comes back for it FOLDED_STATUS_SECONDS after the creations.
    assert settle(the_reconciler, KEY) == FOLDED_STATUS_SECONDS
    writes = [(m, p.rsplit("/", 1)[-1]) for m, p, _ in fake.requests if not p.endswith("/events")]
    assert writes == [("POST", "services")] + [("POST", "pods")] * pods
    assert len(children["Pod"].owned_by("job-uid")) == pods  # the answers are in the store
    # The pods' changes bring reconciles: still pending, nothing is written yet ...
    clock.advance(1)
    assert settle(the_reconciler, KEY) == FOLDED_STATUS_SECONDS - 1
    assert not status_writes(fake)
    # ... and once they run, the job's first status write says so: "Pending" is never written.
    set_pods(children, "Running")
    assert settle(the_reconciler, KEY) is None
    recorder.close()
    [status] = status_writes(fake)
    assert status["phase"] == "Running" and status["startTime"] == "2026-01-01T12:00:00Z"
    assert initialized(status) == ("True", "PodsCreated")
    assert not fake.posted("events")  # the first pods' PodsCreated is routine


def test_pods_that_wait_longer_get_the_pending_status_after_the_fold(
    manager: PluginManager, creator: ThreadPoolExecutor
) -> None:
    fake = FakeTransport()
    fake.created_at = "2026-01-01T12:00:00Z"
    the_reconciler, recorder, _ = reconciler(manager, fake, creator)
    the_reconciler.clock = clock = Clock()
    settle(the_reconciler, KEY)
    clock.advance(FOLDED_STATUS_SECONDS)
    assert settle(the_reconciler, KEY) is None
    recorder.close()
    [status] = status_writes(fake)
    assert status["phase"] == "Pending" and status["aggregate"]["pending"] == 1 + WORKERS
    assert initialized(status) == ("True", "PodsCreated")


def test_routine_events_are_posted_when_asked_for(
    manager: PluginManager, creator: ThreadPoolExecutor
) -> None:
    fake = FakeTransport()
    the_reconciler, recorder, children = reconciler(manager, fake, creator)
    the_reconciler.routine_events = True
    settle(the_reconciler, KEY)
    set_pods(children, "Succeeded")
    settle(the_reconciler, KEY)
    recorder.close()
    events = [(b["type"], b["reason"]) for b in fake.posted("events")]
    assert sorted(events) == [("Normal", "PodsCreated"), ("Normal", "Succeeded")]
    assert status_writes(fake)[-1]["phase"] == "Succeeded"


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
    settle(the_reconciler, KEY)
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
        settle(the_reconciler, KEY)
    created = sorted(p["metadata"]["name"] for p in children["Pod"].owned_by("job-uid"))
    assert created == ["mnist-master-0", "mnist-worker-0", "mnist-worker-2"]
    # The status of the Plan applied, then, while the refusal may pass (a quota), a Degraded
    # condition says what is retried ...
    [planned, _] = status_writes(fake)
    assert initialized(planned) == ("False", "CreatingPods")
    # ... and the work queue's retry, which meets the refusal again, shows what exists.
    with pytest.raises(ApiError, match="quota"):
        settle(the_reconciler, KEY)
    recorder.close()
    [_, _, status, retrying] = status_writes(fake)
    assert initialized(status) == ("False", "CreatingPods")
    assert status["aggregate"]["creating"] == 1
    assert [p["metadata"]["name"] for p in fake.posted("pods")].count("mnist-worker-1") == 2
    degraded = next(c for c in retrying["conditions"] if c["type"] == "Degraded")
    assert (degraded["status"], degraded["reason"]) == ("True", "ApiError")
    assert "quota" in degraded["message"]
    assert retrying["phase"] != "Failed"
    assert fake.posted("events") == []  # the Plan's events wait for a reconcile that succeeds


def test_already_existing_pods_of_the_job_are_not_an_error(
    manager: PluginManager, creator: ThreadPoolExecutor
) -> None:
    def made_by_an_earlier_attempt(method: str, path: str, body: Any) -> None:
        if method == "POST" and path.endswith("/pods"):
            fake.hold(path, body)
            raise already_exists(path)

    fake = FakeTransport(before=made_by_an_earlier_attempt)
    the_reconciler, recorder, children = reconciler(manager, fake, creator)
    settle(the_reconciler, KEY)
    recorder.close()
    assert len(fake.posted("pods")) == 1 + WORKERS
    assert len(children["Pod"].owned_by("job-uid")) == 1 + WORKERS  # known to be the job's
    [status] = status_writes(fake)
    assert initialized(status) == ("True", "PodsCreated")


def foreign(name: str, owner_uid: str | None) -> dict[str, Any]:
    """A pod named `name` that job `mnist` does not control."""
    refs = [{"kind": "PyTorchTrainingJob", "name": "mnist", "uid": owner_uid, "controller": True}]
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": "team-a",
            "uid": "other-pod",
            "resourceVersion": "7",
        }
        | ({"ownerReferences": refs} if owner_uid else {}),
    }


def test_a_name_held_by_an_object_the_job_does_not_control_is_a_conflict(
    manager: PluginManager, creator: ThreadPoolExecutor
) -> None:
    fake = FakeTransport()
    pods = "/api/v1/namespaces/team-a/pods"
    # The leftover of a deleted job of the same name, not yet garbage-collected.
    fake.existing[(pods, "mnist-worker-1")] = foreign("mnist-worker-1", "old-job-uid")

    def exists(method: str, path: str, body: Any) -> None:
        if method == "POST" and (path, body["metadata"]["name"]) in fake.existing:
            raise already_exists(path)

    fake.before = exists
    the_reconciler, recorder, children = reconciler(manager, fake, creator)
    assert settle(the_reconciler, KEY) == 10.0  # looked at again
    recorder.close()
    created = sorted(p["metadata"]["name"] for p in children["Pod"].owned_by("job-uid"))
    assert created == ["mnist-master-0", "mnist-worker-0", "mnist-worker-2"]
    [status] = status_writes(fake)
    condition = next(c for c in status["conditions"] if c["type"] == "Initialized")
    message = (
        "Pod mnist-worker-1 exists and this job does not control it (its controller is"
        " PyTorchTrainingJob mnist (uid old-job-uid)): no pod of the job is created while it"
        " exists"
    )
    assert (condition["status"], condition["reason"], condition["message"]) == (
        "False",
        "NameConflict",
        message,
    )
    events = [(b["type"], b["reason"], b["message"]) for b in fake.posted("events")]
    assert events[-1] == ("Warning", "NameConflict", message)
    assert ("Normal", "PodsCreated", "created mnist-worker-1") not in events

    # Reconciled again while the leftover exists: no POST of it, no new write, no new Event.
    jobs = the_reconciler.cache.job_stores[KIND]
    jobs.put({**JOB, "metadata": {**JOB["metadata"], "resourceVersion": "2"}, "status": status})
    posts, writes = len(fake.posted("pods")), len(status_writes(fake))
    recorder = the_reconciler.events = EventRecorder(fake.as_transport())
    settle(the_reconciler, KEY)
    assert len(fake.posted("pods")) == posts and len(status_writes(fake)) == writes

    # The garbage collector removes it: the pod is created and the condition clears.
    del fake.existing[(pods, "mnist-worker-1")]
    settle(the_reconciler, KEY)
    recorder.close()
    assert fake.posted("pods")[-1]["metadata"]["name"] == "mnist-worker-1"
    assert initialized(status_writes(fake)[-1]) == ("True", "PodsCreated")
    assert [b["reason"] for b in fake.posted("events")].count("NameConflict") == 1


def test_no_pod_is_created_while_an_object_the_pods_use_is_held_by_another(
    manager: PluginManager, creator: ThreadPoolExecutor
) -> None:
    """A Service named after the job, planted beforehand without a controller, would give the
    job's pods their DNS names (and a planted Secret or ConfigMap would be mounted): no pod is
    created while it exists, in the reconcile that meets it nor in later ones; once it is
    gone, the job goes on by itself."""
    fake = FakeTransport()
    services = "/api/v1/namespaces/team-a/services"
    planted = foreign("mnist", None) | {"kind": "Service", "apiVersion": "v1"}
    fake.existing[(services, "mnist")] = planted

    def exists(method: str, path: str, body: Any) -> None:
        if method == "POST" and (path, body["metadata"]["name"]) in fake.existing:
            raise already_exists(path)

    fake.before = exists
    the_reconciler, recorder, _ = reconciler(manager, fake, creator)
    assert settle(the_reconciler, KEY) == 10.0  # looked at again
    assert fake.posted("pods") == []
    settle(the_reconciler, KEY)
    recorder.close()
    assert fake.posted("pods") == []
    condition = next(c for c in status_writes(fake)[-1]["conditions"] if c["type"] == "Initialized")
    assert condition["reason"] == "NameConflict"
    assert condition["message"].startswith(
        "Service mnist exists and this job does not control it (it has no controller)"
    )
    events = [(b["type"], b["reason"]) for b in fake.posted("events")]
    assert events.count(("Warning", "NameConflict")) == 1

    del fake.existing[(services, "mnist")]
    recorder = the_reconciler.events = EventRecorder(fake.as_transport())
    settle(the_reconciler, KEY)
    recorder.close()
    assert len(fake.posted("pods")) == 1 + WORKERS


def test_an_object_without_a_controller_holds_its_name_too(
    manager: PluginManager, creator: ThreadPoolExecutor
) -> None:
    fake = FakeTransport()
    fake.existing[("/api/v1/namespaces/team-a/pods", "mnist-master-0")] = foreign(
        "mnist-master-0", None
    )
    fake.before = lambda method, path, body: (
        _raise(already_exists(path))
        if method == "POST" and body["metadata"].get("name") == "mnist-master-0"
        else None
    )
    the_reconciler, recorder, _ = reconciler(manager, fake, creator)
    settle(the_reconciler, KEY)
    recorder.close()
    [status] = status_writes(fake)
    condition = next(c for c in status["conditions"] if c["type"] == "Initialized")
    assert condition["reason"] == "NameConflict"
    assert (
        "Pod mnist-master-0 exists and this job does not control it (it has no controller)"
        in (condition["message"])
    )


def _raise(exc: Exception) -> None:
    raise exc


def test_the_events_of_both_plans_are_posted_and_the_verdicts_before_its_status(
    manager: PluginManager, creator: ThreadPoolExecutor
) -> None:
    def master_ends_meanwhile(method: str, path: str, body: Any) -> None:
        # While the pods are created, the watch reports the master's success: the status
        # planned after the creations is the verdict.
        if method == "POST" and body["metadata"].get("name") == "mnist-master-0":
            ended = pod_in_phase(
                {**body, "metadata": {**body["metadata"], "uid": "m"}}, "Succeeded"
            )
            ended["metadata"]["resourceVersion"] = "5"
            children["Pod"].put(ended)

    fake = FakeTransport(before=master_ends_meanwhile)
    the_reconciler, recorder, children = reconciler(manager, fake, creator)
    the_reconciler.routine_events = True
    settle(the_reconciler, KEY)
    recorder.close()
    [status] = status_writes(fake)
    assert status["phase"] == "Succeeded"
    reasons = [b["reason"] for b in fake.posted("events")]
    assert sorted(reasons) == ["PodsCreated", "Succeeded"]  # both routine, posted when asked
    order = [
        "status" if p.endswith("/status") else b["reason"]
        for m, p, b in fake.requests
        if m in ("POST", "PUT") and (p.endswith("/events") or p.endswith("/status")) and b
    ]
    assert order.index("Succeeded") < order.index("status")  # never a verdict without its Event


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
    settle(the_reconciler, key)
    assert len(children["Pod"].owned_by("ds-uid")) == 2
    settle(the_reconciler, key)  # nothing to create: nothing said again
    recorder.close()
    base = "spec.worker.template.spec.containers[0]"
    ignored = "ignored: worker-0 runs sshd and the launcher"
    events = [(b["type"], b["reason"], b["message"]) for b in fake.posted("events")]
    assert [e[:2] for e in events] == [("Warning", "SpecWarning"), ("Warning", "SpecWarning")]
    assert events[0][2].startswith(f"{base}.command: {ignored}")
    assert events[1][2].startswith(f"{base}.args: {ignored}")


def test_a_job_is_unchanged_while_its_cache_is_as_a_reconcile_with_nothing_to_do_left_it(
    manager: PluginManager, creator: ThreadPoolExecutor
) -> None:
    """What the periodic resync leaves out (`Reconciler.unchanged`): not a job a reconcile did
    something for, nor one whose job or child has a new resourceVersion since."""
    fake = FakeTransport()
    the_reconciler, recorder, children = reconciler(manager, fake, creator)
    settle(the_reconciler, KEY)  # creations and the first status
    assert not the_reconciler.unchanged(KEY)
    set_pods(children, "Running")
    settle(the_reconciler, KEY)  # the status says Running
    assert not the_reconciler.unchanged(KEY)
    writes = len(fake.requests)
    assert settle(the_reconciler, KEY) is None
    assert len(fake.requests) == writes  # nothing to do ...
    assert the_reconciler.unchanged(KEY)  # ... and nothing changed since
    pod = children["Pod"].owned_by("job-uid")[0]
    children["Pod"].put({**pod, "metadata": {**pod["metadata"], "resourceVersion": "2"}})
    assert not the_reconciler.unchanged(KEY)  # a change no event has queued yet
    settle(the_reconciler, KEY)
    assert the_reconciler.unchanged(KEY)
    the_reconciler.forget(KEY)  # the job was deleted
    assert not the_reconciler.unchanged(KEY)
    recorder.close()
