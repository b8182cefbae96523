"""The launch line, the hostfile and the env file, read the way DeepSpeed reads them.

DeepSpeed's own parsers (deepspeed/launcher/runner.py: `parse_args`, `_parse_hostfile` and the
`.deepspeed_env` loop of `main`) are re-implemented here from the upstream source, so a change in
what the plugin produces that DeepSpeed would read differently fails a test.
"""

from __future__ import annotations

import argparse
import collections
import re
import shlex
import subprocess
from pathlib import Path
from typing import Any

import pytest

from t9kjobs.plugins.deepspeed.launch import env_file_script
from t9kjobs.render import render_job
from tests.unit.plugins.deepspeed.jobs import base_manifest, container, with_spec


def deepspeed_parser() -> argparse.ArgumentParser:
    """The options of DeepSpeed's `deepspeed` launcher, mirrored from runner.py `parse_args`."""
    p = argparse.ArgumentParser(prog="deepspeed")
    p.add_argument("-H", "--hostfile", type=str, default="/job/hostfile")
    p.add_argument("-i", "--include", type=str, default="")
    p.add_argument("-e", "--exclude", type=str, default="")
    p.add_argument("--num_nodes", type=int, default=-1)
    p.add_argument("--min_elastic_nodes", type=int, default=-1)
    p.add_argument("--max_elastic_nodes", type=int, default=-1)
    p.add_argument("--num_gpus", "--num_accelerators", type=int, default=-1)
    p.add_argument("--master_port", type=int, default=29500)
    p.add_argument("--master_addr", type=str, default="")
    p.add_argument("--launcher", type=str, default="pdsh")
    p.add_argument("--launcher_args", type=str, default="")
    p.add_argument("--module", action="store_true")
    p.add_argument("--no_python", action="store_true")
    p.add_argument("--no_local_rank", action="store_true")
    p.add_argument("--no_ssh_check", action="store_true")
    p.add_argument("--force_multi", action="store_true")
    p.add_argument("--save_pid", action="store_true")
    p.add_argument("--enable_each_rank_log", type=str, default="None")
    p.add_argument("--autotuning", type=str, default="", choices=["tune", "run"])
    p.add_argument("--elastic_training", action="store_true")
    p.add_argument("user_script", type=str)
    p.add_argument("user_args", nargs=argparse.REMAINDER)
    return p


def parse_hostfile(lines: list[str]) -> dict[str, int]:
    """DeepSpeed's `_parse_hostfile`: `<host> slots=<n>` a line, comments and blanks skipped."""
    pool: dict[str, int] = collections.OrderedDict()
    for raw in lines:
        line = raw.strip()
        match = re.search(r"^(\S+)\s+slots=(\d+)", line)
        if line.startswith("#") or line == "":
            continue
        if not match:
            raise ValueError(f"Hostfile contains a bad entry: {line}")
        host = match.group(1)
        if host in pool:
            raise ValueError(f"Hostfile contains multiple entries for {host}")
        pool[host] = int(match.group(2))
    if not pool:
        raise ValueError("Hostfile is empty or not formatted correctly")
    return pool


def read_env_file(text: str) -> dict[str, str]:
    """DeepSpeed's loop over `.deepspeed_env`: split on the first `=`, strip both sides."""
    exports = {}
    for var in text.splitlines(keepends=True):
        key, val = var.split("=", maxsplit=1)
        exports[key.strip()] = val.strip()
    return exports


def _objects(make_job: Any, manager: Any, doc: dict[str, Any]) -> dict[str, Any]:
    return {o["metadata"]["name"]: o for o in render_job(make_job(doc), manager)}


def _worker0_script(objects: dict[str, Any]) -> str:
    command = objects["ds-worker-0"]["spec"]["containers"][0]["command"]
    assert command[:2] == ["/bin/bash", "-c"]
    return str(command[2])


def launch_argv(objects: dict[str, Any]) -> list[str]:
    """The argv of the `exec` command that ends worker-0's script, as the shell splits it."""
    _, marker, tail = _worker0_script(objects).partition('worker(s)"\nexec ')
    assert marker, "no launch command after the 'launching on N worker(s)' line"
    return shlex.split(tail)


