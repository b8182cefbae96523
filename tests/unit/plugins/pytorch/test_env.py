"""The env contract: every pod agrees on the master, ranks are distinct, sizes add up."""

from __future__ import annotations

from collections.abc import Callable

from t9kjobs.loading import parse_job
from t9kjobs.manager import PluginManager
from t9kjobs.render import render_job
from tests.unit.plugins.pytorch.helpers import (
    OPERATOR_ENV,
    Obj,
    container,
    env_of,
    example,
    manifest,
    replica,
)

Render = Callable[[Obj], list[Obj]]


def test_plain_ddp_one_process_per_pod(render: Render) -> None:
    pods = render(example("ddp"))
    envs = [env_of(p) for p in pods]
    master = "pytorch-example-worker-0.pytorch-example"
    assert [p["metadata"]["name"] for p in pods] == [
        f"pytorch-example-worker-{i}" for i in range(4)
    ]
    assert {e["MASTER_ADDR"] for e in envs} == {master}
    assert {e["PET_MASTER_ADDR"] for e in envs} == {master}
    assert {e["MASTER_PORT"] for e in envs} == {"23456"}
    assert {e["WORLD_SIZE"] for e in envs} == {"4"}
    assert [e["RANK"] for e in envs] == ["0", "1", "2", "3"]
    assert [e["PET_NODE_RANK"] for e in envs] == ["0", "1", "2", "3"]
    assert {e["LOCAL_WORLD_SIZE"] for e in envs} == {"1"}
    assert {e["PET_NNODES"] for e in envs} == {"4"}
    assert {e["PET_NPROC_PER_NODE"] for e in envs} == {"1"}
    # A static rendezvous: no rendezvous backend without torchrun or elastic.
    assert not any(k.startswith("PET_RDZV") for e in envs for k in e)


def _named(manager: PluginManager, doc: Obj) -> tuple[set[str], set[str]]:
    """(pods that name the job's headless Service as their subdomain, pods it selects)."""
    job = parse_job(doc, manager)
    objects = render_job(job, manager)
    (service,) = [o for o in objects if o["kind"] == "Service"]
    assert service["metadata"]["name"] == job.name
    assert service["spec"]["clusterIP"] == "None"
    assert service["spec"]["publishNotReadyAddresses"] is True
    selector = service["spec"]["selector"].items()
    pods = [o for o in objects if o["kind"] == "Pod"]
    for pod in pods:
        assert pod["spec"]["restartPolicy"] == "Never"
        if "subdomain" in pod["spec"]:
            assert pod["spec"]["subdomain"] == job.name
            assert pod["spec"]["hostname"] == pod["metadata"]["name"]
        else:
            assert "hostname" not in pod["spec"]
    subdomains = {p["metadata"]["name"] for p in pods if "subdomain" in p["spec"]}
    selected = {p["metadata"]["name"] for p in pods if selector <= p["metadata"]["labels"].items()}
    return subdomains, selected


def test_without_torchrun_only_the_master_resolves(manager: PluginManager) -> None:
    """`MASTER_ADDR` is the only name a static job resolves: the Service selects the master
    alone, and the other pods name no subdomain (a name that would never resolve)."""
    doc = manifest(replica("worker", 3), replica("master", 1))
    assert _named(manager, doc) == ({"job-master-0"}, {"job-master-0"})
    ddp = example("ddp")  # no master type: index 0 of the first type is the master
    only = {"pytorch-example-worker-0"}
    assert _named(manager, ddp) == (only, only)


def test_with_torchrun_or_elastic_every_pod_resolves(manager: PluginManager) -> None:
    """torchrun's rendezvous gives its trainers the name of whichever node it ranked first."""
    every = {"job-master-0", "job-worker-0", "job-worker-1"}
    torchrun = manifest(
        replica("master", 1), replica("worker", 2), torchrunConfig={"enabled": True}
    )
    assert _named(manager, torchrun) == (every, every)
    elastic = manifest(
        replica("master", 1),
        replica("worker", 2),
        elastic={"enabled": True, "minReplicas": 1, "maxReplicas": 3},
    )
    assert _named(manager, elastic) == (every, every)


def test_master_type_is_rank_zero_wherever_it_is_listed(render: Render) -> None:
    pods = render(manifest(replica("worker", 3), replica("master", 1)))
    envs = {p["metadata"]["name"]: env_of(p) for p in pods}
    assert envs["job-master-0"]["RANK"] == "0"
    assert sorted(envs[f"job-worker-{i}"]["RANK"] for i in range(3)) == ["1", "2", "3"]
    assert {e["MASTER_ADDR"] for e in envs.values()} == {"job-master-0.job"}
    assert {e["WORLD_SIZE"] for e in envs.values()} == {"4"}


