"""Which watch events queue a job at once and which are batched (`Options.child_batch_period`):
a new job or a new spec generation at once; its status (our own write coming back) and its
children's changes once per period; a pod that finished, which may decide its job, after the
shorter `finished_pod_batch_period`, and ahead of the jobs waiting to start."""

from __future__ import annotations

import copy
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from t9kjobs.controller.cache import Cache
from t9kjobs.controller.operator import Operator, Options
from t9kjobs.kube.informer import Store
from t9kjobs.kube.resources import Resource
from t9kjobs.manager import PluginManager

KIND = "PyTorchTrainingJob"
KEY = (KIND, "team-a", "mnist")
JOB: dict[str, Any] = {
    "apiVersion": "batch.tensorstack.dev/v1beta1",
    "kind": KIND,
    "metadata": {"name": "mnist", "namespace": "team-a", "uid": "job-uid", "generation": 1},
}
POD: dict[str, Any] = {
    "kind": "Pod",
    "metadata": {
        "name": "mnist-master-0",
        "namespace": "team-a",
        "ownerReferences": [
            {
                "apiVersion": "batch.tensorstack.dev/v1beta1",
                "kind": KIND,
                "name": "mnist",
                "uid": "job-uid",
                "controller": True,
            }
        ],
    },
}


@pytest.fixture
def operator(tmp_path: Path, manager: PluginManager) -> Iterator[Operator]:
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [{"name": "c", "cluster": {"server": "https://127.0.0.1:9"}}],
                "users": [{"name": "u", "user": {"token": "t"}}],
                "contexts": [{"name": "x", "context": {"cluster": "c", "user": "u"}}],
                "current-context": "x",
            }
        )
    )
    op = Operator(Options(kubeconfig=str(kubeconfig), child_batch_period=30), manager)
    resource = Resource("batch.tensorstack.dev", "v1beta1", "x", KIND)
    op.jobs.reconciler.cache = Cache(job_resources={KIND: resource}, job_stores={})
    yield op
    op.jobs.queue.shutdown()
    op.events.close()
    op.creator.shutdown()


def queued_now(op: Operator) -> list[Any]:
    keys = []
    while len(op.jobs.queue):
        key = op.jobs.queue.get()
        keys.append(key)
        op.jobs.queue.done(key)  # type: ignore[arg-type]
    return keys


def test_a_new_job_and_a_new_generation_are_queued_at_once(operator: Operator) -> None:
    operator.jobs.on_job("ADDED", JOB)
    assert queued_now(operator) == [KEY]
    changed = copy.deepcopy(JOB)
    changed["metadata"]["generation"] = 2
    operator.jobs.on_job("MODIFIED", changed)
    assert queued_now(operator) == [KEY]


def test_a_status_change_waits_for_the_batch(operator: Operator) -> None:
    operator.jobs.on_job("ADDED", JOB)
    queued_now(operator)
    with_status = {**JOB, "status": {"phase": "Running"}}
    operator.jobs.on_job("MODIFIED", with_status)
    assert queued_now(operator) == []
    assert KEY in operator.jobs.queue._waiting


def test_children_wait_for_the_batch_and_only_controlled_ones_count(operator: Operator) -> None:
    operator.jobs.on_child("ADDED", POD)
    assert queued_now(operator) == []
    assert list(operator.jobs.queue._waiting) == [KEY]
    stranger = copy.deepcopy(POD)
    stranger["metadata"]["ownerReferences"][0]["kind"] = "Deployment"
    stranger["metadata"]["ownerReferences"][0]["name"] = "other"
    operator.jobs.on_child("ADDED", stranger)
    assert list(operator.jobs.queue._waiting) == [KEY]


def test_a_finished_pod_queues_its_job_sooner(operator: Operator) -> None:
    operator.jobs.on_child("MODIFIED", {**POD, "status": {"phase": "Running"}})
    running_due = operator.jobs.queue._waiting[KEY]
    operator.jobs.on_child("MODIFIED", {**POD, "status": {"phase": "Succeeded"}})
    finished_due = operator.jobs.queue._waiting[KEY]
    # 30 s for any change (the fixture's batch), 0.25 s for a pod that finished.
    assert running_due - finished_due > 25


def test_a_finished_pod_puts_its_job_ahead_of_jobs_still_to_start(operator: Operator) -> None:
    for i in range(3):
        operator.jobs.on_job("ADDED", {**JOB, "metadata": {**JOB["metadata"], "name": f"new-{i}"}})
    operator.jobs.on_child("MODIFIED", {**POD, "status": {"phase": "Succeeded"}})
    operator.jobs.on_child("MODIFIED", {**POD, "status": {"phase": "Running"}})  # not urgent
    assert KEY in operator.jobs.queue._waiting_urgent
    time.sleep(operator.options.finished_pod_batch_period + 0.05)
    assert queued_now(operator)[0] == KEY


def test_a_deleted_job_is_forgotten(operator: Operator) -> None:
    operator.jobs.on_job("ADDED", JOB)
    operator.jobs.on_job("DELETED", JOB)
    queued_now(operator)
    operator.jobs.on_job("ADDED", JOB)  # the same name again: a new job, at once
    assert queued_now(operator) == [KEY]


SETTLED = {"phase": "Succeeded", "aggregate": {"succeeded": 1, "deleted": 1}}
FOLLOWING = {"phase": "Succeeded", "aggregate": {"succeeded": 1, "running": 1}}


@pytest.mark.parametrize(
    ("status", "event", "pod_phase", "queued"),
    [
        (SETTLED, "DELETED", "Succeeded", False),
        (SETTLED, "MODIFIED", "Succeeded", False),  # the collector's DisruptionTarget mark
        (SETTLED, "DELETED", "Running", False),
        (SETTLED, "MODIFIED", "Running", True),
        (SETTLED, "ADDED", "Pending", True),
        (FOLLOWING, "DELETED", "Succeeded", True),
        (FOLLOWING, "MODIFIED", "Succeeded", True),
        ({"phase": "Running"}, "DELETED", "Succeeded", True),
        (None, "DELETED", "Succeeded", True),  # the job is not in the cache (yet)
    ],
)
def test_a_pod_gone_or_ended_of_a_finished_job_whose_replicas_ended_queues_nothing(
    operator: Operator, status: Any, event: str, pod_phase: str, queued: bool
) -> None:
    """The pod collector marks and deletes thousands of ended pods in a long run: of a job
    finished with every replica ended, that is no work; of any other, or a pod still active or
    new, it is."""
    jobs = operator.cache.job_stores[KIND] = Store()
    if status is not None:
        jobs.put({**JOB, "status": status})
    operator.jobs.on_child(event, {**POD, "status": {"phase": pod_phase}})
    assert (KEY in operator.jobs.queue._waiting) is queued
