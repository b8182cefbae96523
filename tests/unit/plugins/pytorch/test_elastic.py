"""Elastic jobs: clamping, the split by scalingWeight, and scaling a running job in the planner."""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import pytest

from t9kjobs.manager import PluginManager
from t9kjobs.models import ElasticConfig, Job
from t9kjobs.planner import Observed, plan
from t9kjobs.plugins.pytorch.spec import PyTorchTrainingJobSpec
from t9kjobs.plugins.pytorch.topology import replica_counts, split_by_weight, topology
from t9kjobs.testing.fixtures import pod_in_phase
from tests.unit.plugins.pytorch.helpers import NOW, Obj, env_of, example, manifest, replica

MakeJob = Callable[[Any], Job]


@pytest.mark.parametrize(
    ("total", "weights", "expected"),
    [
        (7, [("worker", 1)], {"worker": 7}),
        (5, [("a", 2), ("b", 3)], {"a": 2, "b": 3}),
        (10, [("a", 1), ("b", 1), ("c", 1)], {"a": 4, "b": 3, "c": 3}),  # tie: first listed
        (10, [("ps", 1), ("worker", 3)], {"ps": 3, "worker": 7}),  # 2.5 / 7.5: tie to ps
        (1, [("a", 1), ("b", 3)], {"a": 0, "b": 1}),  # largest remainder, not list order
        (7, [("a", 1), ("b", 2), ("c", 4)], {"a": 1, "b": 2, "c": 4}),
        (8, [("a", 1), ("b", 2), ("c", 4)], {"a": 1, "b": 2, "c": 5}),  # 1.14 / 2.29 / 4.57
        (0, [("a", 1), ("b", 1)], {"a": 0, "b": 0}),
        (3, [("a", 0), ("b", 0)], {"a": 0, "b": 0}),  # no weight: nothing to share by
    ],
)
def test_split_by_weight(
    total: int, weights: list[tuple[str, int]], expected: dict[str, int]
) -> None:
    assert split_by_weight(total, weights) == expected


def test_split_always_adds_up() -> None:
    weights = [("a", 3), ("b", 5), ("c", 7), ("d", 1)]
    for total in range(40):
        shares = split_by_weight(total, weights)
        assert sum(shares.values()) == total
        exact = {t: total * w / 16 for t, w in weights}
        assert all(abs(shares[t] - exact[t]) < 1 for t in exact)


def _spec(make_job: MakeJob, doc: Obj) -> PyTorchTrainingJobSpec:
    return make_job(doc).spec_as(PyTorchTrainingJobSpec)


def test_expected_replicas_is_clamped(make_job: MakeJob) -> None:
    spec = _spec(make_job, example("elastic"))
    assert replica_counts(spec) == {"worker": 7}
    # Admission refuses an expectedReplicas outside [min, max]; the engine clamps anyway.
    for expected, count in [(20, 10), (1, 4), (None, 4)]:
        elastic = ElasticConfig(enabled=True, minReplicas=4, maxReplicas=10)
        elastic.expected_replicas = expected
        assert replica_counts(spec.model_copy(update={"elastic": elastic})) == {"worker": count}


def test_without_expected_replicas_the_replicas_count(make_job: MakeJob) -> None:
    doc = manifest(
        replica("worker", 6),
        elastic={"enabled": True, "minReplicas": 2, "maxReplicas": 8},
        torchrunConfig={"enabled": True},
    )
    doc["spec"]["replicaSpecs"][0]["template"]["spec"]["containers"][0]["args"] = ["t.py"]
    assert replica_counts(_spec(make_job, doc)) == {"worker": 6}


def test_elastic_disabled_ignores_expected_replicas(make_job: MakeJob) -> None:
    doc = manifest(replica("worker", 3), elastic={"enabled": False, "expectedReplicas": 9})
    assert replica_counts(_spec(make_job, doc)) == {"worker": 3}


