"""Every kind trains for real on the real node, from the examples that say they run as written.

The operator runs as a process beside the cluster (as in the KWOK tier); the jobs' pods run
`localhost/t9kjobs-trainer:latest` and train a small MLP over gloo on CPU
(`hack/images/trainer/examples/mlp.py`), each launched the way its kind launches it: plain
env vars (GenericJob), torchrun with a c10d rendezvous (PyTorchTrainingJob), DeepSpeed's
launcher over pdsh and ssh (DeepSpeedJob) and `colossalai run` over ssh (ColossalAIJob). The
four run at once. From the pods' logs: every rank of the world took part, and its loss went
down; from the API: the job Succeeded, with its Events.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import yaml

from tests.cluster import REPO, Cluster
from tests.e2e.operator import OperatorProcess, operator

__all__ = ["operator"]  # the fixture, imported for this module

RUNNABLE_MARK = "Runs as written on the real node"
DONE = re.compile(
    r"done rank=(?P<rank>\d+) world=(?P<world>\d+) first_loss=(?P<first>[\d.]+)"
    r" last_loss=(?P<last>[\d.]+) steps=\d+ in_sync=(?P<sync>\w+)"
)


def runnable_examples() -> list[Path]:
    """The examples whose first lines say they run as written on the real node."""
    return sorted(
        path
        for path in REPO.glob("examples/*/*.yaml")
        if RUNNABLE_MARK in "".join(path.read_text().splitlines(keepends=True)[:3])
    )


def get(cluster: Cluster, namespace: str, *what: str) -> Any:
    return json.loads(cluster.kubectl("-n", namespace, "get", *what, "-o", "json").stdout)


def logs_of_job(cluster: Cluster, namespace: str, name: str) -> dict[str, str]:
    pods = get(cluster, namespace, "pods", "-l", f"tensorstack.dev/owner-name={name}")
    return {
        pod["metadata"]["name"]: cluster.kubectl(
            "-n", namespace, "logs", pod["metadata"]["name"], check=False
        ).stdout
        for pod in pods["items"]
    }


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
    for path in examples:
        cluster.kubectl("-n", namespace, "apply", "-f", str(path))

    def finished() -> list[dict[str, Any]] | None:
        jobs = [get(cluster, namespace, d["kind"].lower(), d["metadata"]["name"]) for d in docs]
        phases = [(j.get("status") or {}).get("phase") for j in jobs]
        return jobs if all(p in ("Succeeded", "Failed") for p in phases) else None

    jobs = cluster.poll(finished, timeout=900, interval=3, message="every job finished")
    report = {}
    for job in jobs:
        name = job["metadata"]["name"]
        logs = logs_of_job(cluster, namespace, name)
        report[name] = (job["status"], logs)
        tails = "\n".join(f"--- {pod}\n{text[-3000:]}" for pod, text in logs.items())
        assert job["status"]["phase"] == "Succeeded", f"{name}: {job['status']}\n{tails}"
        done = [m.groupdict() for text in logs.values() for m in DONE.finditer(text)]
        worlds = {int(d["world"]) for d in done}
        assert len(worlds) == 1, f"{name}: {done}"
        (world,) = worlds
        # every rank of the world finished, once, in sync, with a lower loss than it started
        assert sorted(int(d["rank"]) for d in done) == list(range(world)), f"{name}: {tails}"
        assert all(d["sync"] == "True" for d in done)
        assert all(float(d["last"]) < float(d["first"]) / 10 for d in done), done
        expected_world = {
            "generic-mlp": 3,  # 3 pods, one process each
            "torchrun-mlp": 6,  # 3 nodes x 2 processes
            "deepspeed-mlp": 3,  # 3 workers x 1 slot
            "colossalai-mlp": 4,  # 2 workers x 2 processes
        }[name]
        assert world == expected_world
        events = get(
            cluster, namespace, "events", "--field-selector", f"involvedObject.name={name}"
        )
        reasons = {e["reason"] for e in events["items"]}
        assert reasons, f"{name}: no Events"
