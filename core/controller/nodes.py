"""Lost-node detection's view of the nodes: a cluster-wide Node informer, what it queues, and
the nodes a plan reads (`Observed.nodes`; the rules are the planner's, `t9kjobs.planner.nodes`).

Started when `--lost-node-seconds` is above 0. Nodes are cluster-scoped: the operator needs
`nodes list, watch` in a ClusterRole of their own (the chart's `nodes-rbac.yaml`). Where
listing them is refused, the detection is off, said once in the log and by the gauge
`t9kjobs_lost_node_detection` 0, and every plan gets `Observed.nodes` None: no pod is ever
force-deleted for a node reason on a guess.

Its store keeps what a plan reads (`t9kjobs.kube.slimming`), and a node event queues the jobs of
the pods on that node only when that kept part changed, or the node went: a kubelet's status
updates (every 10 s to 5 min, each node) queue nothing. The pods on a node are found by the Pod
store's `nodeName` index (`node_of`), and queued as a change of theirs would queue them
(`JobController.on_child`: batched).

A plan reads only the nodes its pods name, and none before the store has synced. A node the
watch saw deleted is `present: False`, which the planner takes as lost at once. One the synced
store never held (deleted while no operator watched: a new leader's list lacks it) is
`missing`, counted from when this watch first noticed it: the planner gives its pods up
`MISSING_NODE_SECONDS` later, not at once, because the scheduler may bind a pod to a node
created a moment ago whose event has not reached this informer yet. (Before, such pods were
left to kube-controller-manager's PodGC, 40 s, and then created again counted as nothing: the
chaos tier's lost-node phase found it.)
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable, Mapping
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from prometheus_client import Gauge

from t9kjobs.controller.threads import Supervisor
from t9kjobs.kube.informer import Informer, Store
from t9kjobs.kube.resources import Resource
from t9kjobs.kube.slimming import slimmer
from t9kjobs.kube.transport import ApiError, Transport
from t9kjobs.planner import NodeState
from t9kjobs.planner.conditions import parse_time
from t9kjobs.vocabulary import Obj

if TYPE_CHECKING:
    from t9kjobs.controller.jobs import JobController

__all__ = ["NODES", "NodeWatch", "node_of", "node_state"]

log = logging.getLogger("t9kjobs.nodes")

NODES = Resource("", "v1", "nodes", "Node")
UNREACHABLE = "node.kubernetes.io/unreachable"
# The deleted nodes remembered (the newest): a pod bound to one is lost at once.
MAX_GONE = 4096


def node_of(pod: Obj) -> str | None:
    """The node a pod is bound to: the Pod store's second index."""
    name = (pod.get("spec") or {}).get("nodeName")
    return str(name) if name else None


def _ready(node: Obj) -> Obj:
    for condition in (node.get("status") or {}).get("conditions") or []:
        if condition.get("type") == "Ready":
            return dict(condition)
    return {}


def node_state(node: Obj) -> NodeState:
    """A stored node as a plan reads it."""
    ready = _ready(node)
    since = ready.get("lastTransitionTime")
    taints = (node.get("spec") or {}).get("taints") or []
    return NodeState(
        name=str(node["metadata"]["name"]),
        present=True,
        ready=str(ready.get("status") or "Unknown"),
        since=parse_time(str(since)) if since else None,
        unreachable=any(t.get("key") == UNREACHABLE for t in taints),
    )


def _kept(node: Obj) -> tuple[object, ...]:
    """What a plan reads of a node, without its resourceVersion (which every update moves)."""
    meta = node["metadata"]
    return (
        meta.get("uid"),
        meta.get("deletionTimestamp"),
        repr((node.get("spec") or {}, _ready(node))),
    )


