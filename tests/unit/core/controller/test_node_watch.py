"""Lost-node detection's controller side (`t9kjobs.controller.nodes`): a node event queues the
jobs of the pods on that node only when what a plan reads of it changed (its Ready condition,
its taints, its going), never on a kubelet's heartbeat; the nodes a plan reads, and none before
the store synced or where listing nodes is refused; the store keeps what a plan reads, and
the Pod store finds pods by node."""

from __future__ import annotations

import copy
import threading
from datetime import UTC, datetime, timedelta

from prometheus_client import CollectorRegistry, Gauge

from t9kjobs.controller.nodes import NodeWatch, node_of
from t9kjobs.controller.threads import Supervisor
from t9kjobs.kube.informer import Store
from t9kjobs.kube.slimming import slimmer
from t9kjobs.kube.transport import ApiError
from t9kjobs.planner import NodeState
from t9kjobs.vocabulary import Obj
from tests.unit.core.kube.fake_transport import FakeTransport


def _node(
    name: str, ready: str = "True", heartbeat: str = "2026-01-01T12:00:00Z", rv: str = "1"
) -> Obj:
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "uid": f"uid-{name}",
            "resourceVersion": rv,
            "labels": {"kubernetes.io/hostname": name},
            "managedFields": [{"manager": "kubelet"}],
        },
        "spec": {"podCIDR": "10.0.0.0/24", "providerID": "kwok://x"},
        "status": {
            "conditions": [
                {
                    "type": "Ready",
                    "status": ready,
                    "reason": "KubeletReady",
                    "message": "kubelet is posting ready status",
                    "lastHeartbeatTime": heartbeat,
                    "lastTransitionTime": "2026-01-01T11:00:00Z",
                },
                {
                    "type": "MemoryPressure",
                    "status": "False",
                    "lastHeartbeatTime": heartbeat,
                    "lastTransitionTime": "2026-01-01T11:00:00Z",
                },
            ],
            "images": [{"names": ["busybox"], "sizeBytes": 1}],
            "allocatable": {"cpu": "32"},
        },
    }


def _pod(name: str, node: str, job: str) -> Obj:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": "ns",
            "uid": f"uid-{name}",
            "resourceVersion": "1",
            "ownerReferences": [{"controller": True, "uid": job, "kind": "TinyJob", "name": job}],
        },
        "spec": {"nodeName": node, "containers": [{"name": "c"}]},
        "status": {"phase": "Running"},
    }


class _Watch:
    def __init__(self, pods: list[Obj] = ()) -> None:  # type: ignore[assignment]
        self.queued: list[str] = []
        self.pods = Store(slimmer("Pod"), index=node_of)
        for pod in pods:
            self.pods.put(copy.deepcopy(pod))
        self.gauge = Gauge("t9kjobs_lost_node_detection", "", registry=CollectorRegistry())
        self.transport = FakeTransport()
        self.clock = [datetime(2026, 1, 1, 12, tzinfo=UTC)]
        self.watch = NodeWatch(
            self.transport.as_transport(),
            lambda event, pod: self.queued.append(pod["metadata"]["name"]),
            self.gauge,
            self.pods.indexed,
            lambda: self.clock[0],
        )

    def event(self, kind: str, node: Obj) -> None:
        """What the informer does with a watch event: store it, then hand it to the handler."""
        if kind == "DELETED":
            self.watch.store.remove("", node["metadata"]["name"], last=node)
        else:
            self.watch.store.put(copy.deepcopy(node))
        self.watch.on_node(kind, copy.deepcopy(node))


def test_a_heartbeat_queues_nothing_a_ready_change_queues_the_jobs_on_that_node() -> None:
    w = _Watch([_pod("a-0", "n1", "a"), _pod("b-0", "n1", "b"), _pod("c-0", "n2", "c")])
    w.event("ADDED", _node("n1"))
    assert sorted(w.queued) == ["a-0", "b-0"]
    w.queued.clear()
    w.event("MODIFIED", _node("n1", heartbeat="2026-01-01T12:00:40Z", rv="2"))
    assert w.queued == []
    w.event("MODIFIED", _node("n1", ready="Unknown", heartbeat="2026-01-01T12:00:40Z", rv="3"))
    assert sorted(w.queued) == ["a-0", "b-0"]
    w.queued.clear()
    tainted = _node("n1", ready="Unknown", rv="4")
    tainted["spec"]["taints"] = [{"key": "node.kubernetes.io/unreachable", "effect": "NoExecute"}]
    w.event("MODIFIED", tainted)
    assert sorted(w.queued) == ["a-0", "b-0"]
    w.queued.clear()
    w.event("DELETED", tainted)
    assert sorted(w.queued) == ["a-0", "b-0"]


