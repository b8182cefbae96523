"""Bad jobs on a running operator (#20): none stalls in silence, none stops the operator.

* A child the API server refuses for good fails its job with the server's message (the pods of
  the issue's stalled jobs are now refused when the job is submitted).
* A job nested deeper than Python's JSON decoder goes fails alone: the informer survives it, an
  operator started while it exists becomes ready, a healthy job beside it succeeds.
* `replicas: 2147483648` is refused at admission; stored before the bound existed, it fails its
  job without a pod being built.
* A template that sets the operator's labels (`tensorstack.dev/owner-name` of another job, to
  join its Service) is refused at admission, naming the field (#40).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from t9kjobs.kube.decoding import loads
from t9kjobs.models import API_VERSION
from t9kjobs.testing.harness.simulation import simulate
from tests.operators import OperatorProcess, install_crds, operator_process

CONTAINER = {"name": "main", "image": "busybox", "command": ["sleep", "1"]}


def generic_job(name: str, namespace: str, **replica: Any) -> dict[str, Any]:
    spec = {"type": "worker", "replicas": 1, "template": {"spec": {"containers": [CONTAINER]}}}
    spec.update(replica)
    return {
        "apiVersion": API_VERSION,
        "kind": "GenericJob",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"replicaSpecs": [spec]},
    }


def create(cluster: Any, doc: dict[str, Any] | str, check: bool = True) -> Any:
    text = doc if isinstance(doc, str) else json.dumps(doc)
    return cluster.kubectl("create", "-f", "-", input=text, check=check)


def status(cluster: Any, kind: str, namespace: str, name: str) -> dict[str, Any]:
    # The operator's decoder: Python's gives up on a job nested 1,000 levels deep.
    found = loads(cluster.kubectl("get", kind, name, "-n", namespace, "-o", "json").stdout)
    return dict(found.get("status") or {})


def failed_condition(
    cluster: Any, operator: OperatorProcess, kind: str, namespace: str, name: str
) -> dict[str, Any]:
    def failed() -> dict[str, Any] | None:
        found = status(cluster, kind, namespace, name)
        if found.get("phase") != "Failed":
            return None
        return next(c for c in found["conditions"] if c["type"] == "Failed")

    try:
        return dict(cluster.poll(failed, timeout=60, message=f"{kind} {name} to fail"))
    except AssertionError as exc:
        raise AssertionError(f"{exc}; the operator's log ends:\n{operator.log_tail()}") from exc


def pods(cluster: Any, namespace: str) -> list[str]:
    out = cluster.kubectl("get", "pods", "-n", namespace, "-o", "name").stdout
    return out.split()


def test_a_pod_the_api_server_refuses_fails_its_job_with_the_servers_message(
    cluster: Any, namespace: str, operator: OperatorProcess
) -> None:
    template = {"metadata": {"labels": {"team": "x" * 64}}, "spec": {"containers": [CONTAINER]}}
    create(cluster, generic_job("long-label", namespace, template=template))
    failed = failed_condition(cluster, operator, "genericjob", namespace, "long-label")
    assert failed["reason"] == "ChildRejected"
    assert "refused Pod long-label-worker-0" in failed["message"]
    assert "must be no more than 63" in failed["message"]
    events = json.loads(
        cluster.kubectl(
            "get",
            "events",
            "-n",
            namespace,
            "--field-selector",
            "reason=ChildRejected",
            "-o",
            "json",
        ).stdout
    )
    assert [e["type"] for e in events["items"]] == ["Warning"]


@pytest.mark.parametrize(
    ("change", "says"),
    [
        ({"template": {"spec": {"containers": [{"name": "main"}]}}}, "image: Required value"),
        (
            {"template": {"spec": {"containers": [{**CONTAINER, "name": "Main"}]}}},
            "containers[0].name: Invalid value",
        ),
        (
            {"template": {"spec": {"containers": [{**CONTAINER, "env": "A=B"}]}}},
            "env: Invalid value",
        ),
    ],
    ids=["no-image", "uppercase-container-name", "env-a-string"],
)
def test_the_stalled_jobs_of_the_issue_are_refused_at_admission(
    cluster: Any, namespace: str, operator: OperatorProcess, change: dict[str, Any], says: str
) -> None:
    done = create(cluster, generic_job("stalled", namespace, **change), check=False)
    assert done.returncode != 0 and says in done.stderr, done.stderr


def test_two_service_ports_80_are_refused_at_admission(
    cluster: Any, namespace: str, operator: OperatorProcess
) -> None:
    doc = generic_job("ports", namespace)
    doc["spec"]["service"] = {"ports": [{"name": "a", "port": 80}, {"name": "b", "port": 80}]}
    done = create(cluster, doc, check=False)
    assert done.returncode != 0 and "each port and protocol may appear only once" in done.stderr, (
        done.stderr
    )


def test_a_template_setting_the_operators_labels_is_refused_at_admission(
    cluster: Any, namespace: str, operator: OperatorProcess
) -> None:
    labels = {"tensorstack.dev/owner-name": "victim"}
    template = {"metadata": {"labels": labels}, "spec": {"containers": [CONTAINER]}}
    done = create(cluster, generic_job("thief", namespace, template=template), check=False)
    assert done.returncode != 0, done.stdout
    assert "spec.replicaSpecs[0].template.metadata.labels" in done.stderr, done.stderr
    assert "label key `tensorstack.dev/owner-name` is reserved for the operator" in done.stderr, (
        done.stderr
    )
    assert pods(cluster, namespace) == []


def _deep(name: str, namespace: str, depth: int) -> str:
    doc = {
        "apiVersion": API_VERSION,
        "kind": "DeepSpeedJob",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "config": {"run": {"python": ["train.py"]}},
            "worker": {
                "replicas": 1,
                "template": {"spec": {"containers": [CONTAINER], "deep": "NESTED"}},
            },
        },
    }
    return json.dumps(doc).replace('"NESTED"', "[" * depth + "]" * depth)


def test_a_job_nested_too_deep_fails_alone_and_the_operator_stays_ready(
    cluster: Any, namespace: str, operator: OperatorProcess, tmp_path: Path
) -> None:
    # 1,000 levels broke the watch (Python's decoder gives up); 5,000, the list as well.
    for name, depth in (("deep-1000", 1000), ("deep-5000", 5000)):
        create(cluster, _deep(name, namespace, depth))
    healthy = simulate(generic_job("healthy", namespace), seconds=1)
    create(cluster, healthy)
    for name in ("deep-1000", "deep-5000"):
        failed = failed_condition(cluster, operator, "deepspeedjob", namespace, name)
        assert failed["reason"] == "InvalidSpec"
        assert "nested deeper than 100 levels" in failed["message"]
    cluster.poll(
        lambda: status(cluster, "genericjob", namespace, "healthy").get("phase") == "Succeeded",
        timeout=120,
        message="the healthy job to succeed",
    )
    assert not [p for p in pods(cluster, namespace) if "deep" in p]
    # An operator started while they exist lists them, gets ready, and serves the namespace.
    fresh = operator_process(cluster, "--namespace", namespace, log=tmp_path / "fresh.log")
    try:
        fresh.wait_ready(timeout=60)
        create(cluster, simulate(generic_job("after", namespace), seconds=1))
        cluster.poll(
            lambda: status(cluster, "genericjob", namespace, "after").get("phase") == "Succeeded",
            timeout=120,
            message="a job created after them to succeed",
        )
        troubles = [
            line
            for line in fresh.log_lines()
            if "deepspeedjobs" in str(line.get("msg", "")) and line.get("level") != "info"
        ]
        assert troubles == [], yaml.safe_dump(troubles[:3])
    finally:
        fresh.stop()


def test_huge_replicas_are_refused_at_admission_and_fail_a_stored_job(
    cluster: Any, namespace: str, operator: OperatorProcess
) -> None:
    done = create(cluster, generic_job("huge", namespace, replicas=2147483648), check=False)
    assert done.returncode != 0 and "less than or equal to 1000" in done.stderr, done.stderr
    # As if stored before the bound existed: the CRD without it, for the time of one create.
    crd = "crd/genericjobs.batch.tensorstack.dev"
    replicas = "/spec/versions/0/schema/openAPIV3Schema/properties/spec/properties/replicaSpecs"
    unbound = [
        {"op": "remove", "path": f"{replicas}/items/properties/replicas/maximum"},
        {"op": "remove", "path": f"{replicas}/x-kubernetes-validations/1"},
    ]
    cluster.kubectl("patch", crd, "--type=json", "-p", json.dumps(unbound))
    try:
        cluster.poll(
            lambda: (
                create(
                    cluster, generic_job("huge", namespace, replicas=2147483648), check=False
                ).returncode
                == 0
            ),
            timeout=60,
            message="the CRD without its bound to be served",
        )
    finally:
        install_crds(cluster)
    failed = failed_condition(cluster, operator, "genericjob", namespace, "huge")
    assert failed["reason"] == "InvalidSpec"
    assert "spec.replicaSpecs[0].replicas: must be <= 1000" in failed["message"]
    assert pods(cluster, namespace) == []
