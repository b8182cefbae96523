"""The chaos tier's lost-node invariant (tests/chaos/stranding.py) can fail: a pod left on a node
not Ready, or deleted, longer than the bound + the slack + the faults' pauses is caught; one
replaced in time, one whose job finished, one whose node came back, is not."""

from __future__ import annotations

from datetime import UTC, datetime

from t9kjobs.vocabulary import Obj
from tests.chaos.stranding import Ledger

BOUND, SLACK = 10, 15  # allowed: 25 s beyond any pause


def _stamp(at: float) -> str:
    return datetime.fromtimestamp(at, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def node(ready: str, since: float) -> Obj:
    condition = {"type": "Ready", "status": ready, "lastTransitionTime": _stamp(since)}
    return {"metadata": {"name": "n1"}, "status": {"conditions": [condition]}}


def pod(phase: str = "Running", node_name: str = "n1") -> Obj:
    return {
        "metadata": {
            "name": "job-worker-1",
            "uid": "p1",
            "ownerReferences": [{"controller": True, "uid": "j1"}],
        },
        "spec": {"nodeName": node_name},
        "status": {"phase": phase},
    }


def job(phase: str) -> Obj:
    return {
        "kind": "GenericJob",
        "metadata": {"name": "job", "uid": "j1"},
        "status": {"phase": phase},
    }


def running_on_n1() -> Ledger:
    """A job's pod Running on n1 from t=1000, n1 Ready."""
    ledger = Ledger()
    ledger.node("ADDED", node("True", 0), 1000)
    ledger.job("ADDED", job("Running"), 1000)
    ledger.pod("ADDED", pod(), 1000)
    return ledger


def test_a_pod_left_on_an_unreachable_node_is_caught_and_one_replaced_in_time_is_not() -> None:
    ledger = running_on_n1()
    # The node's verdict is written at t=1100 and seen a second later: the spell counts from
    # the condition's lastTransitionTime, as the operator's bound does.
    ledger.node("MODIFIED", node("Unknown", 1100), 1101)
    found = ledger.stranded(BOUND, SLACK, [], now=1200)
    assert len(found) == 1
    assert "job-worker-1 (GenericJob/job) on n1, Ready Unknown: 100.0s (still there)" in found[0]
    assert ledger.stranded(BOUND, SLACK, [], now=1124) == []

    ledger.pod("DELETED", pod(), 1124)  # force-deleted 24 s after the transition
    assert ledger.stranded(BOUND, SLACK, [], now=1200) == []


def test_a_pod_force_deleted_late_is_caught_unless_a_pause_covers_the_delay() -> None:
    ledger = running_on_n1()
    ledger.node("MODIFIED", node("False", 1100), 1100)
    ledger.pod("DELETED", pod(), 1150)
    assert len(ledger.stranded(BOUND, SLACK, [], now=1200)) == 1
    # The leader was killed at 1090 and the standby led from 1120: 20 s of that count not.
    assert len(ledger.stranded(BOUND, SLACK, [(1090, 1120)], now=1200)) == 1  # 50 > 45
    assert ledger.stranded(BOUND, SLACK, [(1090, 1126)], now=1200) == []  # 50 < 51


def test_a_deleted_node_counts_from_its_deletion() -> None:
    ledger = running_on_n1()
    ledger.node("DELETED", {"metadata": {"name": "n1"}}, 1100)
    assert ledger.stranded(BOUND, SLACK, [], now=1124) == []
    found = ledger.stranded(BOUND, SLACK, [], now=1160)
    assert len(found) == 1 and "deleted: 60.0s" in found[0]
    # A node deleted while not Ready keeps the older start.
    ledger = running_on_n1()
    ledger.node("MODIFIED", node("Unknown", 1100), 1100)
    ledger.node("DELETED", {"metadata": {"name": "n1"}}, 1120)
    assert "Ready Unknown: 30.0s" in ledger.stranded(BOUND, SLACK, [], now=1130)[0]
    # A relist without the node: deleted meanwhile.
    ledger = running_on_n1()
    ledger.nodes_relisted(set(), 1100)
    assert len(ledger.stranded(BOUND, SLACK, [], now=1160)) == 1


def test_a_finished_job_an_ended_pod_and_a_node_back_are_not_counted() -> None:
    finished = running_on_n1()
    finished.node("MODIFIED", node("Unknown", 1100), 1100)
    finished.job("MODIFIED", job("Failed"), 1105)  # its pods may stay: it waits on none
    assert finished.stranded(BOUND, SLACK, [], now=1300) == []

    ended = running_on_n1()
    ended.pod("MODIFIED", pod("Succeeded"), 1050)
    ended.node("MODIFIED", node("Unknown", 1100), 1100)
    assert ended.stranded(BOUND, SLACK, [], now=1300) == []

    back = running_on_n1()
    back.node("MODIFIED", node("Unknown", 1100), 1100)
    back.node("MODIFIED", node("True", 1110), 1110)  # its kubelet answers again
    assert back.stranded(BOUND, SLACK, [], now=1300) == []
    back.node("MODIFIED", node("Unknown", 1200), 1200)  # and goes again: a new spell
    assert "Ready Unknown: 100.0s" in back.stranded(BOUND, SLACK, [], now=1300)[0]

    elsewhere = running_on_n1()
    elsewhere.pod("MODIFIED", pod(node_name="n2"), 1001)
    elsewhere.node("MODIFIED", node("Unknown", 1100), 1100)
    assert elsewhere.stranded(BOUND, SLACK, [], now=1300) == []


def test_a_relist_without_the_pod_ends_it() -> None:
    ledger = running_on_n1()
    ledger.node("MODIFIED", node("Unknown", 1100), 1100)
    ledger.pods_relisted(set(), 1120)
    assert ledger.stranded(BOUND, SLACK, [], now=1300) == []
    assert ledger.stays("n1", 1100) == {"job-worker-1": 20.0}
