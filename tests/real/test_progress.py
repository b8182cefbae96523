"""Training progress on the real node: the trainer's MLP reports its steps and loss
(`T9KJOBS_PROGRESS` lines, hack/images/trainer/examples/mlp.py), the operator reads them from
the deciding replica's log into `status.progress`, and the client shows it: it rises while the
job trains, is 100 percent once it Succeeded, and keeps its last value when it failed.
"""

from __future__ import annotations

import time
from typing import Any

import pytest

from t9kjobs.client import Client
from t9kjobs.models import TrainingProgress
from tests.cluster import Cluster
from tests.e2e.operator import OperatorProcess, operator
from tests.real.jobs import container, job, mlp

__all__ = ["operator"]  # the fixture, imported for this module
# Read every second, so that a job of seconds shows more than one value.
OPERATOR_ARGS = ("--progress-interval", "1")


def single(name: str, *args: str) -> dict[str, Any]:
    """A GenericJob of one rank training the MLP with `args`."""
    env = [
        {"name": "RANK", "value": "0"},
        {"name": "WORLD_SIZE", "value": "1"},
        {"name": "MASTER_ADDR", "value": "127.0.0.1"},
        {"name": "MASTER_PORT", "value": "23456"},
    ]
    replica = {
        "type": "master",
        "replicas": 1,
        "restartPolicy": "Never",
        "template": {"spec": {"containers": [container("trainer", mlp(*args), env=env)]}},
    }
    return job("GenericJob", name, replica)


@pytest.fixture
def client(cluster: Cluster, operator: OperatorProcess, namespace: str) -> Client:
    return Client(kubeconfig=cluster.kubeconfig, namespace=namespace)


def test_progress_rises_and_reaches_100_percent(client: Client) -> None:
    client.create(single("rises", "--steps=100", "--sleep=0.15", "--log-every=10"))
    seen: list[TrainingProgress] = []

    def watch(j: Any) -> None:
        if j.status.progress is not None:
            seen.append(j.status.progress)

    done = client.wait("gj/rises", timeout=300, interval=0.5, callback=watch)
    assert done.status.phase == "Succeeded"
    steps = [p.step for p in seen if p.step is not None]
    running = [s for s in steps if s < 100]
    assert len(set(running)) >= 2, f"progress seen while it trained: {steps}"
    assert running == sorted(running), steps
    final = done.status.progress
    assert final is not None
    assert (final.step, final.total_steps, final.percent) == (100, 100, 100.0)
    assert final.remaining_seconds == 0 and final.replica == "master-0"
    assert set(final.metrics) == {"loss"} and final.metrics["loss"] < 1.0


def test_progress_of_a_failed_job_keeps_its_last_value(client: Client) -> None:
    client.create(
        single(
            "fails",
            "--steps=1000",
            "--sleep=0.1",
            "--log-every=10",
            "--fail-rank=0",
            "--fail-after=40",
        )
    )
    failed = client.wait("gj/fails", phase="Failed", timeout=300, interval=0.5)
    last = failed.status.progress
    assert last is not None, "no progress was read before it failed"
    assert last.step is not None and 10 <= last.step <= 40 and last.total_steps == 1000
    assert last.percent is not None and last.percent <= 4.0
    time.sleep(3)  # three more reads' time: nothing reads a finished job
    assert client.get("gj/fails").status.progress == last
