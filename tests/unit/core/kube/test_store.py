"""The informer store: never goes back in time, indexes children by controller owner."""

from __future__ import annotations

from typing import Any

from t9kjobs.controller.metrics import _resource_of
from t9kjobs.kube.informer import Store


def obj(name: str, rv: str, ns: str = "a", owner: str | None = "u1") -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "namespace": ns, "resourceVersion": rv}
    if owner:
        meta["ownerReferences"] = [{"uid": owner, "controller": True}]
    return {"kind": "Pod", "metadata": meta}


def test_an_older_version_never_replaces_a_newer_one() -> None:
    s = Store()
    assert s.put(obj("p", "10"))
    assert not s.put(obj("p", "9"))
    assert s.get("a", "p")["metadata"]["resourceVersion"] == "10"  # type: ignore[index]


def test_children_by_owner() -> None:
    s = Store()
    s.put(obj("p1", "1"))
    s.put(obj("p2", "2", owner="u2"))
    assert [o["metadata"]["name"] for o in s.owned_by("u1")] == ["p1"]
    s.remove("a", "p1")
    assert s.owned_by("u1") == []


def test_replace_of_one_namespace_keeps_the_others() -> None:
    s = Store()
    s.put(obj("p", "1", ns="a"))
    s.put(obj("q", "1", ns="b"))
    changed, gone = s.replace([obj("r", "2", ns="a")], namespace="a")
    assert [o["metadata"]["name"] for o in changed] == ["r"]
    assert [o["metadata"]["name"] for o in gone] == ["p"]
    assert s.get("b", "q") is not None


def test_metric_resource_labels_are_bounded() -> None:
    assert _resource_of("/api/v1/namespaces/ns/pods") == "pods"
    assert _resource_of("/api/v1/namespaces/ns/pods/x") == "pods"
    assert (
        _resource_of("/apis/batch.tensorstack.dev/v1beta1/namespaces/n/genericjobs/j/status")
        == "genericjobs/status"
    )
    assert _resource_of("/apis/batch.tensorstack.dev/v1beta1") == "discovery"


def test_an_answer_older_than_a_deletion_does_not_bring_the_object_back() -> None:
    s = Store()
    s.put(obj("p", "10"))
    s.remove("a", "p", last=obj("p", "12"))  # the watch saw the deletion at 12
    assert not s.put(obj("p", "11"))  # the DELETE's own answer, arriving late
    assert s.get("a", "p") is None
    assert s.put(obj("p", "13"))  # a new pod of the same name
    assert s.get("a", "p") is not None


def test_managed_fields_are_not_kept() -> None:
    s = Store()
    p = obj("p", "1")
    p["metadata"]["managedFields"] = [{"manager": "kubectl", "fieldsV1": {"f:spec": {}}}]
    s.put(p)
    assert "managedFields" not in s.get("a", "p")["metadata"]  # type: ignore[index]
