"""`t9kjobs logs KIND/NAME [REPLICA | --all] [-f] [--since D] [--tail N]`: a job's logs by replica.

What it prints is `t9kjobs.client.job_logs` (also `Client.logs`): one replica's log (default the
deciding one: master-0, launcher, worker-0) or every replica's interleaved by time, each line
prefixed with `[replica]`; `-f` follows across the replica's restarts until the job finishes.
The client's notes (a new pod after a restart, a pod gone) go to standard error with `--all`.
"""

from __future__ import annotations

import argparse
import re
import sys

from t9kjobs.cli.cluster import add_cluster_arguments, connect
from t9kjobs.cli.completion import complete_job, complete_replica
from t9kjobs.client.dispatch import worker_reader
from t9kjobs.client.errors import ClientError
from t9kjobs.client.job_logs import JobLogs, LogLine
from t9kjobs.client.reader import JobRef
from t9kjobs.manager import PluginManager

__all__ = ["add_logs_parser", "parse_duration"]

_DURATION = re.compile(r"^(?:(\d+)h)?(?:(\d+)m)?(?:(\d+)s)?$")


def parse_duration(text: str) -> int:
    """`90s`, `5m`, `2h`, `1h30m` (or plain seconds) as seconds."""
    if text.isdigit():
        return int(text)
    match = _DURATION.match(text)
    if not text or match is None:
        raise argparse.ArgumentTypeError(f"{text!r} is not a duration such as 30s, 5m, 1h30m")
    hours, minutes, seconds = (int(g or 0) for g in match.groups())
    return hours * 3600 + minutes * 60 + seconds


def _text(line: LogLine, timestamps: bool) -> str:
    return f"{line.time} {line.text}" if timestamps and line.time else line.text


def _cmd_logs(args: argparse.Namespace, manager: PluginManager) -> int:
    reader, namespace = connect(args, manager)
    ref = JobRef.parse(args.job, namespace, manager)
    there = worker_reader(reader, ref, args.kubeconfig)
    home = None if there is reader else reader  # dispatched: its status for good is here
    logs = JobLogs(there, ref, args.container, home=home)
    try:
        if args.all:
            if args.replica:
                raise ClientError("give a REPLICA or --all, not both")
            lines = (
                logs.follow_all(args.tail, args.since)
                if args.follow
                else logs.all_once(args.tail, args.since)
            )
            for line in lines:
                if line.note and not args.follow:
                    print(line.text, file=sys.stderr)
                else:
                    print(f"[{line.replica}] {_text(line, args.timestamps)}", flush=True)
            return 0
        replica, pod_name = logs.resolve(args.replica, wait=args.follow)
        if args.follow:
            for line in logs.follow(replica, pod_name, args.tail, args.since):
                print(_text(line, args.timestamps), flush=True)
        else:
            for line in logs.once(replica, pod_name, args.tail, args.since):
                print(_text(line, args.timestamps))
        return 0
    except KeyboardInterrupt:
        return 130


def add_logs_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "logs",
        help="a job's logs by replica (default the deciding one), --all interleaved, -f",
        description="Print the log of one replica of a job (default: master-0, launcher or"
        " worker-0), or of every replica with --all; -f follows across the replica's restarts"
        " until the job finishes.",
    )
    job = p.add_argument("job", metavar="KIND/NAME", help="e.g. gj/my-job")
    job.completer = complete_job  # type: ignore[attr-defined]
    replica = p.add_argument("replica", nargs="?", metavar="REPLICA", help="e.g. worker-1")
    replica.completer = complete_replica  # type: ignore[attr-defined]
    p.add_argument("--all", action="store_true", help="every replica, lines prefixed [replica]")
    p.add_argument("-f", "--follow", action="store_true", help="follow until the job finishes")
    p.add_argument("--since", type=parse_duration, metavar="DURATION", help="e.g. 10m, 1h")
    p.add_argument("--tail", type=int, metavar="N", help="the last N lines of each pod")
    p.add_argument("-c", "--container", help="another container than the training one")
    p.add_argument("--timestamps", action="store_true", help="each line's time in front")
    add_cluster_arguments(p)
    p.set_defaults(func=_cmd_logs)