def test_master_is_never_scaled_and_types_share_by_weight(
    render: Callable[[Obj], list[Obj]],
) -> None:
    doc = manifest(
        replica("master", 1),
        replica("ps", 1, scalingWeight=1),
        replica("worker", 1, scalingWeight=3),
        elastic={"enabled": True, "minReplicas": 2, "maxReplicas": 12, "expectedReplicas": 8},
    )
    pods = render(doc)
    names = [p["metadata"]["name"] for p in pods]
    assert names[0] == "job-master-0"
    assert sum(n.startswith("job-ps-") for n in names) == 2
    assert sum(n.startswith("job-worker-") for n in names) == 6
    envs = [env_of(p) for p in pods]
    assert {e["PET_NNODES"] for e in envs} == {"3:13"}  # the master is one node more
    assert {e["WORLD_SIZE"] for e in envs} == {"9"}
    assert sorted(int(e["RANK"]) for e in envs) == list(range(9))
    assert not any("PET_NODE_RANK" in e for e in envs)  # the rendezvous assigns node ranks
    assert {e["PET_RDZV_BACKEND"] for e in envs} == {"c10d"}


def _scaled(doc: Obj, expected: int) -> Obj:
    doc = copy.deepcopy(doc)
    doc["spec"]["elastic"]["expectedReplicas"] = expected
    return doc


def _running(manager: PluginManager, job: Job) -> list[Obj]:
    """The pods the first reconcile creates, as the cluster reports them once running."""
    first = plan(job, Observed(), NOW, manager.hooks_for(job.kind))
    return [pod_in_phase(o, "Running") for o in first.create if o["kind"] == "Pod"]


def test_scaling_down_deletes_the_highest_indices(
    manager: PluginManager, make_job: MakeJob
) -> None:
    doc = example("elastic")
    running = _running(manager, make_job(doc))
    assert len(running) == 7
    job = make_job(_scaled(doc, 5))
    result = plan(job, Observed.of(running), NOW, manager.hooks_for(job.kind))
    deleted = sorted(r.name for r in result.delete)
    assert deleted == ["elastic-mnist-worker-5", "elastic-mnist-worker-6"]
    assert {r.uid for r in result.delete} == {f"uid-{n}" for n in deleted}
    assert not [o for o in result.create if o["kind"] == "Pod"]


def test_scaling_up_creates_the_missing_pods(manager: PluginManager, make_job: MakeJob) -> None:
    doc = example("elastic")
    running = _running(manager, make_job(doc))
    job = make_job(_scaled(doc, 9))
    result = plan(job, Observed.of(running), NOW, manager.hooks_for(job.kind))
    created = [o for o in result.create if o["kind"] == "Pod"]
    assert [o["metadata"]["name"] for o in created] == [
        "elastic-mnist-worker-7",
        "elastic-mnist-worker-8",
    ]
    assert not result.delete
    # New pods join the same rendezvous as the running ones.
    assert {env_of(o)["PET_RDZV_ENDPOINT"] for o in created} == {
        env_of(running[0])["PET_RDZV_ENDPOINT"]
    }
    assert all("--nnodes=4:10" in o["spec"]["containers"][0]["command"] for o in created)
    assert result.status.aggregate.running == 7
    assert result.status.aggregate.creating == 2


@pytest.mark.parametrize(
    ("replicas", "elastic", "min_available"),
    [
        ([replica("master", 1), replica("worker", 3)], {"minReplicas": 2, "maxReplicas": 5}, 3),
        ([replica("worker", 3)], {"minReplicas": 2, "maxReplicas": 5}, 2),
        ([replica("master", 1), replica("worker", 3)], {"enabled": False}, None),
        ([replica("master", 1), replica("worker", 3)], None, None),
    ],
)
def test_an_elastic_job_runs_with_its_minimum_plus_the_master(
    make_job: MakeJob, replicas: list[Obj], elastic: Obj | None, min_available: int | None
) -> None:
    doc = manifest(*replicas)
    if elastic is not None:
        doc["spec"]["elastic"] = {"enabled": True, **elastic}
    assert _spec(make_job, doc).lifecycle().min_available == min_available


def test_a_pod_the_job_does_not_have(make_job: MakeJob) -> None:
    job = make_job(manifest(replica("worker", 2)))
    top = topology(job, job.spec_as(PyTorchTrainingJobSpec))
    assert top.node("worker", 1).rank == 1
    with pytest.raises(KeyError, match="no pod ps-0 in the job"):
        top.node("ps", 0)
