"""Every kind trains for real on the real node, from the examples that say they run as written.

The operator runs as a process beside the cluster (as in the KWOK tier); the jobs' pods run
`localhost/t9kjobs-trainer:latest` and train a small MLP over gloo on CPU
(`hack/images/trainer/examples/mlp.py`), each launched the way its kind launches it: plain
env vars (GenericJob), torchrun with a c10d rendezvous (PyTorchTrainingJob), DeepSpeed's
launcher over pdsh and ssh (DeepSpeedJob) and `colossalai run` over ssh (ColossalAIJob). The
four run at once. From the pods' logs: every rank of the world took part, and its loss went
down; from the API: the job Succeeded, with its Events, and its progress read from its log.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from tests.cluster import Cluster
from tests.operators import OperatorProcess
from tests.real.jobs import apply, assert_trained, events_of, get, job_logs, report
from tests.repo import REPO

# The Succeeded Event is routine (its Completed condition says the same): asked for here, so
# that the real tier proves the flag on a real API server too. Progress is read every 2 s.
OPERATOR_ARGS = ("--routine-events", "--progress-interval", "2")

RUNNABLE_MARK = "Runs as written on the real node"


def runnable_examples() -> list[Path]:
    """The examples whose first lines say they run as written on the real node."""
    return sorted(
        path
        for path in REPO.glob("examples/*/*.yaml")
        if RUNNABLE_MARK in "".join(path.read_text().splitlines(keepends=True)[:3])
    )


def test_every_kind_trains_from_its_runnable_example(
    cluster: Cluster, namespace: str, operator: OperatorProcess
) -> None:
    examples = runnable_examples()
    docs = [yaml.safe_load(path.read_text()) for path in examples]
    assert sorted(d["kind"] for d in docs) == [
        "ColossalAIJob",
        "DeepSpeedJob",
        "GenericJob",
        "PyTorchTrainingJob",
    ]
    apply(cluster, namespace, *docs)

    def finished() -> list[dict[str, Any]] | None:
        jobs = [get(cluster, namespace, d["kind"].lower(), d["metadata"]["name"]) for d in docs]
        phases = [(j.get("status") or {}).get("phase") for j in jobs]
        return jobs if all(p in ("Succeeded", "Failed") for p in phases) else None

    jobs = cluster.poll(finished, timeout=900, interval=3, message="every job finished")
    expected_world = {
        "generic-mlp": 3,  # 3 pods, one process each
        "torchrun-mlp": 6,  # 3 nodes x 2 processes
        "deepspeed-mlp": 3,  # 3 workers x 1 slot
        "colossalai-mlp": 4,  # 2 workers x 2 processes
    }
    for job in jobs:
        name = job["metadata"]["name"]
        logs = job_logs(cluster, namespace, name)
        assert job["status"]["phase"] == "Succeeded", f"{name}\n{report(job, logs)}"
        assert_trained(logs, expected_world[name], name)
        reasons = {e["reason"] for e in events_of(cluster, namespace, name)}
        assert "Succeeded" in reasons, f"{name}: {reasons}"
        # Its progress, read while it trained from rank 0's lines in the deciding replica's log
        # (the launcher's for DeepSpeed and ColossalAI: their workers' output comes through it).
        progress = job["status"].get("progress")
        assert progress is not None, f"{name}: no progress read while it trained"
        assert progress["percent"] == 100 and progress["step"] == progress["totalSteps"], progress
        assert "loss" in progress["metrics"], progress
