"""Day two on KWOK nodes: `t9kjobs describe`, `logs` for a cleaned-up replica, `kubectl get t9k`
columns, `kubectl scale` on elastic and non-elastic jobs, `kubectl t9k` and completion, against
the operator and the local control plane (docs/observability.md).

KWOK runs no container, so pod logs exist only on the real node (tests/real/test_day_two.py);
here describe must say that a log cannot be read and still show everything else.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tomllib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from t9kjobs.testing.harness.simulation import SIM_EXIT_CODE, SIM_RUN_SECONDS
from tests.cluster import Cluster, fresh_namespace
from tests.operators import OperatorProcess
from tests.repo import REPO

VENV_BIN = Path(sys.executable).parent


def template(exit_code: int, seconds: int) -> dict[str, Any]:
    return {
        "metadata": {"annotations": {SIM_EXIT_CODE: str(exit_code), SIM_RUN_SECONDS: str(seconds)}},
        "spec": {"containers": [{"name": "trainer", "image": "busybox", "command": ["train"]}]},
    }


def generic(name: str, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "batch.tensorstack.dev/v1beta1",
        "kind": "GenericJob",
        "metadata": {"name": name},
        "spec": spec,
    }


def pytorch(name: str, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "batch.tensorstack.dev/v1beta1",
        "kind": "PyTorchTrainingJob",
        "metadata": {"name": name},
        "spec": {
            "replicaSpecs": [{"type": "worker", "replicas": 2, "template": template(0, 600)}],
            **spec,
        },
    }


# A worker that fails twice (restart limit 1) fails the job; cleanup deletes every pod.
BROKEN = generic(
    "broken",
    cleanUpPolicy="All",
    replicaSpecs=[
        {"type": "master", "replicas": 1, "template": template(0, 600)},
        {
            "type": "worker",
            "replicas": 1,
            "restartPolicy": {"policy": "OnFailure", "limit": 1},
            "template": template(3, 2),
        },
    ],
)
STEADY = generic(
    "steady", replicaSpecs=[{"type": "worker", "replicas": 2, "template": template(0, 600)}]
)


def t9kjobs(
    cluster: Cluster, *args: str, prog: str = "t9kjobs"
) -> subprocess.CompletedProcess[str]:
    """The command as a user runs it (`kubectl t9k ...` with prog kubectl)."""
    env = {**os.environ, "KUBECONFIG": str(cluster.kubeconfig)}
    env["PATH"] = f"{VENV_BIN}:{cluster.bin_dir}:{env.get('PATH', '')}"
    argv = [str(cluster.kubectl_path), "t9k"] if prog == "kubectl" else [str(VENV_BIN / prog)]
    return subprocess.run([*argv, *args], capture_output=True, text=True, env=env, timeout=120)


def apply(cluster: Cluster, namespace: str, *docs: dict[str, Any]) -> None:
    stream = json.dumps({"apiVersion": "v1", "kind": "List", "items": list(docs)})
    cluster.kubectl("-n", namespace, "apply", "-f", "-", input=stream)


def job(cluster: Cluster, namespace: str, kind: str, name: str) -> dict[str, Any]:
    out = cluster.kubectl("-n", namespace, "get", kind, name, "-o", "json").stdout
    return dict(json.loads(out))


@pytest.fixture(scope="module")
def jobs(cluster: Cluster, operator: OperatorProcess) -> Iterator[str]:
    """One failed and one running GenericJob, in a namespace of this module."""
    with fresh_namespace(cluster, "day-two") as namespace:
        apply(cluster, namespace, BROKEN, STEADY)
        cluster.poll(
            lambda: _settled(cluster, namespace), timeout=120, interval=1, message="jobs settled"
        )
        yield namespace


def _settled(cluster: Cluster, namespace: str) -> bool:
    """broken Failed with its pods cleaned up, steady running both replicas."""

    broken = job(cluster, namespace, "gj", "broken").get("status") or {}
    steady = job(cluster, namespace, "gj", "steady").get("status") or {}
    pods = cluster.kubectl("-n", namespace, "get", "pods", "-o", "name").stdout
    return (
        broken.get("phase") == "Failed" and "broken-" not in pods and (steady.get("ready") == "2/2")
    )


def test_kubectl_get_shows_replicas_restarts_and_reason(cluster: Cluster, jobs: str) -> None:
    table = cluster.kubectl("get", "t9k", "-n", jobs).stdout.splitlines()
    assert table[0].split() == ["NAME", "PHASE", "REPLICAS", "RESTARTS", "REASON", "AGE"]
    rows = {line.split()[0]: line.split()[1:] for line in table[1:]}
    assert rows["genericjob.batch.tensorstack.dev/broken"][:4] == [
        "Failed",
        "0/2",
        "1",
        "ReplicaFailed",
    ], table
    assert rows["genericjob.batch.tensorstack.dev/steady"][:3] == ["Running", "2/2", "0"], table
    wide = cluster.kubectl("get", "gj", "steady", "-n", jobs, "-o", "wide").stdout.splitlines()
    assert wide[0].split()[6:] == ["INFRA", "MODE", "PROGRESS", "QUEUE", "STARTED", "FINISHED"]
    # read by the header's position: a running job's REASON is empty, so split() shifts
    assert wide[1][wide[0].index("MODE") :].split()[0] == "Immediate", wide


def test_describe_a_failed_job(cluster: Cluster, jobs: str) -> None:
    out = t9kjobs(cluster, "describe", "gj/broken", "-n", jobs)
    assert out.returncode == 0, out.stderr
    text = out.stdout
    assert all(len(line) <= 80 for line in text.splitlines()), text
    lines = text.splitlines()
    assert lines[:3] == ["Name:       broken", f"Namespace:  {jobs}", "Kind:       GenericJob"]
    assert lines[3].startswith("Phase:      Failed for ")
    # Conditions, with the failure's message under it.
    assert any(line.split()[:3] == ["Failed", "True", "ReplicaFailed"] for line in lines), text
    assert "broken-worker-0 failed with exit code 3 (container trainer)" in " ".join(text.split())
    # Replicas: the worker failed after one restart, exit code 3; its pod and log are gone.
    replicas = lines[lines.index("Replicas:") + 2 :]
    assert replicas[0].split() == ["master", "1", "0", "0", "0", "0"], text
    assert replicas[1].split() == ["worker", "1", "0", "0", "1", "1"], text
    assert "  worker-0: Failed, exit code 3, Error, container trainer, 1 restart(s)" in lines, text
    assert "    (the pod is gone, and its log with it)" in lines
    assert "  master-0, worker-0: train" in lines, text
    assert "Cleanup:    policy All; deleted master-0, worker-0; 0 pod(s) left" in lines, text
    events = text[text.index("Events:") :]
    for reason in ("PodsCreated", "Restarting", "Failed"):
        assert (
            f"Warning  {reason}" in events
            or f"Normal  {reason}" in events
            or (f"{reason}  GenericJob/broken" in events)
        ), events

    facts = json.loads(t9kjobs(cluster, "describe", "gj/broken", "-n", jobs, "-o", "json").stdout)
    assert facts["phase"] == "Failed" and facts["elapsedSeconds"] > 0
    (worker,) = [r for r in facts["replicas"] if r["type"] == "worker"]
    assert worker["failedOrRestarted"][0] | {"lastLogLines": []} == {
        "replica": "worker-0",
        "pod": "broken-worker-0",
        "phase": "Failed",
        "restarts": 1,
        "container": "trainer",
        "exitCode": 3,
        "reason": "Error",
        "lastLogLines": [],
        "noLog": "the pod is gone, and its log with it",
    }
    assert facts["cleanup"]["deletedReplicas"] == ["master-0", "worker-0"]
    assert {e["reason"] for e in facts["events"]} >= {"PodsCreated", "Restarting", "Failed"}


def test_describe_a_running_job(cluster: Cluster, jobs: str) -> None:
    out = t9kjobs(cluster, "describe", "genericjob/steady", "-n", jobs)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert all(len(line) <= 80 for line in lines), out.stdout
    assert lines[3].startswith("Phase:      Running for ")
    assert any(line.startswith("Started:    ") and "(running " in line for line in lines)
    replicas = lines[lines.index("Replicas:") + 2]
    assert replicas.split() == ["worker", "2", "2", "0", "0", "0"]
    assert "Cleanup:    policy None; applies when the job finishes" in lines
    # KWOK serves no logs: no progress line, and nothing failed whose log describe would read.
    assert not any(line.startswith("Progress:") for line in lines)


def test_logs_of_a_cleaned_up_replica_and_of_no_such_replica(cluster: Cluster, jobs: str) -> None:
    gone = t9kjobs(cluster, "logs", "gj/broken", "worker-0", "-n", jobs)
    assert gone.returncode == 1
    assert gone.stderr.strip() == (
        "t9kjobs: worker-0: the pod broken-worker-0 was deleted when GenericJob/broken finished"
        " (Failed), by its cleanup policy: its log went with it (a cleanup policy of None keeps"
        " the pods, and their logs, of finished jobs)"
    )
    wrong = t9kjobs(cluster, "logs", "gj/steady", "worker-7", "-n", jobs)
    assert wrong.returncode == 1
    assert wrong.stderr.strip() == (
        "t9kjobs: GenericJob/steady has no replica 'worker-7'; its replicas: worker-0, worker-1"
    )
    missing = t9kjobs(cluster, "describe", "gj/nothing", "-n", jobs)
    assert (missing.returncode, missing.stderr.strip()) == (
        1,
        f"t9kjobs: GenericJob/nothing not found in namespace {jobs}",
    )
    for out in (gone, wrong, missing):
        assert "Traceback" not in out.stderr


def test_kubectl_plugin_form(cluster: Cluster, jobs: str) -> None:
    out = t9kjobs(cluster, "describe", "gj/steady", "-n", jobs, prog="kubectl")
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines()[0] == "Name:       steady"
    version = t9kjobs(cluster, "--version", prog="kubectl")
    ours = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["version"]
    assert version.stdout.startswith(f"t9kjobs {ours} ")
    rows = [line.split() for line in version.stdout.splitlines()]
    assert ["generic", "t9k-jobs", ours, "bundled", "GenericJob"] in rows, version.stdout
    refused = t9kjobs(cluster, "logs", "gj/none", "-n", jobs, prog="kubectl")
    assert refused.stderr.startswith("kubectl t9k: GenericJob/none not found")


def _complete(cluster: Cluster, line: str, tmp_path: Path) -> list[str]:
    """What the completion script would offer for `line` (argcomplete's protocol)."""
    out = tmp_path / "completions"
    env = {
        **os.environ,
        "KUBECONFIG": str(cluster.kubeconfig),
        "_ARGCOMPLETE": "1",
        "_ARGCOMPLETE_SHELL": "bash",
        "_ARGCOMPLETE_IFS": "\n",
        "_ARGCOMPLETE_STDOUT_FILENAME": str(out),
        "COMP_LINE": line,
        "COMP_POINT": str(len(line)),
    }
    subprocess.run([str(VENV_BIN / "t9kjobs")], env=env, timeout=60, check=False)
    return sorted(w.strip() for w in out.read_text().split("\n")) if out.exists() else []


def test_completion_offers_kinds_jobs_and_replicas(
    cluster: Cluster, jobs: str, tmp_path: Path
) -> None:
    assert "describe" in _complete(cluster, "t9kjobs desc", tmp_path)
    assert _complete(cluster, "t9kjobs describe g", tmp_path) == [
        "genericjob/",
        "genericjobs/",
        "gj/",
    ]
    assert _complete(cluster, f"t9kjobs logs -n {jobs} gj/st", tmp_path) == ["gj/steady"]
    assert _complete(cluster, f"t9kjobs logs -n {jobs} gj/steady w", tmp_path) == [
        "worker-0",
        "worker-1",
    ]
    # kubectl's own completion of `kubectl t9k ...` runs kubectl_complete-t9k from the PATH.
    env = {**os.environ, "KUBECONFIG": str(cluster.kubeconfig)}
    env["PATH"] = f"{VENV_BIN}:{env.get('PATH', '')}"
    words = ["__complete", "t9k", "logs", "-n", jobs, "gj/st"]
    answer = subprocess.run(
        [str(cluster.kubectl_path), *words], capture_output=True, text=True, env=env, timeout=60
    )
    assert answer.stdout.splitlines()[:2] == ["gj/steady", ":4"], answer.stdout + answer.stderr


def test_scale_tells_the_truth(cluster: Cluster, namespace: str, operator: OperatorProcess) -> None:
    elastic = {"enabled": True, "minReplicas": 1, "maxReplicas": 3, "expectedReplicas": 2}
    apply(cluster, namespace, pytorch("fixed"), pytorch("stretchy", elastic=elastic))
    refused = cluster.kubectl("scale", "ptj/fixed", "--replicas=3", "-n", namespace, check=False)
    assert refused.returncode != 0
    assert "this PyTorchTrainingJob is not elastic (spec.elastic.enabled is not true)" in (
        refused.stderr
    )
    assert "InternalError" not in refused.stderr
    assert "elastic" not in job(cluster, namespace, "ptj", "fixed")["spec"]

    scaled = cluster.kubectl("scale", "ptj/stretchy", "--replicas=3", "-n", namespace)
    assert "scaled" in scaled.stdout
    assert job(cluster, namespace, "ptj", "stretchy")["spec"]["elastic"]["expectedReplicas"] == 3
    cluster.poll(
        lambda: (
            (job(cluster, namespace, "ptj", "stretchy").get("status") or {}).get("ready") == "3/3"
        ),
        timeout=60,
        message="stretchy runs 3 replicas",
    )
    above = cluster.kubectl("scale", "ptj/stretchy", "--replicas=4", "-n", namespace, check=False)
    assert above.returncode != 0 and "expectedReplicas must be <= maxReplicas" in above.stderr
    below = cluster.kubectl("scale", "ptj/stretchy", "--replicas=0", "-n", namespace, check=False)
    assert below.returncode != 0 and "expectedReplicas must be >= minReplicas" in below.stderr
    assert job(cluster, namespace, "ptj", "stretchy")["spec"]["elastic"]["expectedReplicas"] == 3
