"""The `colossalai run` line, torchrun options in ColossalAI's form, and the hostfile.

The line is parsed back with a click command that mirrors `colossalai run`'s options
(colossalai/cli/launcher/__init__.py: click, `ignore_unknown_options`, options allowed after
the script), so a line ColossalAI would read differently fails here.
"""

from __future__ import annotations

import shlex
import subprocess
from pathlib import Path
from typing import Any

import click
import pytest

from t9kjobs.plugins.colossalai.launch import (
    colossalai_run_argv,
    extra_launch_args,
    hostfile,
    launcher_script,
    script_problem,
    torchrun_options,
)
from t9kjobs.plugins.colossalai.pinning import PRELUDE

HOSTS = ["job-worker-0.job", "job-worker-1.job"]


@click.command(context_settings={"ignore_unknown_options": True})
@click.option("-H", "-host", "--host", type=str, default=None)
@click.option("--hostfile", type=str, default=None)
@click.option("--include", type=str, default=None)
@click.option("--exclude", type=str, default=None)
@click.option("--num_nodes", type=int, default=-1)
@click.option("--nproc_per_node", type=int, default=None)
@click.option("--master_port", type=int, default=29500)
@click.option("--master_addr", type=str, default="127.0.0.1")
@click.option("--extra_launch_args", type=str, default=None)
@click.option("--ssh-port", type=int, default=None)
@click.option("-m", type=str, default=None)
@click.argument("user_script", type=str, required=False, default=None)
@click.argument("user_args", nargs=-1)
def colossalai_run(**_: Any) -> None:
    """Mirror of `colossalai run`'s command-line interface."""


def parse(argv: list[str]) -> dict[str, Any]:
    assert argv[:2] == ["colossalai", "run"]
    ctx = colossalai_run.make_context("run", argv[2:])
    params = dict(ctx.params)
    if params["m"] is not None:  # as colossalai run does with -m
        if params["user_script"] is not None:
            params["user_args"] = (params["user_script"], *params["user_args"])
        params["user_script"] = params["m"]
    return params


def worker_argv(params: dict[str, Any]) -> list[str]:
    """What the worker's shell makes of the script part colossalai run joins with spaces."""
    return shlex.split(" ".join([params["user_script"], *params["user_args"]]))


def argv(script: list[str], extra: list[str] | None = None, proc: int = 1) -> list[str]:
    return colossalai_run_argv(
        hosts=HOSTS, proc_per_worker=proc, extra_args=extra or [], script=script, ssh_port=22
    )


def test_launch_line_options() -> None:
    params = parse(argv(["train.py", "arg1"], ["--max_restarts=0", "--standalone"], proc=4))
    assert params["hostfile"] == "/t9k/hostfile"
    assert params["nproc_per_node"] == 4
    assert params["master_addr"] == "job-worker-0.job"
    assert params["master_port"] == 29500
    assert params["ssh_port"] == 22
    assert params["extra_launch_args"] == "max_restarts=0,standalone"
    assert params["host"] is None and params["include"] is None and params["exclude"] is None
    assert params["user_script"] == "train.py"
    assert params["user_args"] == ("arg1",)


def test_script_arguments_never_reach_colossalai_options() -> None:
    script = ["train.py", "--master_port", "1234", "--nproc_per_node=8", "-m", "x"]
    params = parse(argv(script))
    assert params["master_port"] == 29500
    assert params["nproc_per_node"] == 1
    assert params["m"] is None
    assert worker_argv(params) == script


def test_arguments_are_verbatim_on_the_worker() -> None:
    script = ["train.py", "--name", "my run", "--glob=*.bin", "$HOME", "it's"]
    assert worker_argv(parse(argv(script))) == script


def test_module_form() -> None:
    params = parse(argv(["-m", "pkg.train", "--epochs", "3"]))
    assert params["user_script"] == "pkg.train"
    assert params["user_args"] == ("--epochs", "3")
    params = parse(argv(["-m", "pkg.train"]))
    assert params["user_script"] == "pkg.train"
    assert params["user_args"] == ()


@pytest.mark.parametrize(
    ("extra", "expected"),
    [
        ([], None),
        (["--max_restarts=0"], "max_restarts=0"),
        (["--max_restarts", "0"], "max_restarts=0"),
        (["--max_restarts 0"], "max_restarts=0"),
        (["--standalone"], "standalone"),
        (["--standalone", "--max-restarts=2"], "standalone,max-restarts=2"),
        (["--max_restarts 0", "--standalone"], "max_restarts=0,standalone"),
        (
            ["--monitor_interval", "5", "--standalone", "--log_dir=/tmp/logs"],
            "monitor_interval=5,standalone,log_dir=/tmp/logs",
        ),
        (["--master_port=29600"], "master_port=29600"),
    ],
)
def test_extra_launch_args(extra: list[str], expected: str | None) -> None:
    assert extra_launch_args(extra) == expected


