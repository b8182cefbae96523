"""A job that cannot go on ends Failed once, with a reason, a message and a Warning Event; a
transient API error is retried and shown as Degraded while it lasts (#20). The API server is
`FakeTransport`."""

from __future__ import annotations

import copy
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

from t9kjobs.hooks import hookimpl
from t9kjobs.kube.transport import ApiError
from t9kjobs.manager import PluginManager, load_plugins
from t9kjobs.objects import owner_labels
from t9kjobs.vocabulary import Obj
from tests.unit.core.controller.failing_harness import Harness, condition
from tests.unit.core.controller.reconciling import JOB, KEY, KIND, settle, status_writes
from tests.unit.core.kube.fake_transport import FakeTransport


@pytest.fixture
def creator() -> Iterator[ThreadPoolExecutor]:
    with ThreadPoolExecutor(4) as pool:
        yield pool


def test_a_pod_the_api_server_refuses_fails_the_job_with_its_message(
    manager: PluginManager,
) -> None:
    def refuse(method: str, path: str, body: Any) -> None:
        if method == "POST" and path.endswith("/pods"):
            raise ApiError(
                422,
                {"reason": "Invalid", "message": 'Pod "mnist-master-0" is invalid: spec.x: bad'},
            )

    h = Harness(manager, FakeTransport(before=refuse), JOB)
    settle(h.reconciler, KEY)  # no exception: nothing to retry
    writes = status_writes(h.fake)
    status = writes[-1]
    assert status["phase"] == "Failed"
    ok, reason, message = condition(status, "Failed")
    assert (ok, reason) == ("True", "ChildRejected")
    assert 'refused Pod mnist-master-0: Pod "mnist-master-0" is invalid: spec.x: bad' in message
    h.reconcile_stored()  # once: the finished job gets no second write, no second Event
    assert status_writes(h.fake) == writes
    assert [(e["type"], e["reason"]) for e in h.events()] == [("Warning", "ChildRejected")]


def test_a_server_error_is_retried_and_shown_until_it_passes(
    manager: PluginManager, creator: ThreadPoolExecutor
) -> None:
    failing = [True]

    def unavailable(method: str, path: str, body: Any) -> None:
        if failing[0] and method == "POST" and path.endswith("/pods"):
            raise ApiError(503, {"message": "etcd leader changed"})

    h = Harness(manager, FakeTransport(before=unavailable), JOB)
    with pytest.raises(ApiError):  # for the work queue to retry with backoff
        settle(h.reconciler, KEY)
    *_, retrying = status_writes(h.fake)
    assert retrying.get("phase") != "Failed"
    ok, reason, message = condition(retrying, "Degraded")
    assert (ok, reason) == ("True", "ApiError") and "etcd leader changed" in message
    failing[0] = False
    h.reconcile_stored()
    *_, healed = status_writes(h.fake)
    assert condition(healed, "Degraded")[:2] == ("False", "Resolved")
    assert healed["phase"] == "Pending"


def test_a_plugin_that_raises_fails_the_job_once_not_on_every_retry(
    manager: PluginManager, monkeypatch: pytest.MonkeyPatch
) -> None:
    hooks = manager.hooks_for(KIND)

    def broken(*args: Any, **kwargs: Any) -> Any:
        raise KeyError("containers")

    monkeypatch.setattr(hooks, "build_pods", broken)
    monkeypatch.setattr(manager, "hooks_for", lambda kind: hooks)
    h = Harness(manager, FakeTransport(), JOB)
    settle(h.reconciler, KEY)
    [status] = status_writes(h.fake)
    assert status["phase"] == "Failed"
    _, reason, message = condition(status, "Failed")
    assert reason == "OperatorError" and "KeyError: 'containers'" in message
    h.reconcile_stored()
    h.reconcile_stored()
    assert len(status_writes(h.fake)) == 1
    assert [e["reason"] for e in h.events()] == ["OperatorError"]


def test_a_job_nested_too_deep_fails_alone_with_a_small_status_write(
    manager: PluginManager,
) -> None:
    deep: Any = "x"
    for _ in range(300):
        deep = [deep]
    job = copy.deepcopy(JOB)
    job["spec"]["replicaSpecs"][0]["template"]["spec"]["deep"] = deep
    h = Harness(manager, FakeTransport(), job)
    settle(h.reconciler, KEY)
    [write] = [b for m, p, b in h.fake.requests if p.endswith("/status")]
    assert "spec" not in write  # the status subresource needs the status only
    _, reason, message = condition(write["status"], "Failed")
    assert reason == "InvalidSpec" and "nested deeper than 100 levels" in message
    assert h.fake.posted("pods") == []


class _UndeclaredChild:
    """A feature plugin that creates a child of a kind it never declares (t9kjobs_child_kinds)."""

    @hookimpl
    def t9kjobs_build_auxiliary_objects(self, job: Any) -> list[Obj]:
        meta = {"name": job.name, "namespace": job.namespace, "labels": owner_labels(job)}
        return [{"apiVersion": "example.com/v1", "kind": "Widget", "metadata": meta}]


def test_a_child_of_a_kind_no_plugin_declares_fails_the_job_naming_it() -> None:
    manager = load_plugins()
    manager.register(_UndeclaredChild(), "undeclared")
    h = Harness(manager, FakeTransport(), JOB)
    settle(h.reconciler, KEY)
    *_, status = status_writes(h.fake)
    assert status["phase"] == "Failed"
    _, reason, message = condition(status, "Failed")
    assert reason == "OperatorError"
    assert "the child kind Widget is declared by no plugin (t9kjobs_child_kinds)" in message