class NodeWatch:
    """The Node informer, its store, and the jobs its changes queue."""

    def __init__(
        self,
        transport: Transport,
        queue_pod: Callable[[str, Obj], None],
        gauge: Gauge,
        pods_on: Callable[[str], list[Obj]],
        now: Callable[[], datetime] = lambda: datetime.now(UTC),
    ) -> None:
        """`queue_pod(event, pod)` queues a pod's job, as a change of the pod would;
        `gauge` is `t9kjobs_lost_node_detection`; `pods_on(node)` the pods cached on a node
        (the Pod store's index)."""
        self.transport = transport
        self.store = Store(slimmer("Node"))
        self.informer = Informer(transport, NODES, self.on_node, store=self.store)
        self._queue_pod = queue_pod
        self._gauge = gauge
        self._pods_on = pods_on
        self._kept: dict[str, tuple[object, ...]] = {}
        # Nodes seen deleted (a watch's DELETED, or gone from a relist), oldest first.
        self._gone: dict[str, None] = {}
        # Nodes pods name that the synced store never held: when first noticed, oldest first.
        self._missing: dict[str, datetime] = {}
        self._missing_lock = threading.Lock()  # the workers' plans read nodes at once
        self._now = now
        self.on = False

    @classmethod
    def wired(cls, seconds: float, transport: Transport, jobs: JobController) -> NodeWatch | None:
        """The detection of an operator run with `--lost-node-seconds` `seconds`, wired to its
        job controller: node events queue its jobs, its reconciler's plans read the nodes.
        None when `seconds` is 0 (off: the gauge says so)."""
        gauge = jobs.metrics.lost_node_detection
        if seconds <= 0:
            gauge.set(0)
            return None
        reconciler = jobs.reconciler

        def pods_on(node: str) -> list[Obj]:
            store = reconciler.cache.child_stores.get("Pod")
            return store.indexed(node) if store is not None else []

        watch = cls(transport, jobs.on_child, gauge, pods_on)
        reconciler.nodes, reconciler.lost_node_seconds = watch, seconds
        return watch

    def start(self, supervisor: Supervisor) -> list[Informer]:
        """Start the informer unless listing nodes is refused (then the detection is off, said
        once): the informers started. Not waited for: plans read no node until it synced."""
        try:
            self.transport.request("GET", NODES.path(), query={"limit": "1"})
        except ApiError as exc:
            if exc.status in (401, 403):
                log.warning(
                    "lost-node detection off: cannot list nodes (%s); grant nodes list,"
                    " watch (the chart's lostNodes.seconds) or run with --lost-node-seconds 0",
                    exc.status,
                )
                self._gauge.set(0)
                return []
            # Anything else is the informer's to retry.
        self.informer.start()
        supervisor.watch(self.informer.name, self.informer.thread)
        self.on = True
        self._gauge.set(1)
        return [self.informer]

    def stop(self) -> None:
        self.informer.stop()

    def on_node(self, event: str, node: Obj) -> None:
        """Queue the jobs of the pods on `node` when what a plan reads of it changed."""
        name = str(node["metadata"]["name"])
        if event == "DELETED":
            self._kept.pop(name, None)
            self._gone[name] = None
            while len(self._gone) > MAX_GONE:
                del self._gone[next(iter(self._gone))]
        else:
            self._gone.pop(name, None)
            with self._missing_lock:
                self._missing.pop(name, None)
            kept = _kept(self.store.slim(node))
            if self._kept.get(name) == kept:
                return  # a heartbeat: nothing a plan reads
            self._kept[name] = kept
        for pod in self._pods_on(name):
            self._queue_pod("MODIFIED", pod)

    def syncing(self, pods: Iterable[Obj]) -> bool:
        """Whether the detection is on but its store has not synced while some of these pods
        are bound to a node: their plan read no node, and must be made again once it has."""
        if not self.on or self.informer.synced.is_set():
            return False
        return any(node_of(pod) for pod in pods if pod.get("kind", "Pod") == "Pod")

    def _noticed(self, name: str) -> datetime:
        """When a plan first read `name` missing from the synced store."""
        with self._missing_lock:
            first = self._missing.setdefault(name, self._now())
            while len(self._missing) > MAX_GONE:
                del self._missing[next(iter(self._missing))]
            return first

    def states(self, pods: Iterable[Obj]) -> Mapping[str, NodeState] | None:
        """The nodes these pods name, as a plan reads them; None while the detection is off
        or its store has not synced."""
        if not self.on or not self.informer.synced.is_set():
            return None
        out: dict[str, NodeState] = {}
        for pod in pods:
            name = node_of(pod)
            if name is None or name in out:
                continue
            node = self.store.get("", name)
            if node is not None:
                out[name] = node_state(node)
            elif name in self._gone:
                out[name] = NodeState(name, False)
            else:
                out[name] = NodeState(name, True, "Unknown", self._noticed(name), missing=True)
        return out
