"""`t9kjobs describe KIND/NAME`: what a job is doing and why it failed, in one screen.

The phase and how long the job has been in it; its elapsed time and training progress
(`status.progress`); its conditions; per replica type the desired, running, succeeded and
failed replicas and the restarts, with each failed or restarted replica's exit code, reason
and last log lines; the launch command each replica runs (and the hostfile of the kinds that
have one); what the cleanup policy did; the recent Events of the job and its pods. Text fits
80 columns; `-o json` gives the same facts for scripts.

Everything comes from the API server; the launch commands from the pods themselves, or rebuilt
by the job's plugin, as the operator built them, when a pod is gone.

The facts are gathered by the client (`t9kjobs.client.describe`, also `Client.describe`) and
laid out in `t9kjobs.cli.describe_text`; this module is the command.
"""

from __future__ import annotations

import argparse
import json
import sys

from t9kjobs.cli.cluster import add_cluster_arguments, connect
from t9kjobs.cli.completion import complete_job
from t9kjobs.cli.describe_text import render
from t9kjobs.client.describe import describe
from t9kjobs.client.reader import JobRef
from t9kjobs.manager import PluginManager

__all__ = ["add_describe_parser", "describe", "render"]


def _cmd_describe(args: argparse.Namespace, manager: PluginManager) -> int:
    reader, namespace = connect(args, manager)
    ref = JobRef.parse(args.job, namespace, manager)
    facts = describe(reader, ref)
    if args.output == "json":
        print(json.dumps(facts, indent=2))
    else:
        sys.stdout.write(render(facts))
    return 0


def add_describe_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "describe",
        help="what a job is doing, why it failed: replicas, exit codes, logs, commands, events",
    )
    job = p.add_argument("job", metavar="KIND/NAME", help="e.g. gj/my-job, pytorchtrainingjob/x")
    job.completer = complete_job  # type: ignore[attr-defined]
    p.add_argument("-o", "--output", choices=("text", "json"), default="text")
    add_cluster_arguments(p)
    p.set_defaults(func=_cmd_describe)
