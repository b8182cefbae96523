"""KWOK nodes of a pool of their own, broken the way the node lifecycle controller sees a dead
kubelet (docs/lifecycle.md, "Lost nodes"), for the chaos tier's lost-node phase
(tests/chaos/lost_nodes.py) and `bench/recovery.py`. tests/e2e/test_lost_nodes.py does the same
with its own per-scenario pools.

A pool node carries the label `t9kjobs.dev/pool=<pool>` and the taint
`t9kjobs.dev/pool=<pool>:NoSchedule`, so only pods that ask for the pool (`pool_pod`) land there;
it has 8 GPUs, so a pod of 8 GPUs has a node to itself. Broken:

- unreachable (`Ready` Unknown) or NotReady (`Ready` False): KWOK stops driving it (its
  annotation `kwok.x-k8s.io/node: fake` removed: its pods stay as they are, `Running`), every
  condition rewritten as the node lifecycle controller writes them (lastTransitionTime now), and
  its `NoExecute`/`NoSchedule` taints (`unreachable` or `not-ready`);
- deleted: `DELETE` of the node.
"""

from __future__ import annotations

import time
from datetime import UTC, datetime

from t9kjobs.kube.transport import ApiError, Transport
from t9kjobs.vocabulary import Obj
from tests.waiting import until

__all__ = ["POOL", "NodePool", "pool_pod", "ready"]

POOL = "t9kjobs.dev/pool"
KWOK_MANAGED = "kwok.x-k8s.io/node"


def _taint(pool: str) -> Obj:
    return {"key": POOL, "value": pool, "effect": "NoSchedule"}


def ready(node: Obj) -> str | None:
    """The status of a node's Ready condition (None: it has none yet)."""
    for c in (node.get("status") or {}).get("conditions") or []:
        if c["type"] == "Ready":
            return str(c["status"])
    return None


def pool_pod(template: Obj, pool: str, gpus: int = 8) -> Obj:
    """`template` (a pod template) asking for the pool's nodes, with `gpus` GPUs."""
    spec = template["spec"]
    spec["nodeSelector"] = {**(spec.get("nodeSelector") or {}), POOL: pool}
    spec["tolerations"] = [
        *(spec.get("tolerations") or []),
        {"key": POOL, "operator": "Exists", "effect": "NoSchedule"},
    ]
    for container in spec["containers"]:
        container["resources"] = {"limits": {"nvidia.com/gpu": str(gpus)}}
    return template


class NodePool:
    """`count` KWOK nodes `<prefix>-<i>` of pool `pool`: made by `create`, removed by `delete`."""

    def __init__(self, http: Transport, pool: str, prefix: str, count: int) -> None:
        self.http = http
        self.pool = pool
        self.names = [f"{prefix}-{i}" for i in range(count)]

    def create(self, timeout: float = 60) -> None:
        """The pool's nodes, Ready (those of an earlier run that did not end are made again)."""
        self.delete()
        capacity = {"cpu": "32", "memory": "256Gi", "pods": "110", "nvidia.com/gpu": "8"}
        for name in self.names:
            node = {
                "apiVersion": "v1",
                "kind": "Node",
                "metadata": {
                    "name": name,
                    "annotations": {KWOK_MANAGED: "fake", "node.alpha.kubernetes.io/ttl": "0"},
                    "labels": {
                        POOL: self.pool,
                        "kubernetes.io/hostname": name,
                        "kubernetes.io/os": "linux",
                    },
                },
                "spec": {"taints": [_taint(self.pool)]},
                "status": {"allocatable": capacity, "capacity": capacity},
            }
            self.http.request("POST", "/api/v1/nodes", body=node)
        until(
            lambda: all(ready(self.get(n)) == "True" for n in self.names),
            timeout,
            what=f"the {self.pool} pool's nodes Ready",
        )

    def delete(self) -> None:
        """Every node of the pool still there (a 404 is fine: deleted by the run)."""
        for name in self.names:
            self.remove(name)

    def remove(self, name: str) -> float:
        """Delete a node outright; the time of the deletion (this host's clock)."""
        at = time.time()
        try:
            self.http.request("DELETE", f"/api/v1/nodes/{name}")
        except ApiError as exc:
            if exc.status != 404:
                raise
        return at

    def get(self, name: str) -> Obj:
        return self.http.request("GET", f"/api/v1/nodes/{name}")

    def unmanage(self, name: str) -> bool:
        """KWOK stops driving `name` (its annotation removed): its pods stay as they are."""
        self._patch(name, {"metadata": {"annotations": {KWOK_MANAGED: None}}})
        return True

    def _patch(self, name: str, body: Obj, sub: str = "", strategic: bool = False) -> None:
        path = f"/api/v1/nodes/{name}" + (f"/{sub}" if sub else "")
        kind = "strategic-merge-patch" if strategic else "merge-patch"
        self.http.request("PATCH", path, body=body, content_type=f"application/{kind}+json")

    def break_node(self, name: str, status: str = "Unknown", timeout: float = 60) -> float:
        """Make `name` look as the node lifecycle controller makes a dead kubelet's (`status`:
        Unknown, unreachable; False, NotReady). The time of the Ready transition (this host's
        clock, as written in lastTransitionTime)."""
        self.unmanage(name)
        taint = "unreachable" if status == "Unknown" else "not-ready"
        taints = [
            _taint(self.pool),
            *(
                {"key": f"node.kubernetes.io/{taint}", "effect": e}
                for e in ("NoExecute", "NoSchedule")
            ),
        ]
        self._patch(name, {"spec": {"taints": taints}})
        written = {"at": 0.0}

        def held() -> bool:
            # KWOK may not have seen its annotation go yet, and make the node Ready again:
            # written again until it stays as written for 2 s.
            if ready(self.get(name)) == "True" or not written["at"]:
                written["at"] = time.time()
                self._conditions(name, status, written["at"])
                return False
            return time.time() - written["at"] >= 2

        until(held, timeout, what=f"{name} Ready {status}")
        return written["at"]

    def _conditions(self, name: str, status: str, at: float) -> None:
        if status == "Unknown":
            reason, message = "NodeStatusUnknown", "Kubelet stopped posting node status."
        else:
            reason, message = "KubeletNotReady", "container runtime is down"
        stamp = datetime.fromtimestamp(at, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        conditions = [
            {
                "type": t,
                "status": status if t == "Ready" else "Unknown",
                "reason": reason,
                "message": message,
                "lastTransitionTime": stamp,
                "lastHeartbeatTime": stamp,
            }
            for t in ("Ready", "MemoryPressure", "DiskPressure", "PIDPressure")
        ]
        self._patch(name, {"status": {"conditions": conditions}}, "status", strategic=True)
