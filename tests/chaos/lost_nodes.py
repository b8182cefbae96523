"""The chaos tier's lost-node phase (issue #48, docs/reliability.md "The chaos tier"): right
after the first fault (so that the leader has watched the nodes since its start; the next fault
strikes within the bound), two jobs run on KWOK nodes of a pool of their own
(tests/kwok_nodes.py: `kwok-chaos-<i>`, 8 GPUs, tainted for the pool), one 8-GPU pod a node;
once their pods run, the node of one job's pod is made unreachable (`Ready` Unknown and the
`unreachable` taints, as the node lifecycle controller does) and the node of the other's is
deleted outright (KWOK stops driving it first, as a machine that is gone).

Each job is a GenericJob of two workers (`restartPolicy: Never`, no recovery rules) whose pods
run until told to end: once the faults are over, `release` makes every pod of a job exit 0 (the
`sim.t9kjobs.dev/exit-code` annotation added to a running pod) when both run on nodes that are
not broken. (A pod given its run time from the start would end by itself on the broken node,
KWOK v0.8.0 firing a timer set while it drove the node: the first runs saw exactly that.) So
each job Succeeds only if its pod on the broken node is replaced elsewhere — charged to the
infrastructure (`infrastructureRestartCount` 1, `backoffCount` 0, that replica's `restartCount`
1), the script the judges hold it to — and the observer's ledger (stranding.py) judges how long
that pod stayed."""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import Any

from t9kjobs.kube.transport import Transport
from t9kjobs.testing.harness.simulation import SIM_EXIT_CODE, SIM_RUN_SECONDS
from t9kjobs.vocabulary import Obj
from tests.chaos.workload import Scripted
from tests.kwok_nodes import NodePool, pool_pod
from tests.waiting import TimedOut, until

__all__ = ["LostNodes"]

POOL = "chaos"
NODES = 6  # two jobs of two 8-GPU pods, and room for both replacements


def _job(name: str, namespace: str) -> Scripted:
    container = {"name": "main", "image": "busybox", "command": ["train"]}
    template = pool_pod({"spec": {"containers": [container]}}, POOL)
    doc: Obj = {
        "apiVersion": "batch.tensorstack.dev/v1beta1",
        "kind": "GenericJob",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "replicaSpecs": [
                {"type": "worker", "replicas": 2, "restartPolicy": "Never", "template": template}
            ]
        },
    }
    return Scripted(doc, "Succeeded", ("AllSucceeded",), 0, 1)


class LostNodes:
    """The phase: `create` the pool, `strike` (the jobs submitted, their pods awaited, the two
    nodes broken), `delete` the pool. `broken`: (node, how, when)."""

    def __init__(self, http: Transport, namespace: str) -> None:
        self.http = http
        self.namespace = namespace
        self.pool = NodePool(http, POOL, "kwok-chaos", NODES)
        self.jobs = [_job(f"gj-lostnode-{how}", namespace) for how in ("unreachable", "deleted")]
        self.broken: list[tuple[str, str, float]] = []

    def create(self) -> None:
        self.pool.create()

    def delete(self) -> None:
        self.pool.delete()

    def strike(self, submit: Callable[[Scripted], None]) -> None:
        """Submit the jobs, and once their pods run, make the node of one job's worker-1
        unreachable and delete the other's (KWOK stops driving it first: a machine gone)."""
        for job in self.jobs:
            submit(job)
        unreachable, deleted = (f"{job.name}-worker-1" for job in self.jobs)
        nodes = _retried("the lost-node jobs' pods running", self._running_nodes)
        at = _retried("break a node", lambda: self.pool.break_node(nodes[unreachable]))
        self.broken.append((nodes[unreachable], "unreachable", at))
        _retried("stop KWOK driving a node", lambda: self.pool.unmanage(nodes[deleted]))
        at = _retried("delete a node", lambda: self.pool.remove(nodes[deleted]))
        self.broken.append((nodes[deleted], "deleted", at))

    def release(self, timeout: float = 60) -> None:
        """Once both pods of a job run on nodes not broken (its lost pod replaced), make them
        exit 0; a job whose pod stays on a broken node `timeout` seconds is left as it is, for
        the judges (stuck, and its pod left on a lost node)."""
        broken = {node for node, _, _ in self.broken}
        path = f"/api/v1/namespaces/{self.namespace}/pods"
        waiting = {job.name for job in self.jobs}

        def released() -> bool:
            pods = {p["metadata"]["name"]: p for p in self.http.request("GET", path)["items"]}
            for name in sorted(waiting):
                mine = [pods.get(f"{name}-worker-{i}") or {} for i in range(2)]
                if all(
                    (p.get("status") or {}).get("phase") == "Running"
                    and not p["metadata"].get("deletionTimestamp")
                    and p["spec"].get("nodeName") not in broken
                    for p in mine
                ):
                    for pod in mine:
                        notes = {SIM_EXIT_CODE: "0", SIM_RUN_SECONDS: "0"}
                        self.http.request(
                            "PATCH",
                            f"{path}/{pod['metadata']['name']}",
                            body={"metadata": {"annotations": notes}},
                            content_type="application/merge-patch+json",
                        )
                    waiting.discard(name)
            return not waiting

        # Judged if it times out: the job is stuck, its pod left on a lost node.
        with contextlib.suppress(TimedOut):
            until(
                released,
                timeout,
                interval=1,
                what="the lost-node jobs' pods all elsewhere",
                retry=lambda exc: not isinstance(exc, AssertionError),  # a request failing
            )

    def _running_nodes(self) -> dict[str, str] | None:
        """Pod name -> node, once every pod of the phase's jobs runs (None before)."""
        path = f"/api/v1/namespaces/{self.namespace}/pods"
        pods = {p["metadata"]["name"]: p for p in self.http.request("GET", path)["items"]}
        names = [f"{job.name}-worker-{i}" for job in self.jobs for i in range(2)]
        if not all((pods.get(n) or {}).get("status", {}).get("phase") == "Running" for n in names):
            return None
        return {n: str(pods[n]["spec"]["nodeName"]) for n in names}


def _retried(what: str, call: Callable[[], Any]) -> Any:
    """`call()`'s first answer other than None, tried again on an error (the API server or
    KWOK restarted by the fault before)."""

    def attempt() -> tuple[Any] | None:
        value = call()
        return None if value is None else (value,)

    return until(attempt, 120, interval=0.5, what=what, retry=lambda _: True)[0]
