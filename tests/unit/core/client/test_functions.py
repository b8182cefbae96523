"""How a function travels (`t9kjobs.client.functions`): what is refused, naming what cannot be
sent, and what the job's runner does with what is sent (run here, as a GenericJob's process
would run it: `python3 -c <bootstrap>` with the job's environment)."""

from __future__ import annotations

import importlib.util
import json
import math
import os
import subprocess
import sys
import types
from collections.abc import Callable
from os.path import join
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client as k8s_client

from t9kjobs.client import Client
from t9kjobs.client.functions import FunctionNotSendable, package_function
from t9kjobs.client.runner import BOOTSTRAP, PACKAGES_ENV, PACKAGES_FAILED
from t9kjobs.manager import PluginManager

NOTEBOOK = """
data = [1, 2, 3]

def helper():
    return 1

def uses_data():
    return sum(data)

def uses_helper():
    return helper()

def uses_undefined():
    return missing_name + 1
"""


def _notebook(tmp_path: Path) -> types.ModuleType:
    """A module named `__main__`, as a notebook's cells are (its source in a file)."""
    path = tmp_path / "cells.py"
    path.write_text(NOTEBOOK)
    spec = importlib.util.spec_from_file_location("__main__", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def sendable(n: int, scale: float = 1.0, *, rank: int = 0) -> float:
    """Reads a module (`math`) and an imported function (`join`) from its globals."""
    return math.sqrt(n) * scale + len(join("a", "b")) + rank


def _decorate(fn: Callable[..., Any]) -> Callable[..., Any]:
    return fn


@_decorate
def decorated() -> None:
    """A decorated function: the decorator does not travel."""


async def coroutine() -> None:
    """An async function."""


def _refusal(fn: Any, *args: Any, **kwargs: Any) -> str:
    with pytest.raises(FunctionNotSendable) as caught:
        package_function(fn, args, kwargs)
    return str(caught.value)


def test_a_lambda_is_refused_with_where_it_is() -> None:
    said = _refusal(lambda x: x)
    assert "a lambda cannot be sent" in said and "test_functions.py" in said


def test_a_closure_is_refused_naming_what_it_reads() -> None:
    learning_rate = 0.1

    def inner() -> float:
        return learning_rate

    said = _refusal(inner)
    assert "`learning_rate`" in said and "closure" in said


def test_the_notebooks_names_are_refused_by_name(tmp_path: Path) -> None:
    cells = _notebook(tmp_path)
    said = _refusal(cells.uses_data)
    assert "`data` (a list of the notebook" in said
    assert "pass values as arguments" in said.lower()
    assert "`helper` (a function of the notebook" in _refusal(cells.uses_helper)
    assert "`missing_name` (not defined)" in _refusal(cells.uses_undefined)


def test_what_is_no_plain_function_is_refused() -> None:
    assert "decorated" in _refusal(decorated)
    assert "async" in _refusal(coroutine)
    assert "not a function defined with `def`" in _refusal(print)
    assert "not a function defined with `def`" in _refusal(Path("x").exists)


def test_a_module_of_the_working_folder_does_not_travel(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "mylocal.py").write_text("VALUE = 1\n")
    (tmp_path / "cells.py").write_text("def f():\n    import mylocal\n    return mylocal.VALUE\n")
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    spec = importlib.util.spec_from_file_location("__main__", tmp_path / "cells.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert "`import mylocal`: a local file that does not travel" in _refusal(module.f)


def test_arguments_travel_as_json_and_each_other_one_is_named() -> None:
    said = _refusal(sendable, 3, scale={1, 2})
    assert "scale (set:" in said and "as JSON" in said
    assert "args[0] (float:" in _refusal(sendable, float("nan"))
    assert "do not fit it: missing a required argument: 'n'" in _refusal(sendable)


def test_the_program_imports_what_the_function_reads_and_runs_it() -> None:
    packaged = package_function(sendable, (16,), {"scale": 2.0})
    assert "import math" in packaged.program
    assert "from posixpath import join" in packaged.program
    assert packaged.program.count("def sendable(") == 1
    names: dict[str, Any] = {}
    exec(packaged.program, names)
    given = json.loads(packaged.arguments)
    assert names["sendable"](*given["args"], **given["kwargs"]) == sendable(16, 2.0)


def test_nothing_is_sent_for_a_function_that_cannot_travel(manager: PluginManager) -> None:
    # An API server nobody listens on: a request would raise NoCluster.
    cfg = k8s_client.Configuration(host="http://127.0.0.1:9")
    client = Client(api_client=k8s_client.ApiClient(cfg), plugins=manager)
    with pytest.raises(FunctionNotSendable, match="lambda"):
        client.train(lambda: None, kind="GenericJob", image="python:3.11")


def rank_and_progress(steps: int, *, rank: int, world_size: int, local_rank: int) -> None:
    """What a job's function does: it gets its rank, reports progress."""
    from t9kjobs.progress import report

    print(f"rank={rank} world={world_size} local={local_rank} steps={steps}")
    report(steps, steps, loss=0.5)


def _run(env: dict[str, str], tmp_path: Path) -> subprocess.CompletedProcess[str]:
    # Without PYTHONPATH: t9kjobs is not importable, as in an image without it, so
    # `t9kjobs.progress` is the copy the job carries.
    base = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    base["TMPDIR"] = str(tmp_path)
    return subprocess.run(
        [sys.executable, "-I", "-c", BOOTSTRAP],
        env={**base, **env},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_the_runner_gives_the_rank_and_carries_progress(tmp_path: Path) -> None:
    env = package_function(rank_and_progress, (7,)).env()
    done = _run({**env, "RANK": "0", "WORLD_SIZE": "2", "LOCAL_RANK": "0"}, tmp_path)
    assert done.returncode == 0, done.stderr
    assert "rank=0 world=2 local=0 steps=7" in done.stdout
    assert "T9KJOBS_PROGRESS step=7 total=7 loss=0.5" in done.stdout
    other = _run({**env, "RANK": "1", "WORLD_SIZE": "2", "LOCAL_RANK": "1"}, tmp_path)
    assert "rank=1 world=2 local=1" in other.stdout and "T9KJOBS_PROGRESS" not in other.stdout


def failing(*, rank: int) -> None:
    raise RuntimeError(f"rank {rank} gives up")


def test_the_functions_exception_fails_the_process_with_its_lines(tmp_path: Path) -> None:
    done = _run(package_function(failing).env(), tmp_path)
    assert done.returncode == 1
    assert "RuntimeError: rank 0 gives up" in done.stderr
    assert 'raise RuntimeError(f"rank {rank} gives up")' in done.stderr  # its source line


def test_packages_without_an_index_stop_every_rank_saying_so(tmp_path: Path) -> None:
    env = package_function(rank_and_progress, (1,)).env()
    env[PACKAGES_ENV] = json.dumps(["t9kjobs-no-such-package==1.0"])
    env["PIP_INDEX_URL"] = "http://127.0.0.1:9/simple"  # nobody listens: no index reached
    done = _run(env, tmp_path)
    assert done.returncode == PACKAGES_FAILED
    assert "could not install the packages ['t9kjobs-no-such-package==1.0']" in done.stderr
    assert "put the packages in the image" in done.stderr
    again = _run(env, tmp_path)  # another rank of the machine: told the same, pip not rerun
    assert again.returncode == PACKAGES_FAILED and "could not install" in again.stderr
