"""The job `Client.train` builds (`Client.function_job`, the plugins' `t9kjobs_function_spec`):
each kind's spec, the pods the operator would create from it, and the kinds that cannot."""

from __future__ import annotations

import json
from typing import Any

import pytest
from kubernetes import client as k8s_client

from t9kjobs.client import Client, ClientError, UnknownKind
from t9kjobs.client.runner import (
    BOOTSTRAP,
    DISTRIBUTED_ENV,
    FUNCTION_ENV,
    NAME_ENV,
    PACKAGES_ENV,
    RUNNER_ENV,
)
from t9kjobs.manager import PluginManager
from t9kjobs.models import Job


def fit(epochs: int, *, rank: int) -> None:
    """The function the jobs run."""
    print(epochs, rank)


@pytest.fixture
def client(manager: PluginManager) -> Client:
    cfg = k8s_client.Configuration(host="http://127.0.0.1:9")  # nothing is sent here
    return Client(api_client=k8s_client.ApiClient(cfg), namespace="team-a", plugins=manager)


def _env(container: dict[str, Any]) -> dict[str, str]:
    return {e["name"]: e["value"] for e in container["env"]}


def _pods(client: Client, job: Job) -> dict[str, dict[str, Any]]:
    return {o["metadata"]["name"]: o for o in client.render(job) if o["kind"] == "Pod"}


def test_pytorch_runs_the_function_under_torchrun(client: Client) -> None:
    job = client.function_job(
        fit,
        kwargs={"epochs": 3},
        nodes=2,
        procs_per_node=4,
        image="trainer:1",
        resources={"cpu": 2},
        env={"HF_HOME": "/cache"},
        packages=["tqdm==4.67.1"],
        name="fit",
        labels={"team": "a"},
    )
    assert (job.kind, job.name, job.namespace) == ("PyTorchTrainingJob", "fit", "team-a")
    assert job.metadata.labels == {"team": "a"}
    pods = _pods(client, job)
    assert sorted(pods) == ["fit-master-0", "fit-worker-0"]
    container = pods["fit-worker-0"]["spec"]["containers"][0]
    argv = container["command"]
    assert argv[0] == "torchrun" and "--nproc_per_node=4" in argv and "--nnodes=2" in argv
    assert argv[-4:] == ["--no_python", "python3", "-c", BOOTSTRAP]
    assert container["image"] == "trainer:1"
    assert container["resources"] == {"limits": {"cpu": "2"}, "requests": {"cpu": "2"}}
    env = _env(container)
    assert "def fit(epochs: int, *, rank: int) -> None:" in json.loads(env[FUNCTION_ENV])
    assert env[NAME_ENV] == "fit" and env[DISTRIBUTED_ENV] == "torch"
    assert env["HF_HOME"] == "/cache"
    assert json.loads(env[PACKAGES_ENV]) == ["tqdm==4.67.1"]
    assert "def main() -> int:" in json.loads(env[RUNNER_ENV])


def test_a_generic_job_runs_one_process_a_worker_with_torchs_variables(client: Client) -> None:
    job = client.function_job(fit, (1,), kind="gj", nodes=3, image="trainer:1", name="g")
    pods = _pods(client, job)
    assert sorted(pods) == ["g-worker-0", "g-worker-1", "g-worker-2"]
    container = pods["g-worker-2"]["spec"]["containers"][0]
    assert container["command"] == ["python3", "-c", BOOTSTRAP]
    env = _env(container)
    assert (env["RANK"], env["WORLD_SIZE"], env["MASTER_ADDR"]) == ("2", "3", "g-worker-0")
    assert DISTRIBUTED_ENV not in env  # nothing to join: the function meets its peers
    with pytest.raises(ClientError, match="a GenericJob pod runs one process"):
        client.function_job(fit, (1,), kind="GenericJob", procs_per_node=2, image="x")


def test_deepspeed_runs_the_function_on_every_slot(client: Client) -> None:
    job = client.function_job(fit, (1,), kind="DeepSpeedJob", nodes=2, procs_per_node=2, image="x")
    spec = job.spec.model_dump(by_alias=True, exclude_none=True)
    assert spec["config"]["run"]["exec"] == ["python3", "-c", BOOTSTRAP]
    assert spec["config"]["slotsPerWorker"] == 2 and spec["config"]["localRank"] is False
    assert spec["worker"]["replicas"] == 2
    assert job.metadata.generate_name == "fit-"
    assert "name" not in client.check(job)["metadata"]  # the server names it
    launcher = next(p for name, p in _pods(client, job).items() if name.endswith("-worker-0"))
    assert "--no_python" in " ".join(launcher["spec"]["containers"][0]["command"])


def test_a_kind_whose_plugin_runs_no_function_says_which_do(client: Client) -> None:
    with pytest.raises(UnknownKind) as caught:
        client.function_job(fit, (1,), kind="ColossalAIJob", image="x")
    said = str(caught.value)
    assert "ColossalAIJob cannot run a function" in said
    assert "DeepSpeedJob, GenericJob, PyTorchTrainingJob" in said


def test_the_cluster_needs_an_image(client: Client) -> None:
    with pytest.raises(ClientError, match="image="):
        client.function_job(fit, (1,))
