"""Lost nodes (docs/lifecycle.md, "Lost nodes") on the real control plane with KWOK: nodes made
unreachable, NotReady and deleted under running jobs, all at once (their waits overlap), with an
operator run with `--lost-node-seconds 10`.

Each scenario has fake nodes of its own (`kwok-rec-<scenario><i>`: label `t9kjobs.dev/pool`,
taint `t9kjobs.dev/pool=recovery:NoSchedule`, 8 GPUs; the jobs carry the nodeSelector and the
toleration, so no other test's pod lands there), made by the module and deleted at its end.
A node is broken the way the node lifecycle controller sees a dead kubelet:

- unreachable: KWOK stops managing it (its annotation `kwok.x-k8s.io/node: fake` removed: its
  Lease is no longer renewed, its pods stay `Running` and a deletion stays `Terminating`), every
  condition `Unknown` (`NodeStatusUnknown`, lastTransitionTime now) and the `unreachable` taints,
  as kube-controller-manager would write them itself 50 s later;
- NotReady: the same with `Ready=False` (`KubeletNotReady`) and the `not-ready` taints, and one
  of the job's pods deleted there first (it stays Terminating: no kubelet confirms);
- deleted: `DELETE` of the node.

Each job: two workers of 8 GPUs (one a node; the NotReady one: two of 4 GPUs on one node), the
third node free for the replacement. What is asserted: the replacement Running on another node,
the job Succeeds, `backoffCount` 0, `infrastructureRestartCount` 1. The time from the Ready
transition to the replacement Running is printed (a figure, not an assertion: `-s` shows it).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import pytest

from t9kjobs.kube.transport import ApiError, Transport, load_configuration
from tests.e2e.jobs import Kube, Obj, job, phase, template, until
from tests.e2e.operator import install_crds, operator_process

POOL = "t9kjobs.dev/pool"
POOL_TAINT = {"key": POOL, "value": "recovery", "effect": "NoSchedule"}
KWOK_MANAGED = "kwok.x-k8s.io/node"
BOUND = 10
SCENARIOS = {"u": 3, "n": 2, "d": 3}  # unreachable, NotReady (+ Terminating), deleted


def _node(name: str, pool: str) -> Obj:
    capacity = {"cpu": "32", "memory": "256Gi", "pods": "110", "nvidia.com/gpu": "8"}
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "annotations": {KWOK_MANAGED: "fake", "node.alpha.kubernetes.io/ttl": "0"},
            "labels": {POOL: pool, "kubernetes.io/hostname": name, "kubernetes.io/os": "linux"},
        },
        "spec": {"taints": [POOL_TAINT]},
        "status": {"allocatable": capacity, "capacity": capacity},
    }


def _ready(node: Obj) -> str | None:
    for c in (node.get("status") or {}).get("conditions") or []:
        if c["type"] == "Ready":
            return str(c["status"])
    return None


class Pool:
    """The module's fake nodes, by scenario."""

    def __init__(self, http: Transport) -> None:
        self.http = http
        self.names = {s: [f"kwok-rec-{s}{i}" for i in range(n)] for s, n in SCENARIOS.items()}

    def all(self) -> list[str]:
        return [n for names in self.names.values() for n in names]

    def get(self, name: str) -> Obj:
        return self.http.request("GET", f"/api/v1/nodes/{name}")

    def patch(self, name: str, body: Obj, sub: str = "", strategic: bool = False) -> None:
        path = f"/api/v1/nodes/{name}" + (f"/{sub}" if sub else "")
        kind = "strategic-merge-patch" if strategic else "merge-patch"
        self.http.request("PATCH", path, body=body, content_type=f"application/{kind}+json")

    def break_node(self, name: str, ready: str) -> float:
        """Make a node look as the node lifecycle controller makes a dead kubelet's: not
        managed by KWOK any more, its conditions `ready` (Unknown or False) and tainted. The
        time of the Ready transition (this host's clock)."""
        self.patch(name, {"metadata": {"annotations": {KWOK_MANAGED: None}}})
        now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        if ready == "Unknown":
            reason, message, taint = (
                "NodeStatusUnknown",
                "Kubelet stopped posting node status.",
                "node.kubernetes.io/unreachable",
            )
        else:
            reason, message, taint = (
                "KubeletNotReady",
                "container runtime is down",
                "node.kubernetes.io/not-ready",
            )
        conditions = [
            {
                "type": t,
                "status": ready if t == "Ready" else "Unknown",
                "reason": reason,
                "message": message,
                "lastTransitionTime": now,
                "lastHeartbeatTime": now,
            }
            for t in ("Ready", "MemoryPressure", "DiskPressure", "PIDPressure")
        ]
        at = time.time()
        self.patch(name, {"status": {"conditions": conditions}}, "status", strategic=True)
        taints = [POOL_TAINT, *({"key": taint, "effect": e} for e in ("NoExecute", "NoSchedule"))]
        self.patch(name, {"spec": {"taints": taints}})
        return at


