"""What runs a `Client.train` function inside the job: every process the kind's launcher starts.

It travels with the job, as source, in the training container's environment (`RUNNER_ENV`; each
source there is a JSON string, one line, as DeepSpeed's launcher forwards the environment one
`VAR=VAL` a line to the other workers), and is started by `python3 -c "<BOOTSTRAP>"`, so any
image with Python runs it: T9k's training
images, and the real node's, do not carry t9k-jobs. It needs the standard library alone. In
order, each process:

1. installs `T9KJOBS_PACKAGES` (a JSON list of pip requirement lines) once per machine into a
   folder on `sys.path`, under a file lock so that the ranks of one pod do not race; every rank
   stops with a line naming the packages and pip's last words when pip fails (no index reached);
2. makes `t9kjobs.progress` importable: the installed one, else the copy the job carries
   (`PROGRESS_ENV`), so that `t9kjobs.progress.report` works inside the function;
3. joins the framework's group when the kind's launcher prepared it
   (`T9KJOBS_FUNCTION_DISTRIBUTED`: `torch`, `deepspeed`);
4. runs the function's program (`T9KJOBS_FUNCTION`, the source `t9kjobs.client.functions`
   built), calls the function named `T9KJOBS_FUNCTION_NAME` with the arguments of
   `T9KJOBS_FUNCTION_ARGS` (JSON), and `rank`, `world_size` and `local_rank` when it takes them
   by those names;
5. exits 0 when the function returned, 1 (its traceback printed) when it raised, 3 when the
   packages could not be installed, without interpreter teardown once a process group exists
   (torch 1.13's gloo group sometimes aborts in its destructors at exit, failing a job that
   trained: see the trainer image's mlp.py).
"""

from __future__ import annotations

import fcntl
import hashlib
import importlib.util
import inspect
import json
import linecache
import os
import subprocess
import sys
import tempfile
import traceback
import types
from typing import Any

__all__ = [
    "ARGS_ENV",
    "BOOTSTRAP",
    "CONTEXT_ARGUMENTS",
    "DISTRIBUTED_ENV",
    "FUNCTION_ENV",
    "NAME_ENV",
    "PACKAGES_ENV",
    "PACKAGES_FAILED",
    "PROGRESS_ENV",
    "RUNNER_ENV",
    "main",
]

FUNCTION_ENV = "T9KJOBS_FUNCTION"
NAME_ENV = "T9KJOBS_FUNCTION_NAME"
ARGS_ENV = "T9KJOBS_FUNCTION_ARGS"
PACKAGES_ENV = "T9KJOBS_PACKAGES"
DISTRIBUTED_ENV = "T9KJOBS_FUNCTION_DISTRIBUTED"
RUNNER_ENV = "T9KJOBS_RUNNER"
PROGRESS_ENV = "T9KJOBS_PROGRESS_SOURCE"
# The exit code of a process whose packages could not be installed.
PACKAGES_FAILED = 3
# The one line every process starts with: this module's source, from the environment.
BOOTSTRAP = (
    f"import json,os;exec(compile(json.loads(os.environ['{RUNNER_ENV}']),'t9kjobs-runner','exec'))"
)
# The keyword arguments a function receives when its signature names them.
CONTEXT_ARGUMENTS = ("rank", "world_size", "local_rank")


def _say(text: str) -> None:
    sys.stderr.write(f"t9kjobs: {text}\n")
    sys.stderr.flush()


