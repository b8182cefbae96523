"""kube-scheduler's own gang scheduling (`--gang-scheduling`, docs/scheduling.md): which
PodGroup a job gets, what it and the pods say, and the PodGroup's life with the job's."""

from __future__ import annotations

import copy
from collections.abc import Iterator
from typing import Any

import pytest

from t9kjobs.hooks import hookimpl
from t9kjobs.loading import parse_job
from t9kjobs.manager import PluginManager
from t9kjobs.objects import DesiredPod
from t9kjobs.planner import Observed, Plan, plan
from t9kjobs.planner.placement import rejoin_or_alone
from t9kjobs.plugins.scheduling import plugin as scheduling
from t9kjobs.plugins.scheduling.plugin import GangMode, gang_of
from t9kjobs.plugins.scheduling.reading import NATIVE_GANG, T9K_GANG
from t9kjobs.render import render_job
from t9kjobs.vocabulary import Obj
from tests.unit.configuring import configured
from tests.unit.conftest import NOW
from tests.unit.core.planner.sim import Sim
from tests.unit.core.planner.tinyjob import TinyPlugin, tiny_job
from tests.unit.plugins.deepspeed.jobs import with_spec
from tests.unit.plugins.pytorch.helpers import manifest, replica
from tests.unit.plugins.scheduling.jobs import MINIMA, MINIMA_IDS, SCHEDULER, generic_ddp

NATIVE = "PodGroup.scheduling.k8s.io"
GROUP = (NATIVE, "generic-ddp")


@pytest.fixture
def native(manager: PluginManager) -> Iterator[None]:
    with configured(manager, {"gang-scheduling": "native"}):
        yield


def _plan(manager: PluginManager, doc: Obj, absent: frozenset[str] = frozenset()) -> Plan:
    job = parse_job(copy.deepcopy(doc), manager)
    return plan(job, Observed({}, absent), NOW, manager.hooks_for(job.kind))


def _native(p: Plan) -> list[Obj]:
    return [o for o in p.create if o.get("apiVersion") == "scheduling.k8s.io/v1alpha2"]


@pytest.mark.parametrize(
    ("mode", "t9k", "absent", "gang"),
    [
        ("auto", False, set(), "native"),
        ("auto", True, set(), "t9k"),
        # auto: a job that asks for the T9k scheduler where only kube-scheduler has gangs
        ("auto", True, {"PodGroup"}, "native"),
        # ... and where nobody does: its T9k PodGroup, left out and Degraded, as always
        ("auto", True, {"PodGroup", NATIVE}, "t9k"),
        ("auto", False, {NATIVE}, None),
        ("native", True, set(), "native"),
        ("native", False, {NATIVE}, None),
        ("t9k", False, set(), None),
        ("t9k", True, {"PodGroup"}, "t9k"),
        ("none", True, set(), None),
        ("none", False, set(), None),
    ],
)
def test_which_pod_group_a_job_gets(
    manager: PluginManager, mode: GangMode, t9k: bool, absent: set[str], gang: str | None
) -> None:
    doc = generic_ddp(scheduler=SCHEDULER) if t9k else generic_ddp()
    job = parse_job(doc, manager)
    assert gang_of(job, frozenset(absent), mode) == gang


def test_a_native_gang_of_every_pod_created_before_them(
    manager: PluginManager, native: None
) -> None:
    p = _plan(manager, generic_ddp())
    [group] = _native(p)
    assert group["kind"] == "PodGroup"
    assert group["metadata"]["name"] == "generic-ddp"
    assert group["metadata"]["namespace"] == "ns"
    owner = group["metadata"]["ownerReferences"][0]
    assert (owner["kind"], owner["uid"], owner["controller"]) == ("GenericJob", "job-uid", True)
    assert group["spec"] == {"schedulingPolicy": {"gang": {"minCount": 4}}}
    pods = [o for o in p.create if o["kind"] == "Pod"]
    assert len(pods) == 4
    for pod in pods:
        assert pod["spec"]["schedulingGroup"] == {"podGroupName": "generic-ddp"}
        assert "schedulerName" not in pod["spec"]
    assert p.create.index(group) < p.create.index(pods[0])


def test_t9k_scheduler_settings_are_not_carried_to_a_native_gang(
    manager: PluginManager, native: None
) -> None:
    p = _plan(manager, generic_ddp(scheduler=SCHEDULER))
    [group] = _native(p)
    assert group["spec"] == {"schedulingPolicy": {"gang": {"minCount": 4}}}
    assert not [o for o in p.create if o.get("apiVersion") == "scheduler.tensorstack.dev/v1beta1"]
    for pod in (o for o in p.create if o["kind"] == "Pod"):
        assert "schedulerName" not in pod["spec"]
        assert "scheduler.tensorstack.dev/queue" not in pod["metadata"]["labels"]


