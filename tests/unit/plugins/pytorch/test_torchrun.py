"""The torchrun line: parsed with parsers mirroring torch.distributed.run's own options."""

from __future__ import annotations

import argparse
from collections.abc import Callable

import pytest

from t9kjobs.plugins.pytorch.torchrun import option_name
from tests.unit.plugins.pytorch.helpers import Obj, container, env_of, example, manifest, replica

Render = Callable[[Obj], list[Obj]]

# (option, dest, value type) of torch.distributed.run.get_args_parser(); flags have type None.
_OPTIONS: list[tuple[str, type | None]] = [
    ("nnodes", str),
    ("nproc_per_node", str),
    ("rdzv_backend", str),
    ("rdzv_endpoint", str),
    ("rdzv_id", str),
    ("rdzv_conf", str),
    ("standalone", None),
    ("max_restarts", int),
    ("monitor_interval", float),
    ("start_method", str),
    ("role", str),
    ("no_python", None),
    ("run_path", None),
    ("log_dir", str),
    ("node_rank", int),
    ("master_addr", str),
    ("master_port", int),
    ("local_addr", str),
]


def torchrun_parser(*, dashes: bool) -> argparse.ArgumentParser:
    """torchrun's options: underscore spellings (every torch), plus dash ones (torch >= 2.0)."""
    parser = argparse.ArgumentParser(prog="torchrun")
    for name, type_ in _OPTIONS:
        spellings = [f"--{name}"]
        if dashes and "_" in name:
            spellings.insert(0, f"--{name.replace('_', '-')}")
        if type_ is None:
            parser.add_argument(*spellings, dest=name, action="store_true")
        else:
            parser.add_argument(*spellings, dest=name, type=type_)
    parser.add_argument("-m", "--module", action="store_true")
    parser.add_argument("training_script")
    parser.add_argument("training_script_args", nargs=argparse.REMAINDER)
    return parser


def command(pod: Obj) -> list[str]:
    c = pod["spec"]["containers"][0]
    assert "args" not in c
    argv: list[str] = c["command"]
    return argv


@pytest.mark.parametrize("dashes", [False, True], ids=["torch-1.x", "torch-2.x"])
def test_torchrun_line_parses(render: Render, dashes: bool) -> None:
    pods = render(example("torchrun-gpu"))
    parser = torchrun_parser(dashes=dashes)
    for pod in pods:
        argv = command(pod)
        assert argv[0] == "torchrun"
        ns = parser.parse_args(argv[1:])
        env = env_of(pod)
        assert ns.nnodes == "2"
        assert ns.nproc_per_node == "4"  # procPerNode: gpu = the nvidia.com/gpu limit
        assert ns.rdzv_backend == "c10d"
        assert ns.rdzv_endpoint == f"{env['MASTER_ADDR']}:{env['MASTER_PORT']}"
        assert ns.rdzv_id == "<job-uid>"
        assert ns.max_restarts == 3
        assert ns.node_rank == int(env["RANK"])
        assert ns.role == "node"  # extraOptions
        assert ns.training_script == "torch_mnist_trainingjob.py"
        assert ns.training_script_args == [
            "--save_path=model_state_dict.pt",
            "--log_dir=log",
            "--backend=nccl",
        ]
    assert [torchrun_parser(dashes=dashes).parse_args(command(p)[1:]).node_rank for p in pods] == [
        0,
        1,
    ]


def test_elastic_line_has_a_node_range_and_no_node_rank(render: Render) -> None:
    pods = render(example("elastic"))
    assert len(pods) == 7
    for pod in pods:
        argv = command(pod)
        ns = torchrun_parser(dashes=False).parse_args(argv[1:])
        assert ns.nnodes == "4:10"
        assert ns.node_rank is None
        assert not any(a.startswith("--node_rank") for a in argv)
        assert ns.rdzv_endpoint == "elastic-mnist-worker-0.elastic-mnist:23456"
        assert ns.module is True  # args `-m training.module` reach torchrun
        assert ns.training_script == "training.module"
        assert ns.training_script_args == ["--backend=gloo"]


def test_extra_options_come_after_generated_ones_so_they_win(render: Render) -> None:
    doc = manifest(
        replica("worker", 2, container(args=["train.py"])),
        torchrunConfig={"enabled": True, "extraOptions": ["--nnodes=1:2", "--monitor_interval=1"]},
    )
    argv = command(render(doc)[0])
    assert argv.index("--nnodes=2") < argv.index("--nnodes=1:2") < argv.index("train.py")
    ns = torchrun_parser(dashes=False).parse_args(argv[1:])
    assert (ns.nnodes, ns.monitor_interval, ns.nproc_per_node) == ("1:2", 1.0, "1")
    assert ns.max_restarts is None  # not set: torchrun's default


@pytest.mark.parametrize(("max_restarts", "expected"), [(None, 3), (0, 0), (7, 7)])
def test_an_elastic_line_restarts_its_workers_unless_told_otherwise(
    render: Render, max_restarts: int | None, expected: int
) -> None:
    """A scale makes a peer's rank fail before its agent sees the new node (torchrun counts
    it); with torchrun's default of no restart that agent left the job on the real node."""
    torchrun: dict[str, object] = {"enabled": True}
    if max_restarts is not None:
        torchrun["maxRestarts"] = max_restarts
    doc = manifest(
        replica("worker", 2, container(args=["train.py"])),
        elastic={"enabled": True, "minReplicas": 2, "maxReplicas": 4},
        torchrunConfig=torchrun,
    )
    for pod in render(doc):
        ns = torchrun_parser(dashes=False).parse_args(command(pod)[1:])
        assert ns.max_restarts == expected


