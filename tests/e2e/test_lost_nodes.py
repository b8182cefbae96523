"""Lost nodes (docs/lifecycle.md, "Lost nodes") on the real control plane with KWOK: nodes made
unreachable, NotReady and deleted under running jobs, all at once (their waits overlap), with an
operator run with `--lost-node-seconds 10`.

Each scenario has fake nodes of its own (`kwok-rec-<scenario>-<i>`: label `t9kjobs.dev/pool`,
taint `t9kjobs.dev/pool=rec-<scenario>:NoSchedule`, 8 GPUs; the jobs carry the nodeSelector and the
toleration, so no other test's pod lands there), made by the module and deleted at its end.
A node is broken the way the node lifecycle controller sees a dead kubelet:

- unreachable: KWOK stops driving its status (its annotation `kwok.x-k8s.io/node: fake`
  removed; on KWOK v0.8.0 its Lease is still renewed and its pods' deletions still completed,
  verified by hand), every condition `Unknown` (`NodeStatusUnknown`, lastTransitionTime now)
  and the `unreachable` taints, as the node lifecycle controller writes them for a dead kubelet;
- NotReady: the same with `Ready=False` (`KubeletNotReady`) and the `not-ready` taints, and one
  of the job's pods deleted there (kept Terminating by a finalizer of the test's, as no kubelet
  would confirm it; removed once the operator forced the deletion: grace 0);
- deleted: `DELETE` of the node.

Each job: two workers of 8 GPUs (one a node; the NotReady one: two of 4 GPUs on one node), the
third node free for the replacement. What is asserted: the replacement Running on another node,
the job Succeeds, `backoffCount` 0, `infrastructureRestartCount` 1. The time from the Ready
transition to the replacement Running is printed (a figure, not an assertion: `-s` shows it).

Then the crash window: the operator SIGKILLed right after the NodeLost status write (the
status written as it would have, as test_lifecycle does for a restart): the next operator
forces the same pod and charges nothing twice.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from t9kjobs.kube.transport import Transport, load_configuration
from tests.e2e.jobs import Kube, Obj, job, phase, replicas, template, until
from tests.kwok_nodes import NodePool, pool_pod
from tests.operators import Operators

HOLD = "t9kjobs.dev/e2e-hold"  # the test's finalizer: a pod KWOK must not delete
BOUND = 10
OPERATOR_ARGS = ("--lost-node-seconds", str(BOUND))
# unreachable, NotReady (+ Terminating), deleted; the operator killed after the status write;
# a node deleted while no operator ran (missing from the next one's list)
SCENARIOS = {"u": 3, "n": 2, "d": 3, "k": 2, "m": 2}
N0, N1 = "kwok-rec-n-0", "kwok-rec-n-1"  # the NotReady scenario's nodes


class Pool:
    """The module's fake nodes: a pool of its own per scenario (`tests/kwok_nodes.py`, which the
    chaos tier's lost-node phase shares)."""

    def __init__(self, http: Transport) -> None:
        self.http = http
        self.pools = {
            s: NodePool(http, f"rec-{s}", f"kwok-rec-{s}", n) for s, n in SCENARIOS.items()
        }

    def _of(self, name: str) -> NodePool:
        return next(p for p in self.pools.values() if name in p.names)

    def patch(self, name: str, body: Obj) -> None:
        self.http.request(
            "PATCH", f"/api/v1/nodes/{name}", body=body, content_type="application/merge-patch+json"
        )

    def break_node(self, name: str, ready: str) -> float:
        """Break `name` as the node lifecycle controller sees a dead kubelet: the time of the
        Ready transition."""
        return self._of(name).break_node(name, ready)

    def unmanage(self, name: str) -> None:
        """KWOK stops driving `name`, as when its machine is gone."""
        self._of(name).unmanage(name)


@pytest.fixture(scope="module")
def pool(cluster: Any) -> Iterator[Pool]:
    nodes = Pool(Transport(load_configuration(str(cluster.kubeconfig)), qps=0))
    try:
        for scenario in nodes.pools.values():
            scenario.create()
        yield nodes
    finally:
        for scenario in nodes.pools.values():
            scenario.delete()


