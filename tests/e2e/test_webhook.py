"""One verdict at admission (#52): `kubectl` refuses every job `t9kjobs validate` refuses, in
validate's words, while the operator serves its admission webhook; and what happens while no
replica serves it, under each failure policy.

The webhook is registered as the chart registers it (rules, match conditions, failure policy;
`t9kjobs.testing.harness.webhook`), calling this module's operator at 127.0.0.1.

* `Fail` (the chart's default): an invalid job is refused with the field, the same line
  `validate` prints; a warning that is no refusal reaches kubectl as `Warning:`; a valid job is
  admitted and runs; a spec change that makes it invalid is refused.
* Operator stopped, `Fail`: creating a job or changing its spec is refused with the API server's
  "failed calling webhook"; a label change and a deletion are not (the match conditions).
* Operator stopped, `Ignore`: the invalid job is admitted, and the operator, back, fails it
  (`InvalidSpec`, naming the field): the verdict after admission of today.
* A queued job valid at admission whose pods the API server refuses fails before its Workload
  is made (Kueue beside the cluster).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import yaml

from t9kjobs.testing.harness.simulation import simulate
from tests.cluster import Cluster
from tests.e2e.jobs import Kube, condition, until
from tests.operators import REPO, Operators

WEBHOOK = "Fail"

EXAMPLES = REPO / "examples"
KUEUE = "/apis/kueue.x-k8s.io/v1beta2"
INVALID = EXAMPLES / "genericjob/invalid/rule-names-unknown-type.yaml"


def _validate(path: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "t9kjobs.cli.main", "validate", str(path)],
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )


def _create(cluster: Cluster, namespace: str, doc: dict[str, Any], *extra: str) -> Any:
    return cluster.kubectl(
        "create", "-n", namespace, "-f", "-", *extra, input=json.dumps(doc), check=False
    )


def _jobs(cluster: Cluster, namespace: str) -> list[str]:
    found = cluster.kubectl("get", "t9k", "-n", namespace, "-o", "name").stdout
    return found.split()


def test_kubectl_refuses_what_validate_refuses_in_its_words(
    cluster: Cluster, namespace: str, operators: Operators
) -> None:
    said = _validate(INVALID)
    problem = said.stderr.strip().partition(": ")[2]  # validate's line but the file's name
    assert said.returncode == 1 and problem.startswith("spec.successRules[0].chief"), said.stderr
    doc = yaml.safe_load(INVALID.read_text())
    for extra in (("--dry-run=server",), ()):
        refused = _create(cluster, namespace, doc, *extra)
        assert refused.returncode != 0, refused.stdout
        assert 'admission webhook "jobs.batch.tensorstack.dev" denied the request' in (
            refused.stderr
        )
        assert problem in refused.stderr, refused.stderr
    assert _jobs(cluster, namespace) == []


def test_warnings_reach_kubectl_and_a_valid_job_is_admitted_and_runs(
    cluster: Cluster, namespace: str, operators: Operators
) -> None:
    deepspeed = yaml.safe_load((EXAMPLES / "deepspeedjob/mlp-cpu.yaml").read_text())
    deepspeed["spec"]["worker"]["template"]["spec"]["containers"][0]["command"] = ["sleep"]
    created = _create(cluster, namespace, deepspeed, "--dry-run=server")
    assert created.returncode == 0, created.stderr
    assert "Warning: spec.worker.template.spec.containers[0].command: ignored" in (created.stderr)
    generic = simulate(yaml.safe_load((EXAMPLES / "genericjob/mlp-cpu.yaml").read_text()))
    assert _create(cluster, namespace, generic).returncode == 0
    kube = Kube(cluster, namespace)
    kube.wait_phase(generic, "Succeeded")
    # A spec change that makes the job invalid is refused as its creation would be; its
    # labels may change (no spec change: the webhook is not even called).
    name = f"genericjob/{generic['metadata']['name']}"
    patch = json.dumps({"spec": {"successRules": [{"chief": [0]}]}})
    changed = cluster.kubectl(
        "patch", name, "-n", namespace, "--type=merge", "-p", patch, check=False
    )
    assert changed.returncode != 0 and "spec.successRules[0].chief" in changed.stderr
    cluster.kubectl("label", name, "-n", namespace, "team=a")


def test_while_no_replica_serves_fail_refuses_creations_and_spec_changes_only(
    cluster: Cluster, namespace: str, operators: Operators
) -> None:
    job = yaml.safe_load((EXAMPLES / "genericjob/mlp-cpu.yaml").read_text())
    assert _create(cluster, namespace, job).returncode == 0
    name = f"genericjob/{job['metadata']['name']}"
    operators.current.stop()
    try:
        other = {**job, "metadata": {"name": "while-down"}}
        refused = _create(cluster, namespace, other)
        assert refused.returncode != 0 and "failed calling webhook" in refused.stderr, (
            refused.stderr
        )
        patch = json.dumps({"spec": {"failureRules": [{"master": [0]}]}})  # a valid change
        changed = cluster.kubectl(
            "patch", name, "-n", namespace, "--type=merge", "-p", patch, check=False
        )
        assert changed.returncode != 0 and "failed calling webhook" in changed.stderr
        # What never depends on the webhook: metadata, and deletion.
        cluster.kubectl("label", name, "-n", namespace, "team=a")
        cluster.kubectl("delete", name, "-n", namespace, "--wait=true")
    finally:
        operators.start()
    assert _jobs(cluster, namespace) == []


def test_under_ignore_the_operator_fails_after_admission_what_it_could_not_refuse(
    cluster: Cluster, namespace: str, operators: Operators
) -> None:
    doc = yaml.safe_load(INVALID.read_text())
    operators.current.stop()
    operators.set_failure_policy("Ignore")
    try:
        # Refused until the API server uses the new configuration, then admitted.
        until(
            lambda: _create(cluster, namespace, doc).returncode == 0,
            "the job admitted under Ignore",
            timeout=30,
        )
    finally:
        operators.start()
        operators.set_failure_policy("Fail")
    failed = Kube(cluster, namespace).wait_phase(doc, "Failed", timeout=60)
    reason = condition(failed, "Failed")
    assert reason["reason"] == "InvalidSpec", reason
    assert "spec.successRules[0].chief" in reason["message"], reason


def test_a_queued_job_whose_pods_the_api_server_refuses_fails_before_its_workload(
    cluster: Cluster, namespace: str, operators: Operators
) -> None:
    """What validate cannot know, a pod the API server refuses (a GPU count that is not a
    whole number), is found by the dry run of the queued job's children: the job fails before
    its Workload is made, so Kueue never admits it nor reserves quota for it."""
    kube = Kube(cluster, namespace)
    served = kube.http.request("GET", KUEUE).get("resources") or []
    assert any(r["name"] == "workloads" for r in served), "Kueue does not run beside the cluster"
    job = simulate(yaml.safe_load((EXAMPLES / "genericjob/mlp-cpu.yaml").read_text()))
    job["metadata"]["labels"] = {"kueue.x-k8s.io/queue-name": "team"}
    container = job["spec"]["replicaSpecs"][0]["template"]["spec"]["containers"][0]
    container["resources"] = {"limits": {"nvidia.com/gpu": 0.5}}
    created = _create(cluster, namespace, job)
    assert created.returncode == 0, created.stderr  # validate has nothing against it
    failed = kube.wait_phase(job, "Failed", timeout=60)
    reason = condition(failed, "Failed")
    assert reason["reason"] == "ChildRejected" and "nvidia.com/gpu" in reason["message"], reason
    workloads = kube.http.request("GET", f"{KUEUE}/namespaces/{namespace}/workloads")
    assert workloads["items"] == []
