"""The chaos tier's lost-node phase (issue #48, docs/reliability.md "The chaos tier"): right
after the first fault (so that the leader has watched the nodes since its start; the next fault
strikes within the bound), two jobs run on KWOK nodes of a pool of their own
(tests/kwok_nodes.py: `kwok-chaos-<i>`, 8 GPUs, tainted for the pool), one 8-GPU pod a node;
once their pods run, the node of one job's pod is made unreachable (`Ready` Unknown and the
`unreachable` taints, as the node lifecycle controller does) and the node of the other's is
deleted outright (KWOK stops driving it first, as a machine that is gone).

Each job is a GenericJob of two workers (`restartPolicy: Never`, no recovery rules) whose pods
run `RUN_SECONDS` and exit 0: the pod left on the broken node never ends by itself, so each job
Succeeds only if that pod is replaced elsewhere — charged to the infrastructure
(`infrastructureRestartCount` 1, `backoffCount` 0, that replica's `restartCount` 1), which is the
script the judges hold it to. The observer's ledger (stranding.py) judges how long it stayed."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from t9kjobs.kube.transport import Transport
from t9kjobs.testing.harness.simulation import simulate
from t9kjobs.vocabulary import Obj
from tests.chaos.workload import Scripted
from tests.kwok_nodes import NodePool, pool_pod
from tests.waiting import until

__all__ = ["LostNodes"]

POOL = "chaos"
NODES = 6  # two jobs of two 8-GPU pods, and room for both replacements
RUN_SECONDS = 40  # a pod's run: still running when its node breaks, whatever the faults


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
    return Scripted(simulate(doc, 0, RUN_SECONDS), "Succeeded", ("AllSucceeded",), 0, 1)


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