def parse_launch(objects: dict[str, Any]) -> argparse.Namespace:
    argv = launch_argv(objects)
    assert argv[0] == "deepspeed"
    return deepspeed_parser().parse_args(argv[1:])


def test_default_launch_line(make_job: Any, manager: Any) -> None:
    args = parse_launch(_objects(make_job, manager, base_manifest()))
    assert args.hostfile == "/t9k/hostfile"
    assert (args.no_local_rank, args.module, args.no_python) == (False, False, False)
    assert args.autotuning == ""
    assert args.elastic_training is False
    assert args.launcher == "pdsh"
    assert args.user_script == "/workspace/train.py"
    assert args.user_args == ["--epochs=3"]


def test_local_rank_false_and_autotune(make_job: Any, manager: Any) -> None:
    doc = with_spec(
        config={"localRank": False, "autotune": "run", "run": {"python": ["t.py"]}},
    )
    args = parse_launch(_objects(make_job, manager, doc))
    assert args.no_local_rank is True
    assert args.autotuning == "run"
    assert args.user_script == "t.py"


@pytest.mark.parametrize(
    ("run", "module", "no_python"),
    [
        ({"module": ["pkg.train", "--lr=1e-4"]}, True, False),
        ({"Module": ["pkg.train", "--lr=1e-4"]}, True, False),
        ({"exec": ["pkg.train", "--lr=1e-4"]}, False, True),
        ({"Exec": ["pkg.train", "--lr=1e-4"]}, False, True),
    ],
)
def test_module_and_exec(
    make_job: Any, manager: Any, run: dict[str, Any], module: bool, no_python: bool
) -> None:
    args = parse_launch(_objects(make_job, manager, with_spec(config={"run": run})))
    assert (args.module, args.no_python) == (module, no_python)
    assert args.user_script == "pkg.train"
    assert args.user_args == ["--lr=1e-4"]


def test_other_args_come_before_the_program(make_job: Any, manager: Any) -> None:
    doc = with_spec(
        config={
            "otherArgs": ["--master_port=29600", "--include", "ds-worker-1.ds", "--launcher=pdsh"],
            "run": {"python": ["train.py", "--master_port=1"]},
        }
    )
    args = parse_launch(_objects(make_job, manager, doc))
    assert args.master_port == 29600
    assert args.include == "ds-worker-1.ds"
    assert args.user_script == "train.py"
    assert args.user_args == ["--master_port=1"]


def test_user_strings_survive_the_shell(make_job: Any, manager: Any) -> None:
    tricky = ["--name=a b", "it's", '"quoted"', "$HOME", "`date`", "semi;colon"]
    doc = with_spec(config={"run": {"python": ["my train.py", *tricky]}})
    args = parse_launch(_objects(make_job, manager, doc))
    assert args.user_script == "my train.py"
    assert args.user_args == tricky


def test_elastic_flags(make_job: Any, manager: Any) -> None:
    doc = with_spec(
        elastic={"enable": True, "minReplicas": 2, "maxReplicas": 6, "expectedReplicas": 3}
    )
    objects = _objects(make_job, manager, doc)
    args = parse_launch(objects)
    assert args.elastic_training is True
    assert (args.min_elastic_nodes, args.max_elastic_nodes) == (2, 6)
    # DeepSpeed asserts a master address in elastic training.
    assert args.master_addr == "ds-worker-0.ds"
    assert sorted(n for n in objects if n.startswith("ds-worker-")) == [
        "ds-worker-0",
        "ds-worker-1",
        "ds-worker-2",
    ]


def test_custom_command_replaces_the_launch_line(make_job: Any, manager: Any) -> None:
    command = "cd /workspace && deepspeed --hostfile /t9k/hostfile train.py --tag 'a b'"
    doc = with_spec(config={"customCommand": command, "slotsPerWorker": 8})
    objects = _objects(make_job, manager, doc)
    assert launch_argv(objects) == ["/bin/bash", "-c", command]
    assert "slots=8" in objects["ds-hostfile"]["data"]["hostfile"]


