"""What the client decides before it sends anything: which job a call names, the checks of a
job before it is created, and the API's refusals as exceptions with field paths. Against the
real control plane: tests/e2e/test_client.py."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest
import yaml
from kubernetes import client as k8s_client

from t9kjobs.client import (
    ApiFailure,
    Client,
    ClientError,
    Forbidden,
    JobExists,
    JobInvalid,
    JobNotFound,
    UnknownKind,
)
from t9kjobs.client.errors import from_api_error
from t9kjobs.kube.transport import ApiError
from t9kjobs.loading import load_job
from t9kjobs.manager import PluginManager
from tests.repo import REPO

EXAMPLE = REPO / "examples/genericjob/mlp-cpu.yaml"


@pytest.fixture
def client(manager: PluginManager) -> Client:
    # An API server nobody listens on: these calls never reach it.
    cfg = k8s_client.Configuration(host="http://127.0.0.1:9")
    return Client(api_client=k8s_client.ApiClient(cfg), namespace="team-a", plugins=manager)


def _example() -> dict:  # type: ignore[type-arg]
    return dict(yaml.safe_load(EXAMPLE.read_text()))


def test_jobs_are_named_every_way(client: Client, manager: PluginManager) -> None:
    assert str(client.ref("gj/mlp")) == "GenericJob/mlp"
    assert client.ref("gj/mlp").namespace == "team-a"
    ref = client.ref("pytorchtrainingjobs", "x", namespace="other")
    assert (ref.info.kind, ref.name, ref.namespace) == ("PyTorchTrainingJob", "x", "other")
    job, _ = load_job({**_example(), "metadata": {"name": "m", "namespace": "ns"}}, manager)
    assert (client.ref(job).name, client.ref(job).namespace) == ("m", "ns")
    with pytest.raises(UnknownKind, match="unknown kind 'tfjob'"):
        client.ref("tfjob/x")
    with pytest.raises(ClientError, match="name a job as KIND/NAME"):
        client.ref("mlp")
    assert "GenericJob" in client.kinds()


def test_a_job_is_checked_as_validate_checks_it(client: Client) -> None:
    doc = _example()
    checked = client.check(doc)
    assert checked["metadata"]["namespace"] == "team-a"  # the client's namespace
    bad = copy.deepcopy(doc)
    bad["spec"]["replicaSpecs"][0]["replicas"] = -1
    bad["spec"]["runPolicy"] = {"backofLimit": 3}
    with pytest.raises(JobInvalid) as refused:
        client.check(bad)
    assert "spec.replicaSpecs[0].replicas" in refused.value.fields
    assert "spec.runPolicy" in refused.value.fields  # an unknown field in it
    assert "did you mean" in str(refused.value)


def test_a_file_a_dict_and_a_model_are_the_same_job(
    client: Client, manager: PluginManager, tmp_path: Path
) -> None:
    from_file = client.check(EXAMPLE)
    from_dict = client.check(_example())
    job, _ = load_job(from_dict, manager)
    from_model = client.check(job)
    assert from_file == from_dict
    again, _ = load_job(from_model, manager)
    assert again.spec == job.spec and again.metadata.name == job.metadata.name
    two = tmp_path / "two.yaml"
    two.write_text(EXAMPLE.read_text() + "\n---\n" + EXAMPLE.read_text())
    with pytest.raises(ClientError, match="holds 2 documents; create one job a call"):
        client.check(two)
    with pytest.raises(ClientError, match=r"cannot read .*missing\.yaml"):
        client.check(tmp_path / "missing.yaml")


def test_render_is_what_the_first_reconcile_creates(client: Client) -> None:
    objects = client.render(EXAMPLE)
    pods = [o["metadata"]["name"] for o in objects if o["kind"] == "Pod"]
    assert pods == ["generic-mlp-master-0", "generic-mlp-worker-0", "generic-mlp-worker-1"]
    assert {o["metadata"]["namespace"] for o in objects} == {"team-a"}


def test_two_namespaces_for_one_job_are_refused(client: Client) -> None:
    doc = _example()
    doc["metadata"]["namespace"] = "team-b"
    assert client.check(doc)["metadata"]["namespace"] == "team-b"
    with pytest.raises(JobInvalid, match=r"metadata\.namespace: 'team-b', but namespace='team-c'"):
        client.check(doc, namespace="team-c")


def test_warnings_are_warnings(client: Client) -> None:
    doc = _example()
    doc["status"] = {"phase": "Running"}
    with pytest.warns(UserWarning, match="status: ignored: the API server drops a submitted"):
        checked = client.check(doc)
    assert "status" not in checked


def test_an_api_client_of_another_kind_is_refused(manager: PluginManager) -> None:
    with pytest.raises(TypeError, match=r"api_client: give a kubernetes\.client\.ApiClient"):
        Client(api_client=object(), plugins=manager)


def test_no_kubeconfig_says_so(manager: PluginManager, tmp_path: Path) -> None:
    with pytest.raises(ClientError, match="no cluster to talk to"):
        Client(kubeconfig=tmp_path / "none", plugins=manager)


def test_the_api_refusals_become_exceptions_with_field_paths() -> None:
    invalid = ApiError(
        422,
        {
            "kind": "Status",
            "reason": "Invalid",
            "message": 'GenericJob.batch.tensorstack.dev "x" is invalid: ...',
            "details": {
                "causes": [
                    {
                        "reason": "FieldValueInvalid",
                        "message": "Invalid value: -1: must be >= 0",
                        "field": "spec.replicaSpecs[0].replicas",
                    }
                ]
            },
            "code": 422,
        },
    )
    found = from_api_error(invalid, "GenericJob/x in namespace a")
    assert isinstance(found, JobInvalid)
    assert found.fields == ["spec.replicaSpecs[0].replicas"]
    assert str(found) == (
        "GenericJob/x in namespace a is invalid: spec.replicaSpecs[0].replicas: Invalid value:"
        " -1: must be >= 0"
    )
    assert isinstance(from_api_error(ApiError(404, {"reason": "NotFound"}), "w"), JobNotFound)
    exists = ApiError(409, {"reason": "AlreadyExists", "message": "exists"})
    assert isinstance(from_api_error(exists, "w"), JobExists)
    assert isinstance(from_api_error(ApiError(403, {"message": "no"}), "w"), Forbidden)
    other = from_api_error(ApiError(500, "<html>oops</html>"), "w")
    assert isinstance(other, ApiFailure) and other.status == 500
    assert str(other) == "HTTP 500: <html>oops</html>"
