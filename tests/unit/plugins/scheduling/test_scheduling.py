"""The scheduling feature plugin: a PodGroup per job with `scheduler.t9kScheduler`, pods that join
it, and nothing of it when the cluster does not serve PodGroups: the T9k scheduler's gangs, as
`--gang-scheduling t9k` asks for them (under `auto` too where the cluster serves no native gang:
tests/unit/plugins/scheduling/test_native_gang.py)."""

from __future__ import annotations

import copy
from collections.abc import Iterator

import pytest

from t9kjobs.loading import parse_job
from t9kjobs.manager import PluginManager
from t9kjobs.planner import Observed, Plan, plan
from t9kjobs.vocabulary import Obj
from tests.unit.configuring import configured
from tests.unit.conftest import NOW
from tests.unit.core.planner.sim import Sim
from tests.unit.plugins.deepspeed.jobs import with_spec
from tests.unit.plugins.scheduling.jobs import MINIMA, MINIMA_IDS, SCHEDULER, generic_ddp


@pytest.fixture(autouse=True)
def t9k_gangs(manager: PluginManager) -> Iterator[None]:
    with configured(manager, {"gang-scheduling": "t9k"}):
        yield


def _plan(manager: PluginManager, doc: Obj, absent: frozenset[str] = frozenset()) -> Plan:
    """The first reconcile of `doc` on a cluster that does not serve the `absent` kinds."""
    job = parse_job(copy.deepcopy(doc), manager)
    return plan(job, Observed({}, absent), NOW, manager.hooks_for(job.kind))


def _of(p: Plan, kind: str) -> list[Obj]:
    return [o for o in p.create if o["kind"] == kind]


def test_without_t9k_scheduler_nothing_changes(manager: PluginManager) -> None:
    p = _plan(manager, generic_ddp())
    assert not _of(p, "PodGroup")
    for pod in _of(p, "Pod"):
        assert "schedulerName" not in pod["spec"]
        assert not any(
            k.startswith("scheduler.tensorstack.dev/") for k in pod["metadata"]["labels"]
        )


def test_a_pod_group_owned_by_the_job_and_pods_that_join_it(manager: PluginManager) -> None:
    p = _plan(manager, generic_ddp(scheduler=SCHEDULER))
    [group] = _of(p, "PodGroup")
    assert group["apiVersion"] == "scheduler.tensorstack.dev/v1beta1"
    assert group["metadata"]["name"] == "generic-ddp"
    assert group["metadata"]["namespace"] == "ns"
    assert group["metadata"]["labels"]["tensorstack.dev/owner-name"] == "generic-ddp"
    owner = group["metadata"]["ownerReferences"][0]
    assert (owner["kind"], owner["uid"], owner["controller"]) == ("GenericJob", "job-uid", True)
    assert group["spec"] == {"minMember": 4, "queue": "team-a", "priority": 7}
    pods = _of(p, "Pod")
    assert len(pods) == 4
    for pod in pods:
        assert pod["spec"]["schedulerName"] == "t9k-scheduler"
        labels = pod["metadata"]["labels"]
        assert labels["scheduler.tensorstack.dev/group-name"] == "generic-ddp"
        assert labels["scheduler.tensorstack.dev/queue"] == "team-a"
        assert labels["tensorstack.dev/owner-name"] == "generic-ddp"  # the pod's own stay
        assert labels["tensorstack.dev/replica-type"] in ("master", "worker")
    # The PodGroup exists before its pods: a gang scheduler must know the group first.
    kinds = [o["kind"] for o in p.create]
    assert kinds.index("PodGroup") < kinds.index("Pod")


def test_queue_alias_and_default_priority(manager: PluginManager) -> None:
    p = _plan(manager, generic_ddp(scheduler={"t9kScheduler": {"Queue": "q"}}))
    assert _of(p, "PodGroup")[0]["spec"] == {"minMember": 4, "queue": "q", "priority": 0}


def test_absent_pod_group_kind_leaves_pods_to_the_default_scheduler(
    manager: PluginManager,
) -> None:
    p = _plan(manager, generic_ddp(scheduler=SCHEDULER), frozenset({"PodGroup"}))
    assert not _of(p, "PodGroup")
    for pod in _of(p, "Pod"):
        assert "schedulerName" not in pod["spec"]
        assert not any(
            k.startswith("scheduler.tensorstack.dev/") for k in pod["metadata"]["labels"]
        )
    degraded = p.status.condition("Degraded")
    assert degraded is not None and degraded.status == "True"
    assert degraded.reason == "DependencyMissing"
    assert degraded.message == (
        "the cluster does not serve PodGroup (its CRD is not installed):"
        " PodGroup/generic-ddp not created; the job runs without it"
    )


def test_degraded_clears_when_the_kind_appears(manager: PluginManager) -> None:
    sim = Sim(generic_ddp(scheduler=SCHEDULER), manager)
    sim.absent = frozenset({"PodGroup"})
    sim.step()
    sim.absent = frozenset()  # a new operator found the CRD installed
    p = sim.step()
    assert [o["kind"] for o in p.create] == ["PodGroup"]  # running pods are left as they are
    degraded = p.status.condition("Degraded")
    assert degraded is not None and degraded.status == "False"


def test_changing_the_queue_updates_the_group_and_removing_the_scheduler_deletes_it(
    manager: PluginManager,
) -> None:
    sim = Sim(generic_ddp(scheduler=SCHEDULER), manager)
    sim.step()
    sim.manifest["spec"]["scheduler"] = {"t9kScheduler": {"queue": "team-b"}}
    p = sim.step()
    assert [(o["kind"], o["spec"]["queue"]) for o in p.update] == [("PodGroup", "team-b")]
    del sim.manifest["spec"]["scheduler"]
    p = sim.step()
    assert [(d.kind, d.name) for d in p.delete] == [("PodGroup", "generic-ddp")]


@pytest.mark.parametrize(("doc", "pods", "min_member"), MINIMA, ids=MINIMA_IDS)
def test_min_member_is_the_elastic_minimum(
    manager: PluginManager, doc: Obj, pods: int, min_member: int
) -> None:
    p = _plan(manager, doc)
    assert len(_of(p, "Pod")) == pods
    assert _of(p, "PodGroup")[0]["spec"]["minMember"] == min_member


def test_scaling_keeps_the_group(manager: PluginManager) -> None:
    doc = with_spec(
        elastic={"enabled": True, "minReplicas": 2, "maxReplicas": 6, "expectedReplicas": 4},
        scheduler=SCHEDULER,
    )
    sim = Sim(doc, manager)
    sim.step()
    sim.manifest["spec"]["elastic"]["expectedReplicas"] = 6
    p = sim.step()
    assert sorted(o["metadata"]["name"] for o in p.create) == ["ds-worker-4", "ds-worker-5"]
    assert all(o["spec"]["schedulerName"] == "t9k-scheduler" for o in p.create)
    assert not [o for o in p.update if o["kind"] == "PodGroup"]
