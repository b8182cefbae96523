"""Gangs that buy nothing are not made (`t9kjobs.planner.idle_gangs`, #50): pods that reserve
nothing, in a namespace that gives them nothing by default, are placed one by one; a gang the
cluster holds already is kept; the T9k scheduler's, which its pods cannot leave, always is."""

from __future__ import annotations

import copy
from collections.abc import Iterator

import pytest

from t9kjobs.loading import parse_job
from t9kjobs.manager import PluginManager
from t9kjobs.planner import Observed, Plan, plan
from t9kjobs.planner.idle_gangs import reserves
from t9kjobs.vocabulary import Obj
from tests.unit.configuring import configured
from tests.unit.conftest import NOW
from tests.unit.plugins.pytorch.helpers import manifest, replica
from tests.unit.plugins.scheduling.jobs import SCHEDULER

NATIVE = "scheduling.k8s.io/v1alpha2"


@pytest.fixture
def native(manager: PluginManager) -> Iterator[None]:
    with configured(manager, {"gang-scheduling": "native"}):
        yield


def _pod(**spec: object) -> Obj:
    return {"spec": {"containers": [{"name": "c", "image": "x"}], **spec}}


def _container(**fields: object) -> Obj:
    return {"spec": {"containers": [{"name": "c", "image": "x", **fields}]}}


@pytest.mark.parametrize(
    ("pod", "held"),
    [
        (_container(resources={"requests": {"cpu": "100m"}}), True),
        (_container(resources={"limits": {"nvidia.com/gpu": 1}}), True),
        (_container(resources={"requests": {"memory": "1Gi"}, "limits": {}}), True),
        (_container(ports=[{"containerPort": 80, "hostPort": 8080}]), True),
        (_pod(resources={"requests": {"cpu": "1"}}), True),
        (_pod(resourceClaims=[{"name": "gpu", "resourceClaimName": "a"}]), True),
        (
            _pod(initContainers=[{"name": "i", "resources": {"requests": {"cpu": "0.5"}}}]),
            True,
        ),
        (_container(), False),
        (_container(resources={}), False),
        (_container(resources={"requests": {"cpu": "0", "memory": "0Gi"}}), False),
        (_container(resources={"limits": {"cpu": "0m", "memory": "0.0"}}), False),
        (_container(ports=[{"containerPort": 80}]), False),
    ],
)
def test_what_a_pod_reserves(pod: Obj, held: bool) -> None:
    assert reserves(pod) is held


def test_a_hostile_quantity_is_read_in_linear_time() -> None:
    """The template is the user's: a request of a million zeros and a letter backtracked
    quadratically through the old pattern (4 s at 20,000 zeros); a quantity too long to be
    a spelling of nothing is an amount, unread, and a short one is read in linear time."""
    assert reserves(_container(resources={"requests": {"cpu": "0" * 1_000_000 + "x"}}))
    assert reserves(_container(resources={"requests": {"cpu": "0" * 30 + "x"}}))
    assert not reserves(_container(resources={"requests": {"cpu": "0" * 30}}))
    assert not reserves({"spec": {"containers": ["odd", {"ports": ["odd"]}]}})


def _job(requests: dict[str, str] | None = None, **spec: object) -> Obj:
    doc = manifest(replica("master"), replica("worker", 3), **spec)
    if requests is not None:
        for task in doc["spec"]["replicaSpecs"]:
            task["template"]["spec"]["containers"][0]["resources"] = {"requests": requests}
    return doc


def _plan(manager: PluginManager, doc: Obj, observed: Observed) -> Plan:
    job = parse_job(copy.deepcopy(doc), manager)
    return plan(job, observed, NOW, manager.hooks_for(job.kind))


def _groups(p: Plan) -> list[Obj]:
    return [o for o in p.create if o["kind"] == "PodGroup"]


def _joined(p: Plan) -> list[object]:
    return [o["spec"].get("schedulingGroup") for o in p.create if o["kind"] == "Pod"]


@pytest.mark.usefixtures("native")
def test_pods_that_reserve_nothing_are_no_gang(manager: PluginManager) -> None:
    p = _plan(manager, _job(), Observed.of([], default_requests=False))
    assert not _groups(p)
    assert _joined(p) == [None] * 4


@pytest.mark.usefixtures("native")
def test_pods_that_reserve_something_are_a_gang(manager: PluginManager) -> None:
    p = _plan(manager, _job({"cpu": "1"}), Observed.of([], default_requests=False))
    [group] = _groups(p)
    assert group["spec"]["schedulingPolicy"]["gang"]["minCount"] == 4
    assert _joined(p) == [{"podGroupName": group["metadata"]["name"]}] * 4


@pytest.mark.usefixtures("native")
def test_a_namespace_that_gives_requests_by_default_keeps_the_gang(
    manager: PluginManager,
) -> None:
    """A LimitRange's defaults reach the pods after their manifests are written; so does
    not knowing (the default of `Observed`)."""
    for observed in (Observed.of([], default_requests=True), Observed({})):
        p = _plan(manager, _job(), observed)
        assert len(_groups(p)) == 1
        assert None not in _joined(p)


@pytest.mark.usefixtures("native")
def test_a_gang_the_cluster_holds_is_kept(manager: PluginManager) -> None:
    """An older operator made it, or the namespace's defaults changed since: pending members
    name it, and would wait for ever for a group deleted under them."""
    first = _plan(manager, _job(), Observed.of([], default_requests=True))
    [group] = _groups(first)
    held = {**group, "metadata": {**group["metadata"], "uid": "g-uid"}}
    again = _plan(manager, _job(), Observed.of([held], default_requests=False))
    assert not [d for d in again.delete if d.kind == "PodGroup"]
    assert None not in _joined(again)


def test_the_t9k_schedulers_gang_is_kept(manager: PluginManager) -> None:
    """Its pods are placed by the group's label, which the engine cannot take off them."""
    p = _plan(manager, _job(scheduler=SCHEDULER), Observed.of([], default_requests=False))
    assert [g["apiVersion"] for g in _groups(p)] == ["scheduler.tensorstack.dev/v1beta1"]
    assert NATIVE not in [g["apiVersion"] for g in _groups(p)]
