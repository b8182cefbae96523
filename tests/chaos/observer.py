"""An observer of the chaos namespace that owes nothing to the operator: a list+watch of its own
(not the operator's informers) of the pods and of every job kind, judging each change as it
comes: two pods of one replica alive at once, a job's status going back (phase, restart counts,
completion time). After a broken watch it lists again; a list shows no history, so it can miss a
violation in that gap, never invent one. It also follows the nodes, and hands every node, pod and
job event, with the time it saw it, to a `Ledger` (stranding.py): the lost-node invariant's
evidence."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

from t9kjobs.kube.transport import ApiError, Transport
from tests.chaos.stranding import Ledger

__all__ = ["Observer"]

Obj = dict[str, Any]

_RANK = {None: 0, "Pending": 0, "Running": 1, "Succeeded": 2, "Failed": 2}


def _counts(status: Obj) -> dict[str, int]:
    """Every restart count in a status, by where it is."""
    out = {"backoffCount": int(status.get("backoffCount") or 0)}
    for task in status.get("tasks") or []:
        out[f"tasks[{task['type']}]"] = int(task.get("restartCount") or 0)
        for replica in task.get("replicas") or []:
            out[replica["name"]] = int(replica.get("restartCount") or 0)
    return out


def regressions(before: Obj, after: Obj) -> list[str]:
    """How `after` goes back from `before` (empty when it does not)."""
    found = []
    phase_a, phase_b = before.get("phase"), after.get("phase")
    if _RANK.get(phase_b, 0) < _RANK.get(phase_a, 0):
        found.append(f"phase {phase_a} -> {phase_b}")
    elif _RANK.get(phase_a) == 2 and phase_b != phase_a:
        found.append(f"finished phase {phase_a} -> {phase_b}")
    counts_a, counts_b = _counts(before), _counts(after)
    for where, n in counts_a.items():
        if where in counts_b and counts_b[where] < n:
            found.append(f"{where} {n} -> {counts_b[where]}")
    if before.get("completionTime") and after.get("completionTime") != before["completionTime"]:
        found.append(f"completionTime {before['completionTime']} -> {after.get('completionTime')}")
    return found


class Observer:
    def __init__(self, transport: Transport, namespace: str, plurals: dict[str, str]) -> None:
        self.transport = transport
        self.namespace = namespace
        self.violations: list[str] = []
        self.pod_lives: dict[str, list[str]] = {}  # pod name -> uids, in order of appearance
        self.statuses: dict[tuple[str, str], Obj] = {}  # (kind, name) -> last status seen
        self._alive: dict[str, set[str]] = {}  # pod name -> uids that exist
        self.ledger = Ledger()
        self._lock = threading.Lock()
        self._stop = threading.Event()
        follow = [
            (f"/api/v1/namespaces/{namespace}/pods", "Pod", self._pod),
            ("/api/v1/nodes", "Node", self._node),
        ]
        for kind, plural in plurals.items():
            path = f"/apis/batch.tensorstack.dev/v1beta1/namespaces/{namespace}/{plural}"
            follow.append((path, kind, self._job))
        self._threads = [
            threading.Thread(target=self._follow, args=args, daemon=True) for args in follow
        ]

    def start(self) -> None:
        for thread in self._threads:
            thread.start()

    def stop(self) -> None:
        self._stop.set()
        for thread in self._threads:
            thread.join(60)

    # -- judging each change -----------------------------------------------------------------

    def _node(self, event: str, node: Obj) -> None:
        self.ledger.node(event, node, time.time())

    def _pod(self, event: str, pod: Obj) -> None:
        name, uid = pod["metadata"]["name"], pod["metadata"]["uid"]
        self.ledger.pod(event, pod, time.time())
        with self._lock:
            alive = self._alive.setdefault(name, set())
            if event == "DELETED":
                alive.discard(uid)
                return
            if uid not in alive:
                if alive:
                    self.violations.append(f"pod {name}: {uid} while {sorted(alive)} exists")
                alive.add(uid)
            lives = self.pod_lives.setdefault(name, [])
            if uid not in lives:
                lives.append(uid)

    def _job(self, event: str, job: Obj) -> None:
        key = (str(job.get("kind")), job["metadata"]["name"])
        self.ledger.job(event, job, time.time())
        with self._lock:
            if event == "DELETED":
                self.statuses.pop(key, None)
                return
            status = job.get("status") or {}
            before = self.statuses.get(key)
            if before is not None and before.get("_uid") == job["metadata"]["uid"]:
                for what in regressions(before, status):
                    self.violations.append(f"{key[0]} {key[1]}: {what}")
            self.statuses[key] = {**status, "_uid": job["metadata"]["uid"]}

    def _relisted(self, items: list[Obj], handle: Callable[[str, Obj], None]) -> None:
        if handle == self._node:
            self.ledger.nodes_relisted({n["metadata"]["name"] for n in items}, time.time())
        if handle == self._pod:
            self.ledger.pods_relisted({p["metadata"]["uid"] for p in items}, time.time())
            listed = {(p["metadata"]["name"], p["metadata"]["uid"]) for p in items}
            with self._lock:
                for name, alive in self._alive.items():
                    alive.intersection_update({uid for n, uid in listed if n == name})
        for item in items:
            handle("ADDED", item)

    # -- list+watch --------------------------------------------------------------------------

    def _follow(self, path: str, kind: str, handle: Callable[[str, Obj], None]) -> None:
        version = ""
        while not self._stop.is_set():
            try:
                if not version:
                    answer = self.transport.request("GET", path)
                    items = answer.get("items") or []
                    for item in items:  # list items carry no kind
                        item.setdefault("kind", kind)
                    self._relisted(items, handle)
                    version = str(answer["metadata"]["resourceVersion"])
                query = {"watch": "1", "resourceVersion": version, "timeoutSeconds": "10"}
                for event in self.transport.stream(path, query, timeout=15):
                    obj = event.get("object") or {}
                    if event.get("type") == "ERROR":
                        raise ApiError(int(obj.get("code") or 500), obj)
                    version = str(obj["metadata"]["resourceVersion"])
                    handle(str(event["type"]), obj)
                    if self._stop.is_set():
                        return
            except ApiError as exc:
                if exc.status == 410:
                    version = ""  # history gone: list again
                else:
                    self._stop.wait(0.5)
            except Exception:  # the API server restarting: watch again from where it was
                self._stop.wait(0.5)
