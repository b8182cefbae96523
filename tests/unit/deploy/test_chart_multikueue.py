"""The chart's MultiKueue values: the rights Kueue needs on our kinds, on a manager and on a
worker cluster, bound to the subjects named, and nothing when none is named."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

Obj = dict[str, Any]
KUEUE_SA = {
    "kind": "ServiceAccount",
    "name": "kueue-controller-manager",
    "namespace": "kueue-system",
}
WORKER_SA = {"kind": "ServiceAccount", "name": "multikueue", "namespace": "kueue-system"}


def _multikueue(objects: list[Obj]) -> dict[str, Obj]:
    return {
        f"{o['kind']}/{o['metadata']['name']}": o
        for o in objects
        if "multikueue" in o["metadata"]["name"]
    }


def _rights(role: Obj) -> dict[str, set[str]]:
    return {r: set(rule["verbs"]) for rule in role["rules"] for r in rule["resources"]}


def test_no_subject_no_rights(render: Callable[..., list[Obj]]) -> None:
    assert _multikueue(render({})) == {}


def test_manager_and_worker_rights_on_our_kinds(render: Callable[..., list[Obj]]) -> None:
    objects = render({"multiKueue": {"managerSubjects": [KUEUE_SA], "workerSubjects": [WORKER_SA]}})
    found = _multikueue(objects)
    manager, worker = (found[f"ClusterRole/t9k-jobs-multikueue-{r}"] for r in ("manager", "worker"))
    assert _rights(manager)["genericjobs"] == {"get", "list", "watch"}
    assert _rights(manager)["genericjobs/status"] == {"get", "update", "patch"}
    assert _rights(worker)["genericjobs"] == {"create", "delete", "get", "list", "watch"}
    assert _rights(worker)["genericjobs/status"] == {"get"}
    assert {r for r in _rights(manager) if not r.endswith("/status")} == {
        r for r in _rights(worker) if not r.endswith("/status")
    }
    assert all(rule["apiGroups"] == ["batch.tensorstack.dev"] for rule in manager["rules"])
    for role, subject in (("manager", KUEUE_SA), ("worker", WORKER_SA)):
        binding = found[f"ClusterRoleBinding/t9k-jobs-multikueue-{role}"]
        assert binding["roleRef"]["name"] == f"t9k-jobs-multikueue-{role}"
        assert binding["subjects"] == [subject]
