"""The launcher's `colossalai run` line and its hostfile, in the forms ColossalAI reads.

What `colossalai run` (colossalai/cli/launcher) does with them, and why the line looks as it does:

* `--hostfile` lists one hostname a line (no slots); `--nproc_per_node` processes start on each.
* It ssh-es (fabric) into every host, `cd`s to the launcher's own working directory, exports the
  launcher's environment and runs `torchrun ... <script> <args>` there, the command joined with
  spaces and read by the worker's shell. So every script argument is quoted here for that shell:
  an element of `torchConfig.script` is one argument, verbatim.
* `--extra_launch_args a=1,b` becomes torchrun's `--a=1 --b`: values cannot hold `,` or `=`.
* Its options are parsed by click, which also takes options written after the script; a `--`
  before the script keeps the script's own arguments (`--master_port`...) out of its hands.
* An invalid script name makes it print an error and exit 0, which would pass for success: the
  spec refuses such scripts up front (`script_problem`).
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Sequence

from t9kjobs.plugin import render_template
from t9kjobs.plugins.colossalai.pinning import PRELUDE

__all__ = [
    "HOSTFILE_PATH",
    "MASTER_PORT",
    "colossalai_run_argv",
    "extra_launch_args",
    "hostfile",
    "launcher_script",
    "script_problem",
    "torchrun_options",
]

_PACKAGE = "t9kjobs.plugins.colossalai"
HOSTFILE_PATH = "/t9k/hostfile"
# torchrun's rendezvous port on worker 0; colossalai run's own default, written out.
MASTER_PORT = 29500
# torchrun options that colossalai run sets for every node itself.
_SET_BY_COLOSSALAI = {
    "nproc_per_node": "set it with torchConfig.procPerWorker",
    "nnodes": "it is the number of workers",
    "node_rank": "colossalai run numbers the hosts of the hostfile",
}
_OPTION_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_-]*$")
_BAD_VALUE = re.compile(r"[\s,=]")
# What shlex.quote leaves alone: a script name that needs no quoting for the worker's shell.
_PLAIN = re.compile(r"^[\w@%+=:,./-]+$", re.ASCII)


def script_problem(script: Sequence[str]) -> str | None:
    """Why `colossalai run` would refuse this script (it then exits 0), or None."""
    if not script:
        return "must name the training script"
    if script[0] == "-m":
        if len(script) < 2 or script[1].startswith("-"):
            return "-m must be followed by a module name"
        if script[1].endswith(".py"):
            return f"-m takes a module name, not a file: {script[1]!r}"
        target = script[1]
    elif not script[0].endswith(".py"):
        return f"must start with a Python file (*.py) or with -m <module>, got {script[0]!r}"
    else:
        target = script[0]
    if not _PLAIN.fullmatch(target):
        return f"{target!r} must not contain spaces or shell characters"
    return None


def _option(element: str, following: str | None) -> tuple[str, str | None, bool]:
    """(name, value, whether `following` was taken as the value) of one `--option` element."""
    body = element.strip()[2:]
    if "=" in body:
        name, value = body.split("=", 1)
        if not value:
            raise ValueError("an empty value: write --name=value, or --flag for a flag")
        return name, value, False
    parts = body.split(None, 1)
    if len(parts) == 2:
        return parts[0], parts[1].strip(), False
    if following is not None and not following.strip().startswith("-"):
        return body, following.strip(), True
    return body, None, False


def torchrun_options(extra_args: Sequence[str]) -> list[tuple[str, str | None]]:
    """(name, value) of every torchrun option in `extraArgs`; None is a flag's value.

    Accepts `--name=value`, `--name value` (one element, or two) and `--flag`. Raises
    ValueError naming the element that colossalai run could not pass on.
    """
    out: list[tuple[str, str | None]] = []
    i = 0
    while i < len(extra_args):
        element = extra_args[i]
        where = f"extraArgs[{i}] ({element!r})"
        if not element.strip().startswith("--"):
            raise ValueError(f"{where}: expected a torchrun option, --name[=value]")
        following = extra_args[i + 1] if i + 1 < len(extra_args) else None
        try:
            name, value, took_next = _option(element, following)
        except ValueError as exc:
            raise ValueError(f"{where}: {exc}") from None
        if not _OPTION_NAME.match(name):
            raise ValueError(f"{where}: {name!r} is not an option name")
        if value is not None and _BAD_VALUE.search(value):
            raise ValueError(
                f"{where}: the value {value!r} cannot hold spaces, ',' or '=' (colossalai run"
                " passes options as --extra_launch_args name=value,...)"
            )
        reason = _SET_BY_COLOSSALAI.get(name.replace("-", "_"))
        if reason is not None:
            raise ValueError(f"{where}: colossalai run sets --{name} itself; {reason}")
        out.append((name, value))
        i += 2 if took_next else 1
    return out


def extra_launch_args(extra_args: Sequence[str]) -> str | None:
    """The `--extra_launch_args` value for `extraArgs` (`name=value,flag`), None when empty."""
    options = torchrun_options(extra_args)
    if not options:
        return None
    return ",".join(name if value is None else f"{name}={value}" for name, value in options)


def colossalai_run_argv(
    *,
    hosts: Sequence[str],
    proc_per_worker: int,
    extra_args: Sequence[str],
    script: Sequence[str],
    ssh_port: int,
) -> list[str]:
    """The argv of `colossalai run` for these workers; worker 0 is torchrun's master."""
    argv = [
        "colossalai",
        "run",
        "--hostfile",
        HOSTFILE_PATH,
        "--nproc_per_node",
        str(proc_per_worker),
        "--master_addr",
        hosts[0],
        "--master_port",
        str(MASTER_PORT),
        "--ssh-port",
        str(ssh_port),
    ]
    extra = extra_launch_args(extra_args)
    if extra is not None:
        argv += ["--extra_launch_args", extra]
    if script[0] == "-m":
        argv += ["-m", script[1], "--", *(shlex.quote(a) for a in script[2:])]
    else:
        argv += ["--", script[0], *(shlex.quote(a) for a in script[1:])]
    return argv


def launcher_script(
    wait_for_workers: str,
    argv: Sequence[str],
    workers: int,
    *,
    known_hosts: str,
    alias: str,
) -> str:
    """Shell of the launcher: wait for every worker's sshd, then exec `colossalai run` (`argv`,
    from `colossalai_run_argv`) through the Python of the `colossalai` script, with the job's
    host key pinned (`t9kjobs.plugins.colossalai.pinning`)."""
    return render_template(
        _PACKAGE,
        "launcher.sh.j2",
        wait_for_workers=wait_for_workers,
        prelude=shlex.quote(PRELUDE),
        pinned=shlex.join([known_hosts, alias]),
        command=shlex.join(argv[1:]),
        workers=workers,
    )


def hostfile(hosts: Sequence[str]) -> str:
    """ColossalAI's hostfile: one hostname a line, no slots."""
    return render_template(_PACKAGE, "hostfile.j2", hosts=hosts)
