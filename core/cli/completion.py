"""Shell completion for bash and zsh by argcomplete: `t9kjobs completion bash|zsh` prints the
script (`source <(t9kjobs completion bash)`), which asks `t9kjobs` itself what completes.

argcomplete reads the argparse parser, so every subcommand and option completes with no list
kept by hand; the completers here add what only the cluster knows: `KIND/` from the loaded
plugins' kinds (names, plurals, short names), then the jobs of that kind in the namespace, and
a job's replicas (`worker-1`). A completer that cannot reach the cluster offers nothing.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shlex
import sys
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from argcomplete.io import warn
from argcomplete.shell_integration import shellcode

from t9kjobs.cli.cluster import connect
from t9kjobs.client.errors import ClientError
from t9kjobs.client.reader import JobRef, find_kind
from t9kjobs.kube.resources import job_resource
from t9kjobs.manager import PluginError, PluginManager, load_plugins
from t9kjobs.objects import replica_id

__all__ = [
    "EXECUTABLES",
    "add_completion_parser",
    "complete_job",
    "complete_replica",
    "kubectl_complete",
]

# The names the scripts register: the command and its kubectl plugin form.
EXECUTABLES = ("t9kjobs", "kubectl-t9k")


def _manager(parsed: argparse.Namespace) -> PluginManager:
    return load_plugins(getattr(parsed, "block_plugin", None) or [])


def complete_job(prefix: str, parsed_args: argparse.Namespace, **_: Any) -> list[str]:
    """`KIND/` while no kind is typed, then `KIND/NAME` of the jobs in the namespace."""
    try:
        manager = _manager(parsed_args)
        kind, slash, _name = prefix.partition("/")
        if not slash:
            names = {
                n
                for info in manager.kinds.values()
                for n in (info.singular, info.plural, *info.short_names)
            }
            return sorted(f"{n}/" for n in names if n.startswith(prefix.lower()))
        info = find_kind(kind, manager)
        reader, namespace = connect(parsed_args, manager)
        listed = reader.transport.request("GET", job_resource(info).path(namespace))
        return [
            f"{kind}/{job['metadata']['name']}"
            for job in listed.get("items") or []
            if f"{kind}/{job['metadata']['name']}".startswith(prefix)
        ]
    except (ClientError, PluginError, OSError, ValueError) as exc:
        warn(f"t9kjobs: {exc}")
        return []
    except Exception:  # an API error, a broken kubeconfig: complete nothing
        return []


def complete_replica(prefix: str, parsed_args: argparse.Namespace, **_: Any) -> list[str]:
    """The replicas of the job already on the line: `master-0`, `worker-1`, `launcher`."""
    with contextlib.suppress(Exception):
        manager = _manager(parsed_args)
        reader, namespace = connect(parsed_args, manager)
        ref = JobRef.parse(parsed_args.job, namespace, manager)
        status = reader.job(ref).get("status") or {}
        names = [r["name"] for t in status.get("tasks") or [] for r in t.get("replicas") or []]
        ids = sorted({replica_id(ref.name, n) for n in names})
        return [i for i in ids if i.startswith(prefix)]
    return []


def _cmd_completion(args: argparse.Namespace, manager: PluginManager) -> int:
    sys.stdout.write(shellcode(EXECUTABLES, shell=args.shell))
    return 0


def add_completion_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "completion",
        help="print the shell completion script: source <(t9kjobs completion bash)",
        description="Print the completion script for bash or zsh (argcomplete). bash: add"
        " `source <(t9kjobs completion bash)` to ~/.bashrc; zsh: `source <(t9kjobs completion"
        " zsh)` in ~/.zshrc, after compinit. It completes subcommands, options, KIND/NAME"
        " (from the cluster) and replicas, for t9kjobs and kubectl-t9k.",
    )
    p.add_argument("shell", choices=("bash", "zsh"))
    p.set_defaults(func=_cmd_completion)


def kubectl_complete(main: Callable[[], int], argv: Sequence[str] | None = None) -> int:
    """`kubectl_complete-t9k ARGS... WORD`: what kubectl (1.26 and later) runs to complete
    `kubectl t9k ARGS... WORD`. It asks `main` through argcomplete's own protocol (the
    environment a completing shell sets) and answers as kubectl expects: one completion a line,
    then `:4` (no file completion)."""
    words = list(sys.argv[1:] if argv is None else argv)
    line = " ".join(["kubectl-t9k", *(shlex.quote(w) for w in words[:-1]), *words[-1:]])
    if not words or words[-1] == "":
        line += " "
    with tempfile.TemporaryDirectory() as tmp:
        answer = Path(tmp) / "completions"
        os.environ.update(
            {
                "_ARGCOMPLETE": "1",
                "_ARGCOMPLETE_SHELL": "bash",
                "_ARGCOMPLETE_IFS": "\n",
                "_ARGCOMPLETE_STDOUT_FILENAME": str(answer),
                "COMP_LINE": line,
                "COMP_POINT": str(len(line)),
            }
        )
        with contextlib.suppress(SystemExit):
            main()
        found = answer.read_text().split("\n") if answer.exists() else []
    for word in found:
        if word.strip():
            print(word.strip())
    print(":4")
    return 0