def test_the_node_store_keeps_only_what_a_plan_reads() -> None:
    node = _node("n1")
    node["spec"]["taints"] = [
        {"key": "node.kubernetes.io/unreachable", "effect": "NoExecute", "timeAdded": "t"}
    ]
    node["spec"]["unschedulable"] = True
    node["metadata"]["deletionTimestamp"] = "2026-01-01T12:00:00Z"
    kept = slimmer("Node")(node)
    assert kept == {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": "n1",
            "uid": "uid-n1",
            "resourceVersion": "1",
            "deletionTimestamp": "2026-01-01T12:00:00Z",
        },
        "spec": {
            "taints": [
                {"key": "node.kubernetes.io/unreachable", "effect": "NoExecute", "timeAdded": "t"}
            ],
            "unschedulable": True,
        },
        "status": {
            "conditions": [
                {
                    "type": "Ready",
                    "status": "True",
                    "reason": "KubeletReady",
                    "lastTransitionTime": "2026-01-01T11:00:00Z",
                }
            ]
        },
    }
    assert slimmer("Node")(kept) == kept  # a listed node is slimmed twice


def test_the_pod_store_finds_pods_by_node_and_forgets_a_moved_or_deleted_one() -> None:
    store = Store(slimmer("Pod"), index=node_of)
    store.put(_pod("a-0", "n1", "a"))
    store.put(_pod("a-1", "n1", "a"))
    assert [p["metadata"]["name"] for p in store.indexed("n1")] == ["a-0", "a-1"]
    moved = _pod("a-1", "n2", "a")
    moved["metadata"]["resourceVersion"] = "2"
    store.put(moved)
    assert [p["metadata"]["name"] for p in store.indexed("n1")] == ["a-0"]
    store.remove("ns", "a-0")
    assert store.indexed("n1") == [] and len(store.indexed("n2")) == 1
    assert Store(slimmer("Pod")).indexed("n1") == []  # no index: nothing found


def test_plans_read_no_node_until_the_store_synced_then_the_nodes_their_pods_name() -> None:
    w = _Watch()
    pods = [_pod("a-0", "n1", "a"), _pod("a-1", "gone", "a"), _pod("a-2", "n1", "a")]
    assert w.watch.states(pods) is None  # not started
    started = w.watch.start(Supervisor(threading.Event()))
    assert started == [w.watch.informer]
    w.watch.stop()
    assert w.gauge._value.get() == 1  # type: ignore[attr-defined]
    assert w.watch.states(pods) is None  # not synced yet
    # ...so the reconciler plans these pods' job again soon: a gone node sends no event.
    assert w.watch.syncing(pods) and not w.watch.syncing([])
    w.watch.store.put(_node("n1", ready="False"))
    w.watch.informer.synced.set()
    assert not w.watch.syncing(pods)
    # A node the store never held (deleted while no operator watched, or created a moment
    # ago): missing, counted from when it was first noticed, which later reads keep.
    noticed = w.clock[0]
    missing = NodeState("gone", True, "Unknown", noticed, missing=True)
    assert w.watch.states(pods) == {
        "n1": NodeState("n1", True, "False", datetime(2026, 1, 1, 11, tzinfo=UTC), False),
        "gone": missing,
    }
    w.clock[0] = noticed + timedelta(seconds=30)
    assert w.watch.states(pods)["gone"] == missing  # type: ignore[index]
    w.event("ADDED", _node("gone"))
    w.event("DELETED", _node("gone"))
    assert w.watch.states(pods) == {
        "n1": NodeState("n1", True, "False", datetime(2026, 1, 1, 11, tzinfo=UTC), False),
        "gone": NodeState("gone", False),
    }
    w.event("ADDED", _node("gone", rv="9"))  # registered again
    again = w.watch.states(pods)
    assert again is not None and again["gone"].present


def test_listing_nodes_refused_turns_the_detection_off_once() -> None:
    w = _Watch()

    def refuse(method: str, path: str, body: Obj | None) -> None:
        if path == "/api/v1/nodes":
            raise ApiError(403, {"message": "forbidden"})

    w.transport.before = refuse
    assert w.watch.start(Supervisor(threading.Event())) == []
    assert w.gauge._value.get() == 0  # type: ignore[attr-defined]
    w.watch.informer.synced.set()
    assert w.watch.states([_pod("a-0", "n1", "a")]) is None