def test_hostfile_lists_every_worker_with_its_slots(make_job: Any, manager: Any) -> None:
    doc = base_manifest()
    doc["spec"]["worker"]["replicas"] = 4
    doc["spec"]["config"]["slotsPerWorker"] = 4
    objects = _objects(make_job, manager, doc)
    text = objects["ds-hostfile"]["data"]["hostfile"]
    pool = parse_hostfile(text.splitlines(keepends=True))
    assert pool == {f"ds-worker-{i}.ds": 4 for i in range(4)}
    assert list(pool) == [f"ds-worker-{i}.ds" for i in range(4)]
    # Every host is a pod's DNS name on the job's headless Service.
    for host in pool:
        pod, subdomain = host.split(".")
        spec = objects[pod]["spec"]
        assert (spec["hostname"], spec["subdomain"]) == (pod, subdomain)
    assert objects["ds"]["spec"]["clusterIP"] == "None"


def test_hostfile_parser_rejects_what_deepspeed_rejects() -> None:
    with pytest.raises(ValueError, match="bad entry"):
        parse_hostfile(["host-a slots=x\n"])
    with pytest.raises(ValueError, match="multiple entries"):
        parse_hostfile(["a slots=1\n", "a slots=2\n"])
    with pytest.raises(ValueError, match="empty"):
        parse_hostfile(["# nothing\n"])


def _run_env_script(
    names: list[str], env: dict[str, str], tmp_path: Path
) -> subprocess.CompletedProcess[str]:
    path = tmp_path / "home dir" / ".deepspeed_env"
    path.parent.mkdir()
    return subprocess.run(
        ["/bin/bash", "-c", env_file_script(names, str(path))],
        env={"PATH": "/usr/bin:/bin", **env},
        capture_output=True,
        text=True,
        check=False,
    )


def test_env_file_carries_the_pod_environment(tmp_path: Path) -> None:
    env = {
        "NCCL_DEBUG": "INFO",
        "SECRET_TOKEN": "s3cr$t 'single' \"double\" `tick`",
        "EMPTY": "",
        "WITH_EQUALS": "a=b=c",
    }
    names = ["NCCL_DEBUG", "SECRET_TOKEN", "EMPTY", "WITH_EQUALS", "UNSET_OPTIONAL"]
    result = _run_env_script(names, env, tmp_path)
    assert result.returncode == 0, result.stderr
    text = (tmp_path / "home dir" / ".deepspeed_env").read_text()
    assert text.splitlines() == [
        "NCCL_DEBUG=INFO",
        "SECRET_TOKEN=s3cr$t 'single' \"double\" `tick`",
        "EMPTY=",
        "WITH_EQUALS=a=b=c",
    ]
    assert read_env_file(text) == {k: env[k] for k in names[:4]}


def test_env_file_refuses_a_newline_naming_the_variable(tmp_path: Path) -> None:
    result = _run_env_script(["OK", "MULTI"], {"OK": "1", "MULTI": "line1\nline2"}, tmp_path)
    assert result.returncode == 1
    assert "env MULTI holds a newline" in result.stderr


def test_worker0_script_writes_the_env_file_from_the_container_env(
    make_job: Any, manager: Any
) -> None:
    doc = base_manifest()
    container(doc)["env"] = [
        {"name": "NCCL_DEBUG", "value": "INFO"},
        {"name": "TOKEN", "valueFrom": {"secretKeyRef": {"name": "s", "key": "k"}}},
        {"name": "NCCL_DEBUG", "value": "WARN"},
    ]
    objects = _objects(make_job, manager, doc)
    script = _worker0_script(objects)
    assert "for _t9k_name in NCCL_DEBUG TOKEN; do" in script
    assert "> /root/.deepspeed_env" in script
    # The Secret's value is read in the pod; no object of the job holds the variable.
    for obj in objects.values():
        if obj["kind"] in ("ConfigMap", "Secret"):
            assert "TOKEN" not in str(obj)


@pytest.mark.parametrize("mode", ["immediate", "debug"])
def test_scripts_are_valid_bash(make_job: Any, manager: Any, mode: str) -> None:
    doc = with_spec(
        config={"customCommand": "echo 'hi' && exit 3"},
        runMode={"debug": {"enable": mode == "debug"}},
    )
    for obj in _objects(make_job, manager, doc).values():
        if obj["kind"] == "Pod":
            command = obj["spec"]["containers"][0]["command"]
            result = subprocess.run(
                ["/bin/bash", "-n", "-c", command[2]], capture_output=True, text=True, check=False
            )
            assert result.returncode == 0, result.stderr