def test_without_master_type_index_zero_of_the_first_type_is_master(render: Render) -> None:
    pods = render(manifest(replica("ps", 2), replica("worker", 3)))
    envs = [env_of(p) for p in pods]
    assert [p["metadata"]["name"] for p in pods][:3] == ["job-ps-0", "job-ps-1", "job-worker-0"]
    assert {e["MASTER_ADDR"] for e in envs} == {"job-ps-0.job"}
    assert sorted(int(e["RANK"]) for e in envs) == list(range(5))


def test_env_goes_to_the_python_container_only(render: Render) -> None:
    sidecar = container("sidecar", command=["sleep", "inf"])
    python = container("python", command=["python", "train.py"])
    (pod,) = render(manifest(replica("worker", 1, sidecar, python)))
    by_name = {c["name"]: c for c in pod["spec"]["containers"]}
    assert "env" not in by_name["sidecar"]
    assert env_of(pod)["RANK"] == "0"


def test_user_env_is_kept_next_to_the_operators(render: Render) -> None:
    own = container(command=["python", "t.py"], env=[{"name": "NCCL_DEBUG", "value": "INFO"}])
    (pod,) = render(manifest(replica("worker", 1, own)))
    env = env_of(pod)
    assert env["NCCL_DEBUG"] == "INFO"
    assert env["MASTER_ADDR"] == "job-worker-0.job"


def test_torchrun_world_size_is_the_sum_of_processes(render: Render) -> None:
    def gpus(n: int) -> Obj:
        return container(args=["train.py"], resources={"limits": {"nvidia.com/gpu": n}})

    doc = manifest(
        replica("master", 1, gpus(2)),
        replica("worker", 2, gpus(4)),
        torchrunConfig={"enabled": True, "procPerNode": "gpu"},
    )
    envs = [env_of(p) for p in render(doc)]
    assert {e["WORLD_SIZE"] for e in envs} == {"10"}  # 2 + 4 + 4
    assert [e["LOCAL_WORLD_SIZE"] for e in envs] == ["2", "4", "4"]
    assert [e["PET_NPROC_PER_NODE"] for e in envs] == ["2", "4", "4"]
    assert [e["RANK"] for e in envs] == ["0", "1", "2"]  # node ranks
    assert {e["PET_RDZV_ENDPOINT"] for e in envs} == {"job-master-0.job:23456"}
    assert {e["PET_RDZV_ID"] for e in envs} == {"job-uid"}
    assert {e["PET_RDZV_BACKEND"] for e in envs} == {"c10d"}
    # only the master's pod hosts the c10d store
    assert [e["PET_RDZV_CONF"] for e in envs] == ["is_host=1", "is_host=0", "is_host=0"]


def test_gpu_request_counts_when_no_limit(render: Render) -> None:
    requested = container(args=["train.py"], resources={"requests": {"nvidia.com/gpu": "2"}})
    doc = manifest(
        replica("node", 2, requested), torchrunConfig={"enabled": True, "procPerNode": "gpu"}
    )
    envs = [env_of(p) for p in render(doc)]
    assert {e["WORLD_SIZE"] for e in envs} == {"4"}


def test_a_torchrun_job_gets_every_reserved_variable(render: Render) -> None:
    """The names validation refuses are exactly the names the operator sets."""
    for pod in render(example("torchrun-gpu")):
        assert sorted(env_of(pod)) == sorted(OPERATOR_ENV)


def test_an_unknown_gpu_count_leaves_the_count_to_torchrun(manager: PluginManager) -> None:
    """`procPerNode: gpu` without a GPU count is refused by validation; the hooks alone still
    agree: torchrun counts the GPUs (`--nproc_per_node=gpu`) and no size is claimed."""
    counted = container(args=["train.py"], resources={"limits": {"nvidia.com/gpu": 2}})
    uncounted = container(args=["train.py"], resources={"limits": {"nvidia.com/gpu": "1.5"}})
    doc = manifest(
        replica("master", 1, counted),
        replica("worker", 1, uncounted),
        torchrunConfig={"enabled": True, "procPerNode": "gpu"},
    )
    job = parse_job(doc, manager)
    hooks = manager.hooks_for(job.kind)
    master, worker = hooks.build_pods(job)
    envs = [env_of(master.manifest), env_of(worker.manifest)]
    assert [e.get("LOCAL_WORLD_SIZE") for e in envs] == ["2", None]
    assert [e["PET_NPROC_PER_NODE"] for e in envs] == ["2", "gpu"]
    assert not any("WORLD_SIZE" in e for e in envs)  # the sum is unknown
    lines = [hooks.build_launch_command(job, pod) or [] for pod in (master, worker)]
    assert [line[2] for line in lines] == ["--nproc_per_node=2", "--nproc_per_node=gpu"]