def _install(requirements: list[str]) -> str | None:
    """Install the requirements once per machine; the folder to add to `sys.path`, or None
    after saying why pip failed."""
    key = hashlib.sha256("\n".join(requirements).encode()).hexdigest()[:16]
    folder = os.path.join(tempfile.gettempdir(), f"t9kjobs-packages-{key}")
    with open(f"{folder}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # the other ranks of this machine wait here
        if os.path.exists(os.path.join(folder, ".done")):
            return folder
        failed = f"{folder}.failed"
        if os.path.exists(failed):  # a rank before this one tried: say the same
            with open(failed) as f:
                _say(f.read())
            return None
        with tempfile.NamedTemporaryFile("w", suffix=".txt", delete=False) as listed:
            listed.write("\n".join(requirements) + "\n")
        # `--hash=` on any line makes pip check every file's hash (and refuse lines without).
        argv = [sys.executable, "-m", "pip", "install", "--no-input", "--disable-pip-version-check"]
        argv += ["--target", folder, "--retries", "1", "--timeout", "15", "-r", listed.name]
        done = subprocess.run(argv, capture_output=True, text=True, check=False)
        os.unlink(listed.name)
        if done.returncode != 0:
            said = " | ".join((done.stderr or done.stdout).strip().splitlines()[-3:])
            why = (
                f"could not install the packages {requirements} (pip exited"
                f" {done.returncode}: {said}). The pods must reach a package index (PyPI, or"
                " PIP_INDEX_URL in env=); on a cluster without one, put the packages in the"
                " image and leave packages= out."
            )
            with open(failed, "w") as f:
                f.write(why)
            _say(why)
            return None
        with open(os.path.join(folder, ".done"), "w"):
            pass
        return folder


def _progress_module() -> None:
    """`import t9kjobs.progress` works: the installed t9kjobs, else the carried copy."""
    try:
        import t9kjobs.progress  # noqa: F401  # installed in the image: nothing to do
    except ImportError:
        carried = os.environ.get(PROGRESS_ENV)
        if not carried:
            return
        source = json.loads(carried)
        package = types.ModuleType("t9kjobs")
        package.__path__ = []
        module = types.ModuleType("t9kjobs.progress")
        module.__file__ = "t9kjobs/progress.py"
        sys.modules["t9kjobs"], sys.modules["t9kjobs.progress"] = package, module
        package.progress = module  # type: ignore[attr-defined]
        exec(compile(source, module.__file__, "exec"), module.__dict__)


def _join(framework: str) -> bool:
    """Join the group the launcher prepared; whether one was joined."""
    if framework == "torch":
        import torch.distributed as dist  # type: ignore[import-not-found]

        if not dist.is_initialized():
            import torch

            dist.init_process_group("nccl" if torch.cuda.is_available() else "gloo")
        return True
    if framework == "deepspeed":
        import deepspeed  # type: ignore[import-not-found]

        deepspeed.init_distributed()
        return True
    return False


def _call(namespace: dict[str, Any]) -> None:
    name = os.environ[NAME_ENV]
    given = json.loads(os.environ.get(ARGS_ENV) or "{}")
    args, kwargs = list(given.get("args") or []), dict(given.get("kwargs") or {})
    function = namespace[name]
    context = {
        "rank": int(os.environ.get("RANK", "0")),
        "world_size": int(os.environ.get("WORLD_SIZE", "1")),
        "local_rank": int(os.environ.get("LOCAL_RANK", "0")),
    }
    taken = inspect.signature(function).parameters
    for key in CONTEXT_ARGUMENTS:
        if key in taken and key not in kwargs:
            kwargs[key] = context[key]
    function(*args, **kwargs)


def main() -> int:
    """Run the function of the environment; the process's exit code."""
    requirements = json.loads(os.environ.get(PACKAGES_ENV) or "[]")
    if requirements:
        folder = _install(requirements)
        if folder is None:
            return PACKAGES_FAILED
        sys.path.insert(0, folder)
        importlib.invalidate_caches()
    _progress_module()
    joined = False
    try:
        joined = _join(os.environ.get(DISTRIBUTED_ENV, ""))
        program = json.loads(os.environ[FUNCTION_ENV])
        filename = f"<function {os.environ[NAME_ENV]}>"
        # a traceback shows the function's lines, as it would from a file
        linecache.cache[filename] = (len(program), None, program.splitlines(True), filename)
        namespace: dict[str, Any] = {"__name__": "__t9kjobs_function__"}
        exec(compile(program, filename, "exec"), namespace)
        _call(namespace)
        code = 0
    except Exception:
        traceback.print_exc()
        code = 1
    if joined:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)
    return code


if __name__ == "__main__":  # run by BOOTSTRAP (`python3 -c`), never when imported
    sys.exit(main())
