"""The chaos tier's judges can fail: the audit log's terms catch a write after a lost Lease,
the observer catches a status going back and two pods of one replica (tests/chaos)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from t9kjobs.vocabulary import Obj
from tests.chaos.audit import Audit
from tests.chaos.judges import gangs_astray
from tests.chaos.observer import Observer, regressions


def event(at: str, agent: str, verb: str, resource: str, name: str, code: int, **extra: Any) -> Obj:
    return {
        "stage": "ResponseComplete",
        "userAgent": agent,
        "verb": verb,
        "objectRef": {"resource": resource, "name": name, "namespace": "chaos"},
        "responseStatus": {"code": code},
        "requestReceivedTimestamp": f"2026-01-01T12:00:{at}Z",
        "stageTimestamp": f"2026-01-01T12:00:{at}Z",
        **extra,
    }


def lease(at: str, writer: str, holder: str, code: int = 200) -> Obj:
    body = {"requestObject": {"spec": {"holderIdentity": holder}}}
    return event(
        at, f"t9k-jobs-operator/0.1.0 ({writer})", "update", "leases", "lease", code, **body
    )


def write(at: str, writer: str, name: str) -> Obj:
    return event(at, f"t9k-jobs-operator/0.1.0 ({writer})", "create", "pods", name, 201)


def test_a_write_after_the_lease_passed_on_is_caught(tmp_path: Path) -> None:
    log = tmp_path / "audit.log"
    events = [
        lease("01.000000", "a-1", "a-1"),
        write("02.000000", "a-1", "p-0"),  # a leads: fine
        write("03.000000", "b-1", "p-1"),  # b does not lead yet
        lease("10.000000", "a-1", "a-1", code=409),  # a's failed renewal changes nothing
        lease("20.000000", "b-1", "b-1"),
        write("20.500000", "a-1", "p-0"),  # a, thawed, writes after b took over
        # reads (a service account's are logged too) are no writes, nor Lease writes
        event("20.600000", "t9k-jobs-operator/0.1.0 (a-1)", "list", "pods", "", 200),
        event("20.700000", "t9k-jobs-operator/0.1.0 (b-1)", "get", "leases", "lease", 200),
        write("21.000000", "b-1", "p-0"),
        lease("30.000000", "b-1", ""),  # b releases
        write("30.100000", "b-1", "p-2"),
    ]
    log.write_text("\n".join(json.dumps(e) for e in events) + "\nnot json\n")
    audit = Audit(log, "lease")
    assert [(t.identity, t.end is not None) for t in audit.terms] == [("a-1", True), ("b-1", True)]
    caught = [(w.identity, w.name) for w in audit.outside_terms()]
    assert caught == [("b-1", "p-1"), ("a-1", "p-0"), ("b-1", "p-2")]
    assert audit.creations("pods") == {"p-0": 3, "p-1": 1, "p-2": 1}
    taken = audit.takeover_after(audit.terms[0].start + 5, "a-1")
    assert taken is not None and taken.identity == "b-1"
    assert audit.last_renewal("a-1", taken.start) == audit.terms[0].start  # 409: not renewed


def test_a_status_going_back_is_caught() -> None:
    running = {"phase": "Running", "backoffCount": 2, "tasks": [{"type": "w", "restartCount": 2}]}
    assert regressions(running, {**running, "phase": "Pending"}) == ["phase Running -> Pending"]
    assert regressions(running, {**running, "backoffCount": 1}) == ["backoffCount 2 -> 1"]
    assert regressions(running, {**running, "tasks": [{"type": "w", "restartCount": 1}]}) == [
        "tasks[w] 2 -> 1"
    ]
    done = {"phase": "Failed", "completionTime": "t1"}
    assert regressions(done, {"phase": "Succeeded", "completionTime": "t1"}) == [
        "finished phase Failed -> Succeeded"
    ]
    assert regressions(done, {"phase": "Failed", "completionTime": "t2"}) == [
        "completionTime t1 -> t2"
    ]
    assert regressions(running, {**running, "phase": "Succeeded", "backoffCount": 3}) == []


def test_two_pods_of_one_replica_are_caught() -> None:
    observer = Observer(None, "chaos", {})  # type: ignore[arg-type]
    pod = {"metadata": {"name": "j-worker-0", "uid": "1"}}
    observer._pod("ADDED", pod)
    observer._pod("DELETED", pod)
    observer._pod("ADDED", {"metadata": {"name": "j-worker-0", "uid": "2"}})  # a restart: fine
    assert observer.violations == []
    observer._pod("ADDED", {"metadata": {"name": "j-worker-0", "uid": "3"}})
    assert observer.violations == ["pod j-worker-0: 3 while ['2'] exists"]
    assert observer.pod_lives == {"j-worker-0": ["1", "2", "3"]}


def _owned(obj: Obj, uid: str) -> Obj:
    obj["metadata"]["ownerReferences"] = [{"uid": uid, "controller": True}]
    return obj


def test_a_pod_outside_its_gang_and_a_finished_job_s_gang_are_caught() -> None:
    jobs = [
        {"metadata": {"name": "done", "uid": "u1"}, "status": {"phase": "Succeeded"}},
        {"metadata": {"name": "runs", "uid": "u2"}, "status": {"phase": "Running"}},
    ]
    in_gang = {"containers": [], "schedulingGroup": {"podGroupName": "runs"}}
    alone = {"containers": []}  # a replacement placed on its own
    elsewhere = {"containers": [], "schedulingGroup": {"podGroupName": "done"}}
    fine = [
        _owned({"kind": "PodGroup", "metadata": {"name": "runs"}}, "u2"),
        _owned({"kind": "PodGroup", "metadata": {"name": "done", "deletionTimestamp": "t"}}, "u1"),
        _owned({"metadata": {"name": "runs-worker-0"}, "spec": in_gang}, "u2"),
        _owned({"metadata": {"name": "runs-worker-2"}, "spec": alone}, "u2"),
    ]
    assert gangs_astray(jobs, fine) == []
    astray = [
        _owned({"kind": "PodGroup", "metadata": {"name": "done"}}, "u1"),
        _owned({"metadata": {"name": "runs-worker-1"}, "spec": elsewhere}, "u2"),
    ]
    assert gangs_astray(jobs, astray) == [
        "done: the PodGroup of finished done is not deleted",
        "runs-worker-1: in gang 'done', not its job's (runs)",
    ]
