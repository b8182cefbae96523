"""The ssh-based kinds train as a normal user in a namespace that enforces Pod Security
"restricted" (docs/security.md, "Non-root"): sshd runs as the image's user `trainer` (uid
1000) on port 2222 with the job's keys under `/home/trainer/.ssh`, readable through the pod's
fsGroup; the engine adds what "restricted" asks of every pod (the runtime's seccomp profile,
no privilege escalation, every capability dropped). The runnable examples, with only the
settings a user of such a namespace writes."""

from __future__ import annotations

import copy
from collections.abc import Iterator
from typing import Any

import pytest
import yaml

from tests.cluster import Cluster, fresh_namespace
from tests.operators import OperatorProcess
from tests.real.jobs import apply, assert_trained, get, job_logs, report
from tests.repo import REPO

USER = {"runAsNonRoot": True, "runAsUser": 1000, "runAsGroup": 1000, "fsGroup": 1000}
SSH = {"authMountPath": "/home/trainer/.ssh", "port": 2222}


@pytest.fixture
def restricted(cluster: Cluster, request: pytest.FixtureRequest) -> Iterator[str]:
    with fresh_namespace(cluster, request.node.name) as name:
        cluster.kubectl(
            "label",
            "namespace",
            name,
            "pod-security.kubernetes.io/enforce=restricted",
            "pod-security.kubernetes.io/enforce-version=latest",
        )
        yield name


def _as_user(path: str) -> dict[str, Any]:
    doc: dict[str, Any] = yaml.safe_load((REPO / path).read_text())
    doc = copy.deepcopy(doc)
    spec = doc["spec"]
    spec["ssh"] = dict(SSH)
    templates = (
        [spec["worker"]["template"]]
        if doc["kind"] == "DeepSpeedJob"
        else [r["template"] for r in spec["replicaSpecs"]]
    )
    for template in templates:
        template["spec"]["securityContext"] = dict(USER)
    return doc


def test_deepspeed_and_colossalai_train_as_a_normal_user_under_restricted(
    cluster: Cluster, restricted: str, operator: OperatorProcess
) -> None:
    docs = [
        _as_user("examples/deepspeedjob/mlp-cpu.yaml"),
        _as_user("examples/colossalaijob/mlp-cpu.yaml"),
    ]
    apply(cluster, restricted, *docs)

    def finished() -> list[dict[str, Any]] | None:
        jobs = [get(cluster, restricted, d["kind"].lower(), d["metadata"]["name"]) for d in docs]
        phases = [(j.get("status") or {}).get("phase") for j in jobs]
        return jobs if all(p in ("Succeeded", "Failed") for p in phases) else None

    jobs = cluster.poll(finished, timeout=900, interval=3, message="both jobs finished")
    world = {"deepspeed-mlp": 3, "colossalai-mlp": 4}
    for job in jobs:
        name = job["metadata"]["name"]
        logs = job_logs(cluster, restricted, name)
        assert job["status"]["phase"] == "Succeeded", f"{name}\n{report(job, logs)}"
        assert_trained(logs, world[name], f"{name} as uid 1000 under restricted")
    pods = get(cluster, restricted, "pods")["items"]
    assert pods, "the launchers are kept"
    for pod in pods:
        context = pod["spec"]["securityContext"]
        assert (context["runAsUser"], context["fsGroup"]) == (1000, 1000), pod["metadata"]["name"]