def test_the_python_container_is_the_training_container(render: Render) -> None:
    sidecar = container("logger", command=["tail", "-f", "/dev/null"])
    python = container("python", command=["python"], args=["train.py"])
    doc = manifest(replica("worker", 1, sidecar, python), torchrunConfig={"enable": True})
    (pod,) = render(doc)
    by_name = {c["name"]: c for c in pod["spec"]["containers"]}
    assert by_name["logger"]["command"] == ["tail", "-f", "/dev/null"]
    assert by_name["python"]["command"][0] == "torchrun"
    assert by_name["python"]["command"][-1] == "train.py"


def test_without_torchrun_the_container_keeps_its_command(render: Render) -> None:
    own = container(command=["python"], args=["train.py", "--lr=0.1"])
    doc = manifest(replica("worker", 2, own), torchrunConfig={"enabled": False, "procPerNode": 8})
    for pod in render(doc):
        c = pod["spec"]["containers"][0]
        assert (c["command"], c["args"]) == (["python"], ["train.py", "--lr=0.1"])
        assert env_of(pod)["WORLD_SIZE"] == "2"  # one process a pod: procPerNode unused


def rdzv_conf(argv: list[str]) -> str | None:
    conf: str | None = torchrun_parser(dashes=False).parse_args(argv[1:]).rdzv_conf
    return conf


@pytest.mark.parametrize("example_name", ["torchrun-gpu", "elastic"])
def test_c10d_store_is_hosted_by_the_master_pod_only(render: Render, example_name: str) -> None:
    """torchrun cannot tell from the endpoint's name that its pod should host the c10d store
    (found on the real node: no pod hosted it, every node waited): the line says so."""
    pods = render(example(example_name))
    endpoint_pod = rdzv_endpoint_pod = None
    for pod in pods:
        argv = command(pod)
        ns = torchrun_parser(dashes=False).parse_args(argv[1:])
        rdzv_endpoint_pod = ns.rdzv_endpoint.split(".")[0]
        hosts = rdzv_conf(argv) == "is_host=1"
        assert rdzv_conf(argv) in ("is_host=1", "is_host=0")
        if hosts:
            assert endpoint_pod is None, "two pods host the store"
            endpoint_pod = pod["metadata"]["name"]
    assert endpoint_pod is not None and endpoint_pod == rdzv_endpoint_pod


@pytest.mark.parametrize(
    ("extra", "master_conf", "worker_conf"),
    [
        (["--rdzv_conf=timeout=900"], "timeout=900,is_host=1", "timeout=900,is_host=0"),
        (["--rdzv-conf", "timeout=900"], "timeout=900,is_host=1", "timeout=900,is_host=0"),
        (["--rdzv_conf=is_host=0,timeout=9"], "is_host=0,timeout=9", "is_host=0,timeout=9"),
        (["--rdzv_conf="], "is_host=1", "is_host=0"),
        (
            ["--role=x", "--rdzv_conf", "timeout=900", "--monitor_interval=5"],
            "timeout=900,is_host=1",
            "timeout=900,is_host=0",
        ),
        (
            ["--rdzv_conf", "is_host=1,timeout=9", "--role=x"],
            "is_host=1,timeout=9",
            "is_host=1,timeout=9",
        ),
    ],
    ids=[
        "merged",
        "two-item-form",
        "user-is-host-kept",
        "empty-value",
        "two-item-form-among-others",
        "two-item-user-is-host-kept",
    ],
)
def test_is_host_merges_into_the_users_rdzv_conf(
    render: Render, extra: list[str], master_conf: str, worker_conf: str
) -> None:
    doc = manifest(
        replica("master", 1, container(args=["train.py"])),
        replica("worker", 1, container(args=["train.py"])),
        torchrunConfig={"enabled": True, "extraOptions": extra},
    )
    master, worker = render(doc)
    for pod, conf in ((master, master_conf), (worker, worker_conf)):
        argv = command(pod)
        assert sum(option_name(a) == "rdzv_conf" for a in argv) == 1, argv
        parsed = torchrun_parser(dashes=True).parse_args(argv[1:])
        assert parsed.rdzv_conf == conf
        assert parsed.role == ("x" if "--role=x" in extra else None)  # the others are kept


def test_a_trailing_rdzv_conf_without_value_gets_the_generated_one_before_it(
    render: Render,
) -> None:
    doc = manifest(
        replica("master", 1, container(args=["train.py"])),
        torchrunConfig={"enabled": True, "extraOptions": ["--role=x", "--rdzv_conf"]},
    )
    argv = command(render(doc)[0])
    assert argv[-4:] == ["--rdzv_conf=is_host=1", "--role=x", "--rdzv_conf", "train.py"]


@pytest.mark.parametrize(
    ("option", "name"),
    [
        ("--nproc-per-node=3", "nproc_per_node"),
        ("--nproc_per_node", "nproc_per_node"),
        ("--rdzv_conf=a=b", "rdzv_conf"),
        ("--max-restarts=1=2", "max_restarts"),
        ("-m", None),
        ("train.py", None),
    ],
)
def test_option_name_is_the_argparse_dest_of_a_long_option(option: str, name: str | None) -> None:
    assert option_name(option) == name


def test_other_rendezvous_backends_get_no_is_host(render: Render) -> None:
    doc = manifest(
        replica("worker", 2, container(args=["train.py"])),
        torchrunConfig={"enabled": True, "rdzvBackend": "etcd-v2"},
    )
    for pod in render(doc):
        assert rdzv_conf(command(pod)) is None