@pytest.fixture(scope="module")
def pool(cluster: Any) -> Iterator[Pool]:
    http = Transport(load_configuration(str(cluster.kubeconfig)), qps=0)
    nodes = Pool(http)
    try:
        for scenario, names in nodes.names.items():
            for name in names:
                http.request("POST", "/api/v1/nodes", body=_node(name, f"rec-{scenario}"))
        until(
            lambda: all(_ready(nodes.get(n)) == "True" for n in nodes.all()),
            "the recovery pool's nodes Ready",
        )
        yield nodes
    finally:
        for name in nodes.all():
            try:
                http.request("DELETE", f"/api/v1/nodes/{name}")
            except ApiError as exc:
                if exc.status != 404:
                    raise


@pytest.fixture(scope="module")
def lost_node_operator(
    cluster: Any, pool: Pool, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[None]:
    install_crds(cluster)
    log = tmp_path_factory.mktemp("lost-nodes") / "operator.log"
    op = operator_process(cluster, "--lost-node-seconds", str(BOUND), log=log)
    try:
        op.wait_ready()
        yield
    finally:
        op.stop()


@pytest.fixture
def kube(cluster: Any, namespace: str, lost_node_operator: None) -> Kube:
    return Kube(cluster, namespace)


def _job(name: str, scenario: str, gpus: int) -> Obj:
    pod = template(exit_code=0, seconds=3600)
    pod["spec"]["nodeSelector"] = {POOL: f"rec-{scenario}"}
    pod["spec"]["tolerations"] = [{"key": POOL, "operator": "Exists", "effect": "NoSchedule"}]
    pod["spec"]["containers"][0]["resources"] = {"limits": {"nvidia.com/gpu": str(gpus)}}
    spec = {"type": "worker", "replicas": 2, "restartPolicy": "Never", "template": pod}
    return job("GenericJob", name, spec, recoveryPolicy={})


def _running(kube: Kube, names: list[str]) -> dict[str, Obj]:
    def found() -> dict[str, Obj] | None:
        pods = kube.pods()
        ok = all(
            phase(pods.get(n) or {}) == "Running"
            and not pods[n]["metadata"].get("deletionTimestamp")
            for n in names
        )
        return {n: pods[n] for n in names} if ok else None

    return until(found, f"{names} running")


def _replaced_running(kube: Kube, name: str, uid: str, timeout: float = 120) -> tuple[Obj, float]:
    """The pod of `name` that replaced the one of `uid`, once Running; when it was seen so."""

    def found() -> Obj | None:
        pod = kube.pods().get(name)
        if pod is None or pod["metadata"]["uid"] == uid or phase(pod) != "Running":
            return None
        return pod

    pod = until(found, f"{name} replaced and Running", timeout)
    return pod, time.time()


def _cordon(pool: Pool, name: str, on: bool) -> None:
    pool.patch(name, {"spec": {"unschedulable": True if on else None}})


def test_pods_on_lost_nodes_are_replaced_elsewhere_charged_to_the_infrastructure(
    kube: Kube, pool: Pool
) -> None:
    unreachable, notready, deleted = (
        _job("ln-unreachable", "u", 8),
        _job("ln-notready", "n", 4),
        _job("ln-deleted", "d", 8),
    )
    # The NotReady scenario's two pods share a node: the other one is cordoned meanwhile.
    _cordon(pool, "kwok-rec-n1", True)
    for doc in (unreachable, notready, deleted):
        kube.create(doc)
    first = {
        doc["metadata"]["name"]: _running(
            kube, [f"{doc['metadata']['name']}-worker-{i}" for i in range(2)]
        )
        for doc in (unreachable, notready, deleted)
    }
    _cordon(pool, "kwok-rec-n1", False)
    node_of = {
        pod_name: pod["spec"]["nodeName"]
        for pods in first.values()
        for pod_name, pod in pods.items()
    }
    assert node_of["ln-notready-worker-0"] == node_of["ln-notready-worker-1"] == "kwok-rec-n0"

    # Break the three nodes at once.
    bad_u = node_of["ln-unreachable-worker-1"]
    bad_d = node_of["ln-deleted-worker-1"]
    broken_at = {"ln-unreachable": pool.break_node(bad_u, "Unknown")}
    broken_at["ln-notready"] = pool.break_node("kwok-rec-n0", "False")
    kube.http.request(
        "DELETE", f"/api/v1/namespaces/{kube.ns}/pods/ln-notready-worker-0"
    )  # no kubelet confirms: it stays Terminating
    broken_at["ln-deleted"] = time.time()
    pool.http.request("DELETE", f"/api/v1/nodes/{bad_d}")
    stuck = kube.pods()["ln-notready-worker-0"]
    assert stuck["metadata"].get("deletionTimestamp"), "KWOK still drives the NotReady node"

    lost = {
        "ln-unreachable": ("ln-unreachable-worker-1", bad_u),
        "ln-notready": ("ln-notready-worker-1", "kwok-rec-n0"),
        "ln-deleted": ("ln-deleted-worker-1", bad_d),
    }
    figures: dict[str, float] = {}
    for job_name, (pod_name, bad) in lost.items():
        old = first[job_name][pod_name]["metadata"]["uid"]
        pod, seen = _replaced_running(kube, pod_name, old)
        assert pod["spec"]["nodeName"] != bad
        affinity = pod["spec"]["affinity"]["nodeAffinity"]
        term = affinity["preferredDuringSchedulingIgnoredDuringExecution"][-1]
        assert term["preference"]["matchExpressions"][0]["values"] == [bad]
        figures[job_name] = seen - broken_at[job_name]
    # The Terminating pod was forced and created again, same incarnation.
    again, _ = _replaced_running(
        kube,
        "ln-notready-worker-0",
        first["ln-notready"]["ln-notready-worker-0"]["metadata"]["uid"],
    )
    assert again["spec"]["nodeName"] == "kwok-rec-n1"
    assert again["metadata"]["annotations"]["batch.tensorstack.dev/restart-count"] == "0"

    for doc in (unreachable, notready, deleted):
        for i in range(2):
            kube.fail(f"{doc['metadata']['name']}-worker-{i}", 0)
    for doc in (unreachable, notready, deleted):
        status = kube.wait_phase(doc, "Succeeded")
        name = doc["metadata"]["name"]
        assert status["backoffCount"] == 0, name
        assert status["infrastructureRestartCount"] == 1, name
        lost_events = [e["message"] for e in kube.events(doc) if e["reason"] == "NodeLost"]
        assert lost_events, name
    for name, seconds in figures.items():
        print(
            f"lost-node recovery {name}: {seconds:.1f}s from the Ready transition (or the node's"
            f" deletion) to the replacement Running (--lost-node-seconds {BOUND})"
        )
