"""Lost nodes (`t9kjobs.planner.nodes`, docs/lifecycle.md "Recovery rules"): a Ready node never
makes the plan act, a deleted one loses its pods at once, a not-Ready one at the bound exactly;
a Terminating pod there is force-deleted without a new failure; the pods created since avoid the
lost nodes without that ever changing their spec hash (no relaunch)."""

from __future__ import annotations

import copy
from dataclasses import replace
from datetime import datetime, timedelta
from typing import Any

import pytest

from t9kjobs.hooks import hookimpl
from t9kjobs.loading import parse_job
from t9kjobs.manager import PluginManager
from t9kjobs.models import dump
from t9kjobs.objects import ANNOTATION_INCARNATION, ANNOTATION_SPEC_HASH, DesiredPod
from t9kjobs.planner import NodeState, Observed, Plan, plan
from t9kjobs.planner.conditions import rfc3339
from t9kjobs.planner.failures import classify
from t9kjobs.planner.nodes import (
    MAX_AVOIDED_NODES,
    MISSING_NODE_SECONDS,
    Lost,
    as_lost,
    avoid,
    remember_lost,
)
from t9kjobs.vocabulary import Obj
from tests.unit.conftest import NOW
from tests.unit.core.planner.sim import Sim
from tests.unit.core.planner.tinyjob import TinyPlugin, tiny_job

W0, W1 = "tiny-worker-0", "tiny-worker-1"
DOWN_AT = NOW + timedelta(seconds=100)


class NodeSim(Sim):
    """A job stepped through plans, its pods on nodes whose state the test sets."""

    def __init__(self, manifest: Obj, manager: PluginManager | None = None) -> None:
        super().__init__(manifest, manager)
        self.nodes: dict[str, NodeState] | None = {}
        self.bound = 60.0

    def plan(self) -> Plan:
        job = parse_job(self.manifest, self.manager)
        observed = Observed(dict(self.objects), nodes=self.nodes, lost_node_seconds=self.bound)
        return plan(job, observed, self.now, self.manager.hooks_for(job.kind))

    def place(self, pod: str, node: str, phase: str = "Running") -> None:
        self.set(pod, phase)
        self.pod(pod)["spec"]["nodeName"] = node
        if self.nodes is not None:
            self.nodes.setdefault(node, NodeState(node, True))

    def node(self, name: str, ready: str, since: datetime = DOWN_AT, **kw: Any) -> None:
        assert self.nodes is not None
        self.nodes[name] = NodeState(name, True, ready, since, **kw)

    def terminate(self, pod: str, at: datetime) -> None:
        self.pod(pod)["metadata"]["deletionTimestamp"] = rfc3339(at)


def _started(replicas: int = 2, manager: PluginManager | None = None, **spec: Any) -> NodeSim:
    sim = NodeSim(tiny_job(replicas=replicas, **spec), manager)
    sim.step()
    for i in range(replicas):
        sim.place(f"tiny-worker-{i}", f"node-{i}")
    sim.step()
    return sim


def _deleted(p: Plan) -> dict[str, int | None]:
    return {d.name: d.grace_period_seconds for d in p.delete if d.kind == "Pod"}


def _reasons(p: Plan) -> list[str]:
    return [e.reason for e in p.events]


def _said(p: Plan, reason: str) -> str:
    return next(e.message for e in p.events if e.reason == reason)


def test_a_ready_node_never_makes_the_plan_act() -> None:
    sim = _started()
    sim.now = NOW + timedelta(days=1)
    p = sim.plan()
    assert not p.delete and "NodeLost" not in _reasons(p)
    assert p.requeue_after is None


def test_a_pod_stuck_terminating_on_a_ready_node_gets_one_warning_and_nothing_else() -> None:
    sim = _started()
    sim.terminate(W0, NOW + timedelta(seconds=30))
    sim.now = NOW + timedelta(seconds=60)
    p = sim.plan()
    assert not p.delete and "PodStuckTerminating" not in _reasons(p)
    assert p.requeue_after == pytest.approx(30.0)  # deletionTimestamp + 60 s
    sim.now = NOW + timedelta(seconds=90)
    p = sim.plan()
    assert _reasons(p) == ["PodStuckTerminating"]
    assert not p.delete
    assert "node-0" in p.events[0].message
    sim.now = NOW + timedelta(hours=1)  # said when it became stuck, not on every reconcile
    p = sim.plan()
    assert not p.delete and "PodStuckTerminating" not in _reasons(p)


