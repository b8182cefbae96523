"""The operator on the real control plane, one job of each kind: pods as rendered, status from
Pending to Succeeded, failures named, events recorded, children garbage-collected."""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

import pytest
import yaml

from t9kjobs.testing.harness.simulation import simulate, without_claims
from tests.e2e.jobs import get_json, job_status, watch_phases
from tests.operators import OperatorProcess
from tests.repo import REPO

EXAMPLES = {
    "ColossalAIJob": "examples/colossalaijob/minimal.yaml",
    "DeepSpeedJob": "examples/deepspeedjob/gpt-pretrain.yaml",
    "GenericJob": "examples/genericjob/torch-ddp.yaml",
    "PyTorchTrainingJob": "examples/pytorchtrainingjob/master-worker.yaml",
}
OWNED = "pods,services,configmaps,secrets"


def load(path: str, namespace: str) -> dict[str, Any]:
    doc = dict(yaml.safe_load((REPO / path).read_text()))
    doc["metadata"]["namespace"] = namespace
    return without_claims(doc)


def rendered_pods(doc: dict[str, Any]) -> dict[str, dict[str, Any]]:
    out = subprocess.run(
        [sys.executable, "-m", "t9kjobs.cli.main", "render", "-", "-o", "json"],
        input=yaml.safe_dump(doc),
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return {o["metadata"]["name"]: o for o in json.loads(out) if o["kind"] == "Pod"}


def _containers(pod: dict[str, Any]) -> list[dict[str, Any]]:
    """What the operator sets on containers; the API server adds the service account mount."""
    keys = ("name", "image", "command", "args", "env", "workingDir")
    out = []
    for c in pod["spec"]["containers"]:
        mounts = [
            m for m in c.get("volumeMounts") or [] if not m["name"].startswith("kube-api-access")
        ]
        out.append({**{k: c.get(k) for k in keys}, "volumeMounts": mounts})
    return out


def owned(cluster: Any, doc: dict[str, Any]) -> list[str]:
    meta = doc["metadata"]
    out = cluster.kubectl(
        "get",
        OWNED,
        "-n",
        meta["namespace"],
        "-l",
        f"tensorstack.dev/owner-name={meta['name']}",
        "-o",
        "name",
    ).stdout
    return out.split()


@pytest.mark.parametrize("kind", sorted(EXAMPLES))
def test_job_runs_to_success_and_is_garbage_collected(
    cluster: Any, namespace: str, operator: OperatorProcess, kind: str
) -> None:
    doc = simulate(load(EXAMPLES[kind], namespace), exit_code=0, seconds=4)
    expected = rendered_pods(doc)
    cluster.kubectl("apply", "-f", "-", input=yaml.safe_dump(doc))

    def pods_created() -> dict[str, Any] | None:
        items = get_json(cluster, "pods", "-n", namespace)["items"]
        pods = {p["metadata"]["name"]: p for p in items}
        return pods if set(expected) <= set(pods) else None

    pods = cluster.poll(pods_created, timeout=120, message=f"pods {sorted(expected)}")
    for name, want in expected.items():
        assert _containers(pods[name]) == _containers(want), name
        assert pods[name]["metadata"]["ownerReferences"][0]["kind"] == kind

    phases = watch_phases(cluster, doc, "Succeeded")
    assert "Running" in phases, phases
    status = job_status(cluster, doc)
    names = sorted(r["name"] for t in status["tasks"] for r in t["replicas"])
    assert names == sorted(expected)
    assert sum(status["aggregate"].values()) == len(expected)
    completed = [c for c in status["conditions"] if c["type"] == "Completed"]
    assert completed and completed[0]["status"] == "True"

    events = get_json(
        cluster,
        "events",
        "-n",
        namespace,
        "--field-selector",
        f"involvedObject.name={doc['metadata']['name']}",
    )
    # Its first PodsCreated and its Succeeded are routine Events: posted only with
    # --routine-events (the conditions checked above say the same). Nothing went wrong.
    assert not events["items"], [(e["type"], e["reason"]) for e in events["items"]]

    cluster.kubectl("delete", kind.lower(), doc["metadata"]["name"], "-n", namespace, "--wait=true")
    cluster.poll(
        lambda: not owned(cluster, doc),
        timeout=120,
        message="garbage collection of the job's children",
    )


@pytest.mark.parametrize("kind", sorted(EXAMPLES))
def test_failing_job_names_the_pod_and_exit_code(
    cluster: Any, namespace: str, operator: OperatorProcess, kind: str
) -> None:
    doc = simulate(load(EXAMPLES[kind], namespace), exit_code=3, seconds=1)
    cluster.kubectl("apply", "-f", "-", input=yaml.safe_dump(doc))
    watch_phases(cluster, doc, "Failed", timeout=240)
    failed = [c for c in job_status(cluster, doc)["conditions"] if c["type"] == "Failed"]
    assert failed and failed[0]["status"] == "True"
    assert f"{doc['metadata']['name']}-" in failed[0]["message"]
    assert "exit code 3" in failed[0]["message"]


def test_metrics_health_and_structured_logs(
    cluster: Any, namespace: str, operator: OperatorProcess
) -> None:
    assert operator.get("/healthz")[0] == 200
    assert operator.get("/readyz")[0] == 200
    code, text = operator.get("/metrics", operator.metrics_port)
    assert code == 200
    for metric in (
        "t9kjobs_reconciles_total",
        "t9kjobs_api_requests_total",
        "t9kjobs_workqueue_depth",
        "t9kjobs_kind_served",
    ):
        assert metric in text, metric
    job_lines = [line for line in operator.log_lines() if "job" in line]
    assert job_lines, "no log line names a job"
    assert all("/" in line["job"] and line.get("kind") for line in job_lines)


def test_a_job_the_plugin_rejects_fails_with_the_field_named(
    cluster: Any, namespace: str, operator: OperatorProcess
) -> None:
    doc = simulate(load(EXAMPLES["GenericJob"], namespace))
    doc["spec"]["successRules"] = [{"chief": [0]}]  # admitted by the schema, refused by the plugin
    cluster.kubectl("apply", "-f", "-", input=yaml.safe_dump(doc))
    watch_phases(cluster, doc, "Failed")
    failed = next(c for c in job_status(cluster, doc)["conditions"] if c["type"] == "Failed")
    assert failed["reason"] == "InvalidSpec"
    assert "spec.successRules[0].chief: no replica type 'chief' in the job" in failed["message"]
    events = get_json(cluster, "events", "-n", namespace, "--field-selector", "reason=InvalidSpec")
    assert [e["type"] for e in events["items"]] == ["Warning"]
    assert not owned(cluster, doc)  # nothing was created for it