@pytest.fixture(scope="module")
def before_operator(pool: Pool) -> None:
    """The pool's nodes exist before the module's operator starts, and outlive it."""
    return None


def _job(name: str, scenario: str, gpus: int) -> Obj:
    pod = pool_pod(template(exit_code=0, seconds=3600), f"rec-{scenario}", gpus)
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


def _replaced_running(
    kube: Kube, old: dict[str, str], on_look: Callable[[dict[str, Obj]], None] = lambda _: None
) -> dict[str, tuple[Obj, float]]:
    """For each pod name of `old` (name -> uid), the pod that replaced it once Running, and
    when it was first seen so: all watched at once, so that each time is its own. `on_look`
    sees the pods at every look."""
    seen: dict[str, tuple[Obj, float]] = {}

    def all_found() -> dict[str, tuple[Obj, float]] | None:
        pods = kube.pods()
        now = time.time()
        on_look(pods)
        for name, uid in old.items():
            pod = pods.get(name)
            if (
                name not in seen
                and pod is not None
                and pod["metadata"]["uid"] != uid
                and phase(pod) == "Running"
                and not pod["metadata"].get("deletionTimestamp")
            ):
                seen[name] = (pod, now)
        return seen if len(seen) == len(old) else None

    return until(all_found, f"{sorted(old)} replaced and Running")


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
    _cordon(pool, N1, True)
    for doc in (unreachable, notready, deleted):
        kube.create(doc)
    first = {
        doc["metadata"]["name"]: _running(
            kube, [f"{doc['metadata']['name']}-worker-{i}" for i in range(2)]
        )
        for doc in (unreachable, notready, deleted)
    }
    _cordon(pool, N1, False)
    node_of = {
        pod_name: pod["spec"]["nodeName"]
        for pods in first.values()
        for pod_name, pod in pods.items()
    }
    assert node_of["ln-notready-worker-0"] == node_of["ln-notready-worker-1"] == N0

    # Break the three nodes at once.
    bad_u = node_of["ln-unreachable-worker-1"]
    bad_d = node_of["ln-deleted-worker-1"]
    broken_at = {"ln-unreachable": pool.break_node(bad_u, "Unknown")}
    broken_at["ln-notready"] = pool.break_node(N0, "False")
    # Deleted there, it stays Terminating: no kubelet confirms. (KWOK v0.8.0 still deletes the
    # pods of a node it no longer drives: a finalizer of the test's keeps it, and is removed
    # once the operator has forced the deletion, grace 0.)
    stuck_path = f"/api/v1/namespaces/{kube.ns}/pods/ln-notready-worker-0"
    kube.http.request(
        "PATCH",
        stuck_path,
        body={"metadata": {"finalizers": [HOLD]}},
        content_type="application/merge-patch+json",
    )
    kube.http.request("DELETE", stuck_path)
    broken_at["ln-deleted"] = time.time()
    pool.http.request("DELETE", f"/api/v1/nodes/{bad_d}")
    lost = {
        "ln-unreachable": ("ln-unreachable-worker-1", bad_u),
        "ln-notready": ("ln-notready-worker-1", N0),
        "ln-deleted": ("ln-deleted-worker-1", bad_d),
    }
    stuck_uid = first["ln-notready"]["ln-notready-worker-0"]["metadata"]["uid"]
    forced: list[Obj] = []

    def release_once_forced(pods: dict[str, Obj]) -> None:
        """The operator forced the Terminating pod's deletion (grace 0): its finalizer goes."""
        stuck = pods.get("ln-notready-worker-0")
        if (
            not forced
            and stuck is not None
            and stuck["metadata"]["uid"] == stuck_uid
            and stuck["metadata"].get("deletionGracePeriodSeconds") == 0
        ):
            forced.append(stuck)
            kube.http.request(
                "PATCH",
                stuck_path,
                body={"metadata": {"finalizers": None}},
                content_type="application/merge-patch+json",
            )

    replaced = _replaced_running(
        kube,
        {
            "ln-notready-worker-0": stuck_uid,
            **{pod: first[j][pod]["metadata"]["uid"] for j, (pod, _) in lost.items()},
        },
        release_once_forced,
    )
    assert forced, "the Terminating pod was never force-deleted"
    figures: dict[str, float] = {}
    for job_name, (pod_name, bad) in lost.items():
        pod, seen = replaced[pod_name]
        assert pod["spec"]["nodeName"] != bad
        affinity = pod["spec"]["affinity"]["nodeAffinity"]
        term = affinity["preferredDuringSchedulingIgnoredDuringExecution"][-1]
        assert term["preference"]["matchExpressions"][0]["values"] == [bad]
        figures[job_name] = seen - broken_at[job_name]
    # The Terminating pod was forced and created again: same incarnation, another node.
    again, _ = replaced["ln-notready-worker-0"]
    assert again["spec"]["nodeName"] == N1
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


