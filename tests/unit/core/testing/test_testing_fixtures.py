"""t9kjobs.testing.fixtures: the public helpers a plugin's own unit tests are written with."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from t9kjobs.loading import JobError
from t9kjobs.testing.fixtures import (
    apply_plan,
    first_reconcile,
    job_from_yaml,
    objects_of,
    pod_in_phase,
    reconcile,
    reconcile_with,
)
from tests.repo import REPO

MASTER_WORKER = REPO / "examples" / "pytorchtrainingjob" / "master-worker.yaml"
NAME = "torch-mnist-trainingjob"


def test_a_job_from_a_file_text_or_dict_is_the_same() -> None:
    text = MASTER_WORKER.read_text()
    from_file = job_from_yaml(MASTER_WORKER)
    assert from_file.kind == "PyTorchTrainingJob" and from_file.name == NAME
    assert job_from_yaml(text) == from_file
    assert job_from_yaml(yaml.safe_load(text)) == from_file


def test_a_refused_job_names_its_field_paths() -> None:
    doc = yaml.safe_load(MASTER_WORKER.read_text())
    doc["spec"]["replicaSpecs"][0]["replicas"] = -1
    with pytest.raises(JobError) as refused:
        job_from_yaml(doc)
    assert [p.path for p in refused.value.problems] == ["spec.replicaSpecs[0].replicas"]


def test_a_job_refused_by_its_plugin_is_refused_too(tmp_path: Path) -> None:
    doc = yaml.safe_load(MASTER_WORKER.read_text())
    doc["spec"]["replicaSpecs"][0]["template"]["spec"]["containers"] = []
    path = tmp_path / "job.yaml"
    path.write_text(yaml.safe_dump(doc))
    with pytest.raises(JobError, match=r"spec\.replicaSpecs\[0\]\.template\.spec\.containers"):
        job_from_yaml(path)


def test_first_reconcile_creates_the_objects_by_kind_and_name() -> None:
    plan = first_reconcile(job_from_yaml(MASTER_WORKER))
    pods = objects_of(plan, "Pod")
    assert sorted(pods) == [f"{NAME}-master-0", *(f"{NAME}-worker-{i}" for i in range(3))]
    assert list(objects_of(plan, "TensorBoard")) == [NAME]
    assert list(objects_of(plan.create, "Service")) == [NAME]


def test_an_absent_kind_is_left_out() -> None:
    plan = first_reconcile(job_from_yaml(MASTER_WORKER), absent_kinds=["TensorBoard"])
    assert objects_of(plan, "TensorBoard") == {}
    degraded = plan.status.condition("Degraded")
    assert degraded is not None and degraded.status == "True"


def test_pod_in_phase_reports_each_container() -> None:
    pod = objects_of(first_reconcile(job_from_yaml(MASTER_WORKER)), "Pod")[f"{NAME}-worker-0"]
    failed = pod_in_phase(pod, "Failed", 137)
    assert failed["status"]["phase"] == "Failed"
    (state,) = failed["status"]["containerStatuses"]
    assert state["state"]["terminated"] == {"exitCode": 137, "reason": "Error"}
    assert pod_in_phase(pod, "Succeeded")["status"]["containerStatuses"][0]["state"] == {
        "terminated": {"exitCode": 0, "reason": "Completed"}
    }
    assert "status" not in pod  # a copy


def test_applying_a_plan_gives_the_cluster_after_it() -> None:
    job = job_from_yaml(MASTER_WORKER)
    children = apply_plan({}, first_reconcile(job))
    assert ("Pod", f"{NAME}-master-0") in children
    again = reconcile(job, children.values())
    assert not again.create  # everything exists


def test_reconcile_with_gives_the_verdict() -> None:
    job = job_from_yaml(MASTER_WORKER)
    assert reconcile_with(job, {}).status.phase == "Running"
    done = reconcile_with(job, {f"{NAME}-master-0": ("Succeeded", 0)})
    assert done.status.phase == "Succeeded"
    lost = reconcile_with(job, {f"{NAME}-worker-2": ("Failed", 1)})
    assert lost.status.phase == "Failed"  # the example's ExitCode policy: 1 is not retried


def test_reconcile_with_refuses_a_pod_the_job_lacks() -> None:
    with pytest.raises(ValueError, match="no pod named job-worker-9"):
        reconcile_with(job_from_yaml(MASTER_WORKER), {"job-worker-9": ("Failed", 1)})
