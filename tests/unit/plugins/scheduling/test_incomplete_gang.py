"""Gangs that can never be complete (`t9kjobs.planner.gangs`): a member waiting to be placed
while the live members are fewer than the gang needs is said (`Scheduled` False,
`GangIncomplete`), then, `GANG_INCOMPLETE_SECONDS` later, placed again on its own
(kube-scheduler's gang) or the job failed (the T9k scheduler's).

The job is the chaos case of issue #48: examples/genericjob/torch-ddp.yaml (a master and three
workers, a gang of 4), whose worker-0 replacement waits in the gang while workers 1 and 2 have
ended for good."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta

import pytest

from t9kjobs.manager import PluginManager
from t9kjobs.planner import Plan
from t9kjobs.planner.gangs import GANG_INCOMPLETE_SECONDS, stranded
from t9kjobs.plugins.scheduling.reading import NATIVE_GANG
from t9kjobs.vocabulary import Obj
from tests.unit.configuring import configured
from tests.unit.core.planner.sim import Sim
from tests.unit.plugins.scheduling.jobs import SCHEDULER, generic_ddp

MASTER, W0, W1, W2 = (f"generic-ddp-{n}" for n in ("master-0", "worker-0", "worker-1", "worker-2"))


@pytest.fixture
def native(manager: PluginManager) -> Iterator[None]:
    with configured(manager, {"gang-scheduling": "native"}):
        yield


def _placed(sim: Sim, name: str) -> None:
    sim.set(name, "Running")
    sim.pod(name)["spec"]["nodeName"] = "node-0"


def _stranded_job(manager: PluginManager, **spec: object) -> Sim:
    """The chaos case: master running, worker-0 waiting unplaced, workers 1 and 2 ended."""
    sim = Sim(generic_ddp(**spec), manager)
    sim.step()
    for name in (MASTER, W0, W1, W2):
        _placed(sim, name)
    sim.step()
    sim.set(W0, "Pending")  # a replacement, not placed: no node, no condition
    del sim.pod(W0)["spec"]["nodeName"]
    sim.set(W1, "Succeeded")
    sim.set(W2, "Succeeded")
    return sim


def _scheduled(p: Plan) -> tuple[str, str, str, str | None]:
    c = p.status.condition("Scheduled")
    assert c is not None
    return c.status, c.reason, c.message, c.last_transition_time


def test_a_replacement_stranded_in_a_native_gang_is_placed_again_alone(
    manager: PluginManager, native: None
) -> None:
    sim = _stranded_job(manager)
    p = sim.step()
    status, reason, message, since = _scheduled(p)
    assert (status, reason) == ("False", "GangIncomplete")
    assert message == (
        "PodGroup.scheduling.k8s.io generic-ddp (4 pods at once) can never be placed: 2 live"
        f" member(s), the others ended; {W0} wait(s) for the rest of the gang"
    )
    assert p.status.reason == "GangIncomplete"
    assert p.status.phase == "Running"
    assert not p.delete
    assert p.requeue_after == GANG_INCOMPLETE_SECONDS

    sim.now += timedelta(seconds=GANG_INCOMPLETE_SECONDS - 1)
    p = sim.step()
    assert not p.delete and p.requeue_after == 1.0
    assert _scheduled(p)[3] == since  # the bound counts from the first time it was said

    sim.now += timedelta(seconds=1)
    p = sim.step()
    assert [(d.kind, d.name, d.grace_period_seconds) for d in p.delete] == [("Pod", W0, 0)]
    assert [e.reason for e in p.events] == ["GangIncomplete"]
    p = sim.step()  # gone: created again, out of the gang, of the same incarnation
    [pod] = [o for o in p.create if o["kind"] == "Pod"]
    assert pod["metadata"]["name"] == W0
    assert "schedulingGroup" not in pod["spec"]
    assert p.status.backoff_count == 0
    _placed(sim, W0)
    p = sim.step()
    assert _scheduled(p)[:2] == ("True", "Scheduled")
    assert p.status.reason is None


def test_the_bound_counts_from_the_gang_incomplete_not_an_earlier_unschedulable(
    manager: PluginManager, native: None
) -> None:
    sim = _stranded_job(manager)
    sim.manifest["status"]["conditions"].append(
        {
            "type": "Scheduled",
            "status": "False",
            "reason": "Unschedulable",
            "message": "0/4 nodes are available",
            "lastTransitionTime": "2025-01-01T00:00:00Z",
        }
    )
    p = sim.step()
    assert _scheduled(p)[1:2] == ("GangIncomplete",)
    assert _scheduled(p)[3] == "2026-01-01T12:00:00Z"
    assert not p.delete


@pytest.mark.parametrize(
    ("w1", "w2", "waiting"),
    [
        ("Running", "Running", True),  # every member live: the scheduler places them
        ("Succeeded", "Succeeded", False),  # the replacement placed: nothing waits
    ],
)
def test_a_gang_that_can_still_be_placed_is_left_alone(
    manager: PluginManager, native: None, w1: str, w2: str, waiting: bool
) -> None:
    sim = _stranded_job(manager)
    sim.set(W1, w1)
    sim.set(W2, w2)
    if not waiting:
        _placed(sim, W0)
    for _ in range(2):
        p = sim.step()
        sim.now += timedelta(seconds=GANG_INCOMPLETE_SECONDS)
        c = p.status.condition("Scheduled")
        assert c is None or c.reason != "GangIncomplete"
        assert not p.delete


def test_a_pod_being_deleted_is_no_member() -> None:
    group: Obj = {
        "apiVersion": "scheduling.k8s.io/v1alpha2",
        "kind": "PodGroup",
        "metadata": {"name": "g"},
        "spec": {"schedulingPolicy": {"gang": {"minCount": 2}}},
    }

    def pod(name: str, node: str | None, deleting: bool = False) -> Obj:
        meta: Obj = {"name": name, "deletionTimestamp": "x"} if deleting else {"name": name}
        spec: Obj = {"schedulingGroup": {"podGroupName": "g"}}
        if node:
            spec["nodeName"] = node
        return {"kind": "Pod", "metadata": meta, "spec": spec, "status": {"phase": "Pending"}}

    gangs = [(group, NATIVE_GANG)]
    assert stranded(gangs, [pod("a", None), pod("b", "n")]) is None
    gang = stranded(gangs, [pod("a", None), pod("b", "n", deleting=True)])
    assert gang is not None and [p["metadata"]["name"] for p in gang.waiting] == ["a"]
    # Not a member: placed on its own earlier.
    alone = pod("b", "n")
    del alone["spec"]["schedulingGroup"]
    assert stranded(gangs, [pod("a", None), alone]) is not None


def test_a_t9k_gang_that_can_never_be_complete_fails_the_job(manager: PluginManager) -> None:
    sim = _stranded_job(manager, scheduler=SCHEDULER)
    p = sim.step()
    assert _scheduled(p)[:2] == ("False", "GangIncomplete")
    sim.now += timedelta(seconds=GANG_INCOMPLETE_SECONDS)
    p = sim.step()
    assert p.status.phase == "Failed"
    failed = p.status.condition("Failed")
    assert failed is not None and failed.reason == "GangIncomplete"
    assert "PodGroup generic-ddp (4 pods at once) can never be placed" in failed.message
    assert "its scheduler places none of them on its own" in failed.message