def test_an_operator_killed_after_the_nodelost_status_write_charges_it_once(
    kube: Kube, pool: Pool, operators: Operators
) -> None:
    """The crash window of a lost node: the status says the restart (charged to the
    infrastructure, the node remembered) and the operator dies before the force deletion. The
    next operator forces the same pod, charges nothing more, and replaces it once."""
    doc = _job("ln-killed", "k", 8)
    doc["spec"]["replicaSpecs"][0]["replicas"] = 1
    name = "ln-killed-worker-0"
    kube.create(doc)
    pod = _running(kube, [name])[name]
    kube.wait_phase(doc, "Running")
    bad = pod["spec"]["nodeName"]
    operators.kill()
    pool.break_node(bad, "Unknown")
    # What the dead operator wrote before it died: the restart, charged to the infrastructure.
    current = kube.get(doc)
    status = current["status"]
    status["infrastructureRestartCount"] = 1
    status["lostNodes"] = [bad]
    status["tasks"][0]["restartCount"] = 1
    status["tasks"][0]["replicas"][0].update(restartCount=1, countedRestarts=0)
    kube.http.request("PUT", kube.path(doc, "status"), body=current)
    operators.start()
    replaced = _replaced_running(kube, {name: pod["metadata"]["uid"]})[name][0]
    assert replaced["spec"]["nodeName"] != bad
    assert replaced["metadata"]["annotations"]["batch.tensorstack.dev/restart-count"] == "1"
    kube.fail(name, 0)
    status = kube.wait_phase(doc, "Succeeded")
    assert status["backoffCount"] == 0
    assert status["infrastructureRestartCount"] == 1
    assert replicas(status)[name]["restartCount"] == 1


def test_a_node_deleted_while_no_operator_ran_is_lost_by_the_next_one_before_podgc(
    kube: Kube, pool: Pool, operators: Operators
) -> None:
    """The next operator's node list lacks the node, and it never saw it go: its pods are lost
    `MISSING_NODE_SECONDS` (10 s) after it first notices, charged to the infrastructure, sooner
    than kube-controller-manager's PodGC (40 s), whose deletion would count nothing (the chaos
    tier's lost-node phase found it)."""
    doc = _job("ln-missing", "m", 8)
    doc["spec"]["replicaSpecs"][0]["replicas"] = 1
    name = "ln-missing-worker-0"
    kube.create(doc)
    pod = _running(kube, [name])[name]
    kube.wait_phase(doc, "Running")
    bad = pod["spec"]["nodeName"]
    operators.kill()
    # A machine gone: KWOK stops driving it first (else KWOK itself deletes its pods at once).
    pool.unmanage(bad)
    pool.http.request("DELETE", f"/api/v1/nodes/{bad}")
    operators.start()
    replaced = _replaced_running(kube, {name: pod["metadata"]["uid"]})[name][0]
    assert replaced["spec"]["nodeName"] != bad
    lost = [e["message"] for e in kube.events(doc) if e["reason"] == "NodeLost"]
    assert any(f"node {bad} absent from the cluster" in m for m in lost), lost
    kube.fail(name, 0)
    status = kube.wait_phase(doc, "Succeeded")
    assert status["backoffCount"] == 0
    assert status["infrastructureRestartCount"] == 1