def test_where_the_cluster_serves_no_gang_nothing_changes(
    manager: PluginManager, native: None
) -> None:
    p = _plan(manager, generic_ddp(), frozenset({NATIVE, "PodGroup"}))
    assert not _native(p)
    assert all("schedulingGroup" not in o["spec"] for o in p.create if o["kind"] == "Pod")
    assert p.status.condition("Degraded") is None


@pytest.mark.parametrize(("doc", "pods", "count"), MINIMA, ids=MINIMA_IDS)
def test_min_count_is_what_the_job_cannot_run_without(
    manager: PluginManager, native: None, doc: Obj, pods: int, count: int
) -> None:
    p = _plan(manager, doc)
    created = [o for o in p.create if o["kind"] == "Pod"]
    assert len(created) == pods
    if count == 1:  # a gang of one is none: no PodGroup, every pod placed on its own
        assert not _native(p)
        assert all("schedulingGroup" not in pod["spec"] for pod in created)
    else:
        assert _native(p)[0]["spec"]["schedulingPolicy"]["gang"]["minCount"] == count


def test_a_job_of_one_pod_is_no_gang(manager: PluginManager, native: None) -> None:
    """Its PodGroup would cost about 5 requests and place the pod as without it (#50)."""
    doc = manifest(replica("master"))
    p = _plan(manager, doc)
    [pod] = [o for o in p.create if o["kind"] == "Pod"]
    assert not _native(p)
    assert "schedulingGroup" not in pod["spec"]
    two = _plan(manager, manifest(replica("master"), replica("worker")))
    assert [g["spec"]["schedulingPolicy"]["gang"]["minCount"] for g in _native(two)] == [2]


def _elastic(manager: PluginManager) -> Sim:
    """An elastic DeepSpeedJob (2 to 6 workers, 4 now), after its first reconcile."""
    doc = with_spec(
        elastic={"enabled": True, "minReplicas": 2, "maxReplicas": 6, "expectedReplicas": 4}
    )
    sim = Sim(doc, manager)
    sim.step()
    return sim


def test_an_elastic_scale_keeps_the_gang_and_new_pods_join_it(
    manager: PluginManager, native: None
) -> None:
    sim = _elastic(manager)
    sim.manifest["spec"]["elastic"]["expectedReplicas"] = 6
    p = sim.step()
    assert sorted(o["metadata"]["name"] for o in p.create) == ["ds-worker-4", "ds-worker-5"]
    assert all(o["spec"]["schedulingGroup"] == {"podGroupName": "ds"} for o in p.create)
    assert not [o for o in p.update if o["kind"] == "PodGroup"]
    assert not [d for d in p.delete if d.kind == "PodGroup"]


def test_a_gang_whose_count_changes_is_replaced_not_updated(
    manager: PluginManager, native: None
) -> None:
    """minCount is immutable: an update would be refused (and fail the job)."""
    sim = _elastic(manager)
    sim.manifest["spec"]["elastic"]["minReplicas"] = 3
    p = sim.step()
    assert not [o for o in p.update if o["kind"] == "PodGroup"]
    assert [(d.api_version, d.kind, d.name) for d in p.delete if d.kind == "PodGroup"] == [
        ("scheduling.k8s.io/v1alpha2", "PodGroup", "ds")
    ]
    p = sim.step()  # gone: created again, with the new count
    [group] = _native(p)
    assert group["spec"]["schedulingPolicy"]["gang"]["minCount"] == 3


@pytest.mark.parametrize("mode", ["native", "t9k"])
def test_pause_and_the_end_of_a_job_leave_no_pod_group(
    manager: PluginManager, mode: GangMode
) -> None:
    with configured(manager, {"gang-scheduling": mode}):
        sim = Sim(generic_ddp(scheduler=SCHEDULER), manager)
        sim.step()
        kind = NATIVE if mode == "native" else "PodGroup"
        assert (kind, "generic-ddp") in sim.objects
        sim.manifest["spec"]["runMode"] = {"pause": {"enabled": True}}
        sim.step()
        assert (kind, "generic-ddp") not in sim.objects
        del sim.manifest["spec"]["runMode"]
        p = sim.step()
        assert (kind, "generic-ddp") in sim.objects  # resumed: a gang again, before the pods
        kinds = [o["kind"] for o in p.create]
        assert kinds.index("PodGroup") < kinds.index("Pod")
        sim.set("generic-ddp-master-0", "Failed", 3)
        sim.step()
        assert sim.status["phase"] == "Failed"
        assert (kind, "generic-ddp") not in sim.objects


