"""The operator's marks on what it makes (t9kjobs.controller.marks): a child counts as a job's
own only when the operator made it for that job; a controller ownerReference alone, which
anyone who may create the object can write, proves nothing (docs/security.md, threat 13)."""

from __future__ import annotations

import base64
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from typing import Any

import pytest

from t9kjobs.controller.marks import ANNOTATION_MARK, KEY_SECRET, Marks, load_marks
from t9kjobs.kube.informer import Store
from t9kjobs.kube.transport import ApiError
from t9kjobs.manager import PluginManager
from t9kjobs.objects import ANNOTATION_INCARNATION
from tests.unit.core.controller.reconciling import (
    KEY,
    WORKERS,
    already_exists,
    reconciler,
    settle,
    status_writes,
)
from tests.unit.core.kube.fake_transport import FakeTransport

KEY_BYTES = b"k" * 32
SINCE = datetime(2026, 6, 1, tzinfo=UTC)


def child(
    kind: str = "Secret",
    name: str = "mnist-ssh",
    uid: str | None = "job-uid",
    created: str = "2026-07-01T00:00:00Z",
) -> dict[str, Any]:
    refs = [{"kind": "DeepSpeedJob", "name": "mnist", "uid": uid, "controller": True}]
    return {
        "apiVersion": "v1",
        "kind": kind,
        "metadata": {"name": name, "creationTimestamp": created}
        | ({"ownerReferences": refs} if uid else {}),
    }


def made(marks: Marks, obj: dict[str, Any], namespace: str = "team-a") -> dict[str, Any]:
    """`obj` as the API server answers its creation by the operator."""
    marked = marks.mark(obj, namespace)
    return {**marked, "metadata": {**marked["metadata"], "namespace": namespace}}


def test_what_the_operator_made_is_the_jobs_own() -> None:
    marks = Marks(KEY_BYTES, SINCE)
    assert marks.owner(made(marks, child())) == "job-uid"
    assert marks.owner(made(marks, child("Pod", "mnist-worker-0"))) == "job-uid"


def test_a_claimed_controller_without_the_operators_mark_is_nobodys() -> None:
    marks = Marks(KEY_BYTES, SINCE)
    planted = {**child(), "metadata": {**child()["metadata"], "namespace": "team-a"}}
    assert Store.owner_uid(planted) == "job-uid"  # what the operator trusted before
    assert marks.owner(planted) is None


@pytest.mark.parametrize(
    "change",
    ["another key", "another name", "another kind", "another job", "another namespace", "forged"],
)
def test_a_mark_proves_only_what_it_was_made_for(change: str) -> None:
    marks = Marks(KEY_BYTES, SINCE)
    obj = made(marks, child())
    meta = obj["metadata"]
    if change == "another key":
        assert Marks(b"x" * 32, SINCE).owner(obj) is None
        return
    if change == "another name":
        obj = {**obj, "metadata": {**meta, "name": "other-ssh"}}
    elif change == "another kind":
        obj = {**obj, "kind": "ConfigMap"}
    elif change == "another namespace":
        obj = {**obj, "metadata": {**meta, "namespace": "team-b"}}
    elif change == "another job":
        refs = [{**meta["ownerReferences"][0], "uid": "other-uid"}]
        obj = {**obj, "metadata": {**meta, "ownerReferences": refs}}
    else:
        mark = base64.urlsafe_b64encode(b"\0" * 32).decode().rstrip("=")
        obj = {**obj, "metadata": {**meta, "annotations": {ANNOTATION_MARK: mark}}}
    assert marks.owner(obj) is None


def test_a_pods_mark_is_its_incarnations() -> None:
    """A copy of a replaced pod's mark does not prove its replacement (the next incarnation)."""
    marks = Marks(KEY_BYTES, SINCE)
    first = made(marks, child("Pod", "mnist-worker-0"))
    second = child("Pod", "mnist-worker-0")
    second["metadata"]["annotations"] = {ANNOTATION_INCARNATION: "1"}
    assert marks.owner(made(marks, second)) == "job-uid"
    copied = {**second, "metadata": {**second["metadata"], "namespace": "team-a"}}
    copied["metadata"]["annotations"] = {
        ANNOTATION_INCARNATION: "1",
        ANNOTATION_MARK: first["metadata"]["annotations"][ANNOTATION_MARK],
    }
    assert marks.owner(copied) is None


def test_unmarked_objects_older_than_the_key_are_trusted_on_their_owner() -> None:
    """An upgrade: what an earlier version made carries no mark, and was made before the key
    (a creationTimestamp is the API server's; no user writes it)."""
    marks = Marks(KEY_BYTES, SINCE)
    assert marks.owner(child(created="2026-05-31T23:59:59Z")) == "job-uid"
    assert marks.owner(child(created="2026-06-01T00:00:01Z")) is None
    assert Marks(KEY_BYTES, None).owner(child(created="2026-05-31T23:59:59Z")) is None
    assert marks.owner(child(uid=None, created="2026-05-31T23:59:59Z")) is None