def test_a_node_the_store_never_held_loses_its_pods_after_ten_seconds_not_the_bound() -> None:
    """Deleted while no operator watched: a new leader's node list lacks it. Not at once (a
    node created a moment ago may not have reached the store), not after the job's bound
    either (PodGC would delete the pods after 40 s, and the replacement would count nothing)."""
    sim = _started(recoveryPolicy={})
    assert sim.nodes is not None
    sim.nodes["node-1"] = NodeState("node-1", True, "Unknown", NOW, missing=True)
    sim.now = NOW + timedelta(seconds=MISSING_NODE_SECONDS - 1)
    p = sim.plan()
    assert not p.delete
    assert p.requeue_after == pytest.approx(1.0)
    sim.now = NOW + timedelta(seconds=MISSING_NODE_SECONDS)
    p = sim.step()
    assert _deleted(p) == {W1: 0}
    assert "node node-1 absent from the cluster for 10s" in _said(p, "NodeLost")
    assert sim.status["infrastructureRestartCount"] == 1
    assert sim.status.get("backoffCount", 0) == 0


def test_a_deleted_node_loses_its_pods_at_once_charged_to_the_infrastructure() -> None:
    sim = _started(recoveryPolicy={})
    assert sim.nodes is not None
    sim.nodes["node-1"] = NodeState("node-1", False)
    p = sim.step()
    assert _deleted(p) == {W1: 0}
    assert _said(p, "NodeLost") == "tiny-worker-1 force-deleted: node node-1 was deleted"
    assert p.status.backoff_count == 0
    assert p.status.infrastructure_restart_count == 1
    assert p.status.lost_nodes == ["node-1"]
    # The status (the count) is in the same plan as the deletion: written first.
    assert p.status_changed
    replacement = next(o for o in sim.step().create if o["metadata"]["name"] == W1)
    assert replacement["metadata"]["annotations"][ANNOTATION_INCARNATION] == "1"
    term = replacement["spec"]["affinity"]["nodeAffinity"][
        "preferredDuringSchedulingIgnoredDuringExecution"
    ][-1]
    assert term["weight"] == 100
    assert term["preference"]["matchExpressions"] == [
        {"key": "kubernetes.io/hostname", "operator": "NotIn", "values": ["node-1"]}
    ]


def test_not_ready_loses_the_pod_at_the_bound_exactly() -> None:
    sim = _started(recoveryPolicy={})
    sim.node("node-0", "Unknown", unreachable=True)
    sim.now = DOWN_AT + timedelta(seconds=59)
    p = sim.plan()
    assert not p.delete
    assert p.requeue_after == pytest.approx(1.0)  # since + bound - now
    sim.now = DOWN_AT + timedelta(seconds=60)
    p = sim.plan()
    assert _deleted(p) == {W0: 0}
    assert "node node-0 not Ready (Unknown, unreachable) for 60s" in _said(p, "NodeLost")
    assert p.status.infrastructure_restart_count == 1


@pytest.mark.parametrize("ready", ["False", "Unknown"])
def test_the_jobs_own_bound_overrides_the_operators(ready: str) -> None:
    sim = _started(recoveryPolicy={"nodeLostAfterSeconds": 10})
    sim.node("node-0", ready)
    sim.now = DOWN_AT + timedelta(seconds=9)
    assert not sim.plan().delete
    sim.now = DOWN_AT + timedelta(seconds=10)
    assert _deleted(sim.plan()) == {W0: 0}


def test_a_job_without_a_recovery_policy_is_restarted_by_the_built_in_rule() -> None:
    sim = _started(restart="Never")
    sim.node("node-0", "False")
    sim.now = DOWN_AT + timedelta(seconds=60)
    p = sim.step()
    assert p.status.phase == "Running"
    assert _deleted(p) == {W0: 0}
    assert (p.status.backoff_count, p.status.infrastructure_restart_count) == (0, 1)


def test_a_node_without_a_ready_condition_yet_is_no_verdict() -> None:
    sim = _started(recoveryPolicy={"nodeLostAfterSeconds": 0})
    assert sim.nodes is not None
    sim.nodes["node-0"] = NodeState("node-0", True, "Unknown", None)
    sim.now = NOW + timedelta(days=1)
    p = sim.plan()
    assert not p.delete and p.requeue_after is None


def test_without_node_detection_nothing_is_ever_lost() -> None:
    sim = _started(recoveryPolicy={})
    sim.nodes = None
    sim.now = NOW + timedelta(days=1)
    p = sim.plan()
    assert not p.delete and p.requeue_after is None


def test_a_terminating_pod_on_a_lost_node_is_forced_with_no_new_failure() -> None:
    sim = _started(recoveryPolicy={})
    sim.terminate(W0, NOW + timedelta(seconds=30))
    sim.node("node-0", "Unknown")
    sim.now = DOWN_AT + timedelta(seconds=60)
    p = sim.step()
    assert _deleted(p) == {W0: 0}
    assert "NodeLost" in _reasons(p)
    assert p.status.infrastructure_restart_count is None
    assert p.status.backoff_count == 0
    assert p.status.tasks[0].restart_count == 0
    # Gone: created again, same incarnation, away from the lost node.
    created = next(o for o in sim.step().create if o["metadata"]["name"] == W0)
    assert created["metadata"]["annotations"][ANNOTATION_INCARNATION] == "0"
    assert "affinity" in created["spec"]