def _unschedulable(pod: Obj, message: str) -> Obj:
    pod = copy.deepcopy(pod)
    pod["status"] = {
        "phase": "Pending",
        "conditions": [
            {
                "type": "PodScheduled",
                "status": "False",
                "reason": "Unschedulable",
                "message": message,
            }
        ],
    }
    return pod


def _placed(pod: Obj) -> Obj:
    pod = copy.deepcopy(pod)
    pod["spec"]["nodeName"] = "node-0"
    pod["status"] = {"phase": "Pending"}
    return pod


def test_a_gang_that_cannot_be_placed_says_why(manager: PluginManager, native: None) -> None:
    sim = Sim(generic_ddp(), manager)
    sim.step()
    group = sim.objects[GROUP]
    group["status"] = {
        "conditions": [
            {
                "type": "PodGroupScheduled",
                "status": "False",
                "reason": "Unschedulable",
                "message": "pod group is unschedulable",
            }
        ]
    }
    why = "0/4 nodes are available: 4 Insufficient nvidia.com/gpu."
    for name in ("generic-ddp-master-0", "generic-ddp-worker-0"):
        sim.objects[("Pod", name)] = _unschedulable(sim.pod(name), why)
    p = sim.step()
    scheduled = p.status.condition("Scheduled")
    assert scheduled is not None
    assert (scheduled.status, scheduled.reason) == ("False", "Unschedulable")
    assert scheduled.message == (
        f"PodGroup.scheduling.k8s.io generic-ddp (4 pods at once) cannot be placed: {why}"
    )
    assert p.status.reason == "Unschedulable"
    assert p.status.phase == "Pending"
    assert p.status_changed
    # Placed at last: the condition says so, the reason goes.
    for name in [n for kind, n in sim.objects if kind == "Pod"]:
        sim.objects[("Pod", name)] = _placed(sim.pod(name))
    del group["status"]
    p = sim.step()
    scheduled = p.status.condition("Scheduled")
    assert scheduled is not None and (scheduled.status, scheduled.reason) == ("True", "Scheduled")
    assert p.status.reason is None


def test_without_a_gang_a_pending_pod_adds_no_condition(manager: PluginManager) -> None:
    with configured(manager, {"gang-scheduling": "t9k"}):  # no gang for this job
        sim = Sim(generic_ddp(), manager)
        sim.step()
        name = "generic-ddp-master-0"
        sim.objects[("Pod", name)] = _unschedulable(sim.pod(name), "0/4 nodes are available")
        p = sim.step()
    assert p.status.condition("Scheduled") is None
    assert p.status.reason is None


def test_a_failed_job_shows_its_reason(manager: PluginManager) -> None:
    sim = Sim(generic_ddp(), manager)
    sim.step()
    sim.set("generic-ddp-master-0", "Failed", 3)
    p = sim.step()
    failed = p.status.condition("Failed")
    assert failed is not None and p.status.reason == failed.reason


def test_the_library_and_the_operator_share_the_default(manager: PluginManager) -> None:
    """Unconfigured, the plugin runs under the operator's default (`auto`): a native gang
    where the cluster serves the kind; `render` takes alpha APIs as off, and shows none."""
    from t9kjobs.cli.main import _parser

    assert _parser(manager=manager).parse_args(["operator"]).gang_scheduling == "auto"
    assert _native(_plan(manager, generic_ddp()))
    assert not _native(_plan(manager, generic_ddp(), frozenset({NATIVE})))
    rendered = render_job(parse_job(generic_ddp(), manager), manager)
    assert [o["kind"] for o in rendered if o["kind"] != "Pod"] == ["Service"] * len(
        [o for o in rendered if o["kind"] == "Service"]
    )


def test_no_pod_joins_a_gang_on_its_way_out(manager: PluginManager, native: None) -> None:
    """Resumed while the paused job's PodGroup still waits for its old pods to go
    (podgroup-protection): the new pods wait for the group to be gone, then a new one."""
    sim = Sim(generic_ddp(), manager)
    sim.step()
    sim.manifest["spec"]["runMode"] = {"pause": {"enabled": True}}
    sim.step()
    sim.objects[GROUP] = {
        **sim.objects.get(GROUP, _native(_plan(manager, generic_ddp()))[0]),
        "metadata": {"name": "generic-ddp", "deletionTimestamp": "2026-01-01T12:00:00Z"},
    }
    del sim.manifest["spec"]["runMode"]
    p = sim.step()
    assert not [o for o in p.create if o["kind"] in ("Pod", "PodGroup")]
    del sim.objects[GROUP]
    p = sim.step()
    kinds = [o["kind"] for o in p.create]
    assert kinds.count("PodGroup") == 1 and kinds.count("Pod") == 4