def test_extra_args_in_the_line_reach_torchrun() -> None:
    params = parse(argv(["train.py"], ["--rdzv_backend", "c10d", "--standalone"]))
    # colossalai run turns `a=1,b` into torchrun's `--a=1 --b`.
    assert params["extra_launch_args"] == "rdzv_backend=c10d,standalone"


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (
            ["max_restarts=0"],
            "extraArgs[0] ('max_restarts=0'): expected a torchrun option, --name[=value]",
        ),
        (["-m"], "extraArgs[0] ('-m'): expected a torchrun option, --name[=value]"),
        (
            ["--max_restarts="],
            "extraArgs[0] ('--max_restarts='): an empty value: write --name=value, or --flag"
            " for a flag",
        ),
        (
            ["--rdzv_conf=timeout=900"],
            "extraArgs[0] ('--rdzv_conf=timeout=900'): the value 'timeout=900' cannot hold"
            " spaces, ',' or '=' (colossalai run passes options as --extra_launch_args"
            " name=value,...)",
        ),
        (
            ["--rdzv_conf", "a=1,b=2"],
            "extraArgs[0] ('--rdzv_conf'): the value 'a=1,b=2' cannot hold",
        ),
        (
            ["--log_dir=/tmp/my logs"],
            "extraArgs[0] ('--log_dir=/tmp/my logs'): the value '/tmp/my logs' cannot hold",
        ),
        (
            ["--log_dir /tmp/a b"],
            "extraArgs[0] ('--log_dir /tmp/a b'): the value '/tmp/a b' cannot hold",
        ),
        (
            ["--x=1", "--nproc_per_node=2"],
            "extraArgs[1] ('--nproc_per_node=2'): colossalai run"
            " sets --nproc_per_node itself; set it with torchConfig.procPerWorker",
        ),
        (
            ["--nnodes", "2"],
            "extraArgs[0] ('--nnodes'): colossalai run sets --nnodes itself; it is the number of"
            " workers",
        ),
        (
            ["--node-rank=0"],
            "extraArgs[0] ('--node-rank=0'): colossalai run sets --node-rank itself; colossalai"
            " run numbers the hosts of the hostfile",
        ),
        (["--$(reboot)=1"], "extraArgs[0] ('--$(reboot)=1'): '$(reboot)' is not an option name"),
        (["--a", "b", "c"], "extraArgs[2] ('c'): expected a torchrun option, --name[=value]"),
    ],
)
def test_extra_args_errors(extra: list[str], message: str) -> None:
    with pytest.raises(ValueError, match=r"^extraArgs") as err:
        torchrun_options(extra)
    assert str(err.value).startswith(message)


@pytest.mark.parametrize(
    ("script", "problem"),
    [
        ([], "must name the training script"),
        (["train.py"], None),
        (["/workspace/src/train.py", "--x", "a b"], None),
        (["-m", "pkg.train"], None),
        (["-m"], "-m must be followed by a module name"),
        (["-m", "--x"], "-m must be followed by a module name"),
        (["bash", "run.sh"], "must start with a Python file (*.py) or with -m <module>"),
        (["train.py;reboot"], "must start with a Python file"),
        (["a;b.py"], "'a;b.py' must not contain spaces or shell characters"),
    ],
)
def test_script_problem(script: list[str], problem: str | None) -> None:
    found = script_problem(script)
    if problem is None:
        assert found is None
    else:
        assert found is not None and problem in found


def test_hostfile_one_host_a_line_without_slots() -> None:
    assert hostfile(HOSTS) == "job-worker-0.job\njob-worker-1.job\n"
    assert hostfile(["only.job"]) == "only.job\n"


def test_launcher_script_waits_then_execs_colossalai(tmp_path: Path) -> None:
    """Run the launcher's shell with `ssh`, `colossalai` and its Python stubbed: the argv that
    arrives is ColossalAI's command line run by the Python of the `colossalai` script, after
    the prelude that pins the job's host key."""
    python = tmp_path / "python-of-colossalai"
    python.write_text('#!/bin/sh\nfor a in "$@"; do printf "%s\\0" "$a"; done > "$T9K_TEST_ARGV"\n')
    python.chmod(0o755)
    for name, body in {
        "ssh": 'echo "ssh $*" >> "$T9K_TEST_LOG"',
        "colossalai": "exit 3  # run by its Python, never itself",
    }.items():
        stub = tmp_path / name
        stub.write_text(f"#!{python if name == 'colossalai' else '/bin/sh'}\n{body}\n")
        stub.chmod(0o755)
    line = argv(["train.py", "--name", "my run", "it's"], ["--max_restarts=0"])
    script = launcher_script(
        "echo waited", line, workers=2, known_hosts="/root/.ssh/known_hosts", alias="t9k-jobs.j"
    )
    env = {
        "PATH": f"{tmp_path}:/usr/bin:/bin",
        "T9K_TEST_LOG": str(tmp_path / "log"),
        "T9K_TEST_ARGV": str(tmp_path / "argv"),
    }
    result = subprocess.run(
        ["/bin/bash", "-c", script], env=env, capture_output=True, text=True, check=True
    )
    assert result.stdout.splitlines()[0] == "waited"
    received = (tmp_path / "argv").read_text().split("\0")[:-1]
    assert received[:4] == ["-c", PRELUDE, "/root/.ssh/known_hosts", "t9k-jobs.j"]
    assert ["colossalai", *received[4:]] == line
    assert worker_argv(parse(["colossalai", *received[4:]])) == [
        "train.py",
        "--name",
        "my run",
        "it's",
    ]