def test_a_pod_whose_deletion_is_forced_already_is_not_forced_again() -> None:
    sim = _started(recoveryPolicy={})
    sim.terminate(W0, NOW + timedelta(seconds=30))
    sim.pod(W0)["metadata"]["deletionGracePeriodSeconds"] = 0  # a finalizer keeps it
    sim.node("node-0", "Unknown")
    sim.now = DOWN_AT + timedelta(seconds=60)
    p = sim.plan()
    assert W0 not in _deleted(p) and "NodeLost" not in _reasons(p)


def test_a_pod_that_ended_is_never_lost_with_its_node() -> None:
    sim = _started(recoveryPolicy={})
    sim.set(W0, "Succeeded")
    sim.pod(W0)["spec"]["nodeName"] = "node-0"
    sim.node("node-0", "Unknown")
    sim.now = DOWN_AT + timedelta(seconds=600)
    p = sim.plan()
    assert W0 not in _deleted(p)
    assert p.status.infrastructure_restart_count is None


def test_the_crash_after_the_status_write_forces_the_same_pod_without_a_second_count() -> None:
    sim = _started(recoveryPolicy={})
    sim.node("node-0", "Unknown")
    sim.now = DOWN_AT + timedelta(seconds=60)
    p = sim.plan()
    sim.manifest["status"] = dump(p.status)  # the status write, then the operator dies
    again = sim.plan()
    assert _deleted(again) == {W0: 0}
    assert again.status.infrastructure_restart_count == 1
    assert again.status.tasks[0].restart_count == 1


class _Relaunching(TinyPlugin):
    """The tiny kind with pods relaunched when their spec changes (DeepSpeed's worker-0)."""

    @hookimpl
    def t9kjobs_build_pods(self, job: Any) -> list[DesiredPod]:
        return [replace(p, recreate_on_change=True) for p in super().t9kjobs_build_pods(job)]


def test_the_avoidance_term_never_changes_the_spec_hash_so_nothing_relaunches() -> None:
    manager = PluginManager()
    manager.register(_Relaunching(), "tiny")
    sim = _started(manager=manager, recoveryPolicy={})
    assert sim.nodes is not None
    sim.nodes["node-1"] = NodeState("node-1", False)
    sim.step()  # lost: deleted
    p = sim.step()  # the replacement, with the avoidance term
    created = next(o for o in p.create if o["metadata"]["name"] == W1)
    assert "affinity" in created["spec"]
    # The same spec's first pod (stall detection, on with a recoveryPolicy, adds its env to both).
    first = _started(manager=manager, recoveryPolicy={})
    fresh = next(o for o in first.objects.values() if o["kind"] == "Pod")
    assert (
        created["metadata"]["annotations"][ANNOTATION_SPEC_HASH]
        == fresh["metadata"]["annotations"][ANNOTATION_SPEC_HASH]
    )
    sim.place(W1, "node-2")
    p = sim.step()
    assert not p.delete and "Relaunching" not in _reasons(p)


def test_avoidance_is_appended_to_the_templates_own_affinity_and_bounded() -> None:
    pod: Obj = {"spec": {"affinity": {"podAffinity": {"x": 1}}}}
    before = copy.deepcopy(pod)
    avoid(pod, [f"n{i}" for i in range(20)])
    assert pod["spec"]["affinity"]["podAffinity"] == before["spec"]["affinity"]["podAffinity"]
    (term,) = pod["spec"]["affinity"]["nodeAffinity"][
        "preferredDuringSchedulingIgnoredDuringExecution"
    ]
    assert term["preference"]["matchExpressions"][0]["values"] == [f"n{i}" for i in range(4, 20)]
    avoid(pod, [])
    assert (
        len(
            pod["spec"]["affinity"]["nodeAffinity"][
                "preferredDuringSchedulingIgnoredDuringExecution"
            ]
        )
        == 1
    )


def test_the_failure_of_a_lost_pod_names_its_node() -> None:
    pod: Obj = {"metadata": {"name": W0}, "spec": {"nodeName": "node-3"}, "status": {}}
    failure = classify(as_lost(pod, Lost("node-3", "node node-3 was deleted")), "main")
    assert (failure.reason, failure.node, failure.exit_code) == ("NodeLost", "node-3", None)
    assert failure.describe(W0) == f"{W0} failed: NodeLost (status.reason NodeLost)"


def test_lost_nodes_are_remembered_newest_last_each_once() -> None:
    assert remember_lost(None, []) is None
    assert remember_lost(["a", "b"], ["a"]) == ["b", "a"]
    many = remember_lost([f"n{i}" for i in range(MAX_AVOIDED_NODES)], ["x"])
    assert many is not None and len(many) == MAX_AVOIDED_NODES and many[-1] == "x"