def _member(name: str, phase: str) -> Obj:
    spec = {"nodeName": "n", "schedulingGroup": {"podGroupName": "g"}}
    if phase.endswith(" alone"):  # placed on its own earlier: no member of the gang
        phase = phase.removesuffix(" alone")
        del spec["schedulingGroup"]
    return {"metadata": {"name": name}, "spec": spec, "status": {"phase": phase}}


def _joining(name: str) -> Obj:
    return {"metadata": {"name": name}, "spec": {"schedulingGroup": {"podGroupName": "g"}}}


GANG_OF_3 = [
    (
        {
            "apiVersion": "scheduling.k8s.io/v1alpha2",
            "kind": "PodGroup",
            "metadata": {"name": "g"},
            "spec": {"schedulingPolicy": {"gang": {"minCount": 3}}},
        },
        NATIVE_GANG,
    )
]


@pytest.mark.parametrize(
    ("others", "joins"),
    [
        # the other members run: the replacement rejoins the gang
        ({"w0": "Running", "w2": "Running"}, True),
        ({"w0": "Pending", "w2": "Running"}, True),
        # a member ended (failed for good, or succeeded): the gang can never count 3 again
        ({"w0": "Failed", "w2": "Running"}, False),
        ({"w0": "Succeeded", "w2": "Running"}, False),
        # a live pod placed on its own is no member: kube-scheduler would count 2 of 3
        ({"w0": "Running alone", "w2": "Running"}, False),
        ({"w0": "Pending alone", "w2": "Pending alone"}, False),
    ],
)
def test_a_replacement_rejoins_its_gang_unless_too_few_members_are_left(
    others: dict[str, str], joins: bool
) -> None:
    creating = [_joining("w1")]
    rejoin_or_alone(creating, {n: _member(n, p) for n, p in others.items()}, GANG_OF_3)
    assert ("schedulingGroup" in creating[0]["spec"]) == joins


def test_pods_created_together_stay_in_their_gang() -> None:
    """A start, a resume: every member new at once."""
    creating = [_joining(f"w{i}") for i in range(3)]
    rejoin_or_alone(creating, {}, GANG_OF_3)
    assert all("schedulingGroup" in p["spec"] for p in creating)
    rejoin_or_alone(creating[:1], {}, [])  # no gang of kube-scheduler's: left alone
    assert "schedulingGroup" in creating[0]["spec"]
    # A gang none of whose members can leave it (the T9k scheduler's): left alone too.
    t9k = [({"kind": "PodGroup", "metadata": {"name": "g"}, "spec": {"minMember": 3}}, T9K_GANG)]
    rejoin_or_alone(creating[:1], {}, t9k)
    assert "schedulingGroup" in creating[0]["spec"]


def test_a_replacement_rejoins_beside_members_as_the_operators_cache_keeps_them() -> None:
    """The informers' stores slim pods (t9kjobs.kube.slimming): what they keep must still say
    which pods are members (the e2e tier found every replacement placed alone once they did
    not)."""
    from t9kjobs.kube.slimming import slimmer

    members = {
        n: slimmer("Pod")({**_member(n, "Running"), "apiVersion": "v1", "kind": "Pod"})
        for n in ("w0", "w2")
    }
    creating = [_joining("w1")]
    rejoin_or_alone(creating, members, GANG_OF_3)
    assert creating[0]["spec"]["schedulingGroup"] == {"podGroupName": "g"}


class _GangNamingPlugin(TinyPlugin):
    """A third-party kind whose template is a plain dict: its pods name another job's gang."""

    @hookimpl
    def t9kjobs_build_pods(self, job: Any) -> list[DesiredPod]:
        pods = TinyPlugin.t9kjobs_build_pods(self, job)
        for pod in pods:
            pod.manifest["spec"]["schedulingGroup"] = {"podGroupName": "victim"}
        return pods


@pytest.mark.parametrize(
    ("mode", "absent", "joined"),
    [
        ("none", frozenset(), None),
        ("native", frozenset({NATIVE}), None),  # the cluster serves no gang
        ("native", frozenset(), "tiny"),
    ],
)
def test_a_pod_joins_its_own_jobs_gang_or_none(
    mode: GangMode, absent: frozenset[str], joined: str | None
) -> None:
    # Issue #47: a schedulingGroup a pod came with passed through when the job got no gang of
    # its own (so the pod joined another job's gang); the engine drops it for every kind.
    manager = PluginManager()
    manager.register(_GangNamingPlugin(), "tiny")
    manager.register(scheduling, "scheduling")
    with configured(manager, {"gang-scheduling": mode}):
        p = _plan(manager, tiny_job(), absent)
    pods = [o for o in p.create if o["kind"] == "Pod"]
    assert len(pods) == 2
    for pod in pods:
        said = pod["spec"].get("schedulingGroup")
        assert said == ({"podGroupName": joined} if joined else None)