def test_the_store_indexes_only_what_the_operator_made() -> None:
    marks = Marks(KEY_BYTES, SINCE)
    store = Store(owner=marks.owner)
    store.put({**made(marks, child()), "metadata": {**made(marks, child())["metadata"]}})
    planted = child(name="mnist-hostfile")
    planted["metadata"]["namespace"] = "team-a"
    store.put(planted)
    assert [o["metadata"]["name"] for o in store.owned_by("job-uid")] == ["mnist-ssh"]


def _key_secret(created: str = "2026-06-01T00:00:00Z") -> dict[str, Any]:
    return {
        "kind": "Secret",
        "metadata": {"name": KEY_SECRET, "creationTimestamp": created},
        "data": {"key": base64.b64encode(KEY_BYTES).decode()},
    }


def test_the_key_is_made_once_and_read_by_every_replica() -> None:
    fake = FakeTransport()
    marks = load_marks(fake.as_transport(), "t9k-system")
    posted = fake.posted("secrets")
    assert len(posted) == 1 and len(base64.b64decode(posted[0]["data"]["key"])) == 32
    assert posted[0]["metadata"]["name"] == KEY_SECRET
    # Another replica reads the same key: what one marks, the other trusts.
    other = load_marks(_Reading(posted[0]), "t9k-system")
    assert other.owner(made(marks, child())) == "job-uid"
    assert Marks(b"x" * 32, SINCE).owner(made(marks, child())) is None


def test_a_replica_that_loses_the_race_to_make_the_key_reads_the_winners() -> None:
    winner = _key_secret()
    transport = _Reading(None, then=winner)
    marks = load_marks(transport, "t9k-system")
    assert marks.owner(made(Marks(KEY_BYTES, None), child())) == "job-uid"
    assert [m for m, _ in transport.calls] == ["GET", "POST", "GET"]


class _Reading:
    """A transport whose key Secret is `found` (None: absent until a creation, which another
    replica wins when `then` is given: 409, and `then` is there)."""

    def __init__(self, found: dict[str, Any] | None, then: dict[str, Any] | None = None) -> None:
        self.found = found
        self.then = then
        self.calls: list[tuple[str, str]] = []

    def request(self, method: str, path: str, **_: Any) -> dict[str, Any]:
        self.calls.append((method, path))
        if method == "GET":
            if self.found is None:
                raise ApiError(404, {"message": "not found"})
            return self.found
        if self.then is not None:
            self.found = self.then
            raise ApiError(409, {"message": "already exists", "reason": "AlreadyExists"})
        raise AssertionError("unexpected creation")


def test_a_planted_secret_that_names_the_job_as_its_controller_holds_every_pod(
    manager: PluginManager,
) -> None:
    """A job that has not made its Secret yet (queued, paused): a Secret planted under its
    name with the job's uid as controller would have been taken as the job's own and mounted
    into its pods. It is a conflict now, and no pod is created."""
    fake = FakeTransport()
    services = "/api/v1/namespaces/team-a/services"
    planted = child("Service", "mnist") | {"apiVersion": "v1"}
    planted["metadata"] = {**planted["metadata"], "namespace": "team-a", "uid": "planted"}
    fake.existing[(services, "mnist")] = planted

    def exists(method: str, path: str, body: Any) -> None:
        if method == "POST" and (path, body["metadata"]["name"]) in fake.existing:
            raise already_exists(path)

    fake.before = exists
    with ThreadPoolExecutor(4) as creator:
        the_reconciler, recorder, _ = reconciler(manager, fake, creator)
        marks = Marks(KEY_BYTES, SINCE)
        the_reconciler.trust(marks.mark, marks.owner)
        settle(the_reconciler, KEY)
        recorder.close()
    assert fake.posted("pods") == []
    condition = next(c for c in status_writes(fake)[-1]["conditions"] if c["type"] == "Initialized")
    assert condition["reason"] == "NameConflict"
    assert condition["message"].startswith(
        "Service mnist exists and this job does not control it (it names this job as its"
        " controller, but the operator did not make it)"
    ), condition["message"]
    # What the operator creates carries its mark.
    created = [b for m, _, b in fake.requests if m == "POST" and b and b.get("kind") != "Event"]
    assert created and all(ANNOTATION_MARK in b["metadata"]["annotations"] for b in created)


def test_without_the_marks_the_planted_secret_was_taken_for_the_jobs_own(
    manager: PluginManager,
) -> None:
    """The same plant against the claim of the ownerReference alone (the operator before the
    marks): the job's pods are created, beside the planted object. The test above fails so."""
    fake = FakeTransport()
    services = "/api/v1/namespaces/team-a/services"
    planted = child("Service", "mnist") | {"apiVersion": "v1"}
    planted["metadata"] = {**planted["metadata"], "namespace": "team-a", "uid": "planted"}
    planted["metadata"]["ownerReferences"][0]["uid"] = "job-uid"
    fake.existing[(services, "mnist")] = planted
    fake.before = lambda method, path, body: (
        _raise(already_exists(path))
        if method == "POST" and (path, body["metadata"]["name"]) in fake.existing
        else None
    )
    the_reconciler, recorder, _ = reconciler(manager, fake, None)
    settle(the_reconciler, KEY)
    recorder.close()
    assert len(fake.posted("pods")) == 1 + WORKERS


def _raise(exc: Exception) -> None:
    raise exc
