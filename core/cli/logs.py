"""`t9kjobs logs KIND/NAME [REPLICA | --all] [-f] [--since D] [--tail N]`: a job's logs by replica.

A replica is named as in `describe` (`worker-1`, `master-0`, `launcher`; `worker` is
`worker-0`); without one, the deciding replica (master-0, launcher, worker-0). The container is
the one that trains (the plugin knows which), unless `-c` names another. `--all` interleaves
every replica's lines by time, each prefixed with `[replica]`.

`-f` follows a replica across its restarts: the operator restarts a replica by deleting its
pod and creating a new one of the same name, so when a pod's log ends the follower waits for
the next pod (a line `--- <replica>: new pod (restart N) ---` marks it) and stops once the job
has finished. With `--all`, replicas that appear later (an elastic job scaled up) are followed
too. A replica whose pod the job's cleanup deleted gets a message saying so, not a 404.
"""

from __future__ import annotations

import argparse
import queue
import re
import sys
import threading
import time
from collections.abc import Callable
from typing import Any

from t9kjobs.cli.cluster import (
    CliError,
    ClusterReader,
    JobRef,
    add_cluster_arguments,
    deciding_replica,
    replica_id,
    training_container,
)
from t9kjobs.cli.completion import complete_job, complete_replica
from t9kjobs.kube.transport import ApiError
from t9kjobs.manager import PluginManager
from t9kjobs.objects import ANNOTATION_INCARNATION, Obj

__all__ = ["add_logs_parser", "parse_duration"]

_FINISHED = ("Succeeded", "Failed")
_POLL = 1.0  # seconds between looks for a replica's next pod
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


def _finished(job: Obj) -> bool:
    return (job.get("status") or {}).get("phase") in _FINISHED


class _Logs:
    def __init__(self, reader: ClusterReader, ref: JobRef, args: argparse.Namespace) -> None:
        self.reader = reader
        self.ref = ref
        self.args = args
        self.job = reader.job(ref)
        self.desired = reader.desired_pods(self.job)

    # -- replicas ------------------------------------------------------------------------

    def replicas(self) -> dict[str, str]:
        """Replica id -> pod name: those in the job's status, and any pod of the job."""
        names = [
            r["name"]
            for t in (self.job.get("status") or {}).get("tasks") or []
            for r in t.get("replicas") or []
        ]
        names += [p["metadata"]["name"] for p in self.reader.pods(self.ref)]
        return {replica_id(self.ref.name, n): n for n in sorted(set(names))}

    def resolve(self, wanted: str | None, wait: bool = False) -> tuple[str, str]:
        """The replica id and pod name `wanted` names (the deciding replica for None); with
        `wait`, a job the operator has not started yet is waited for."""
        known = self.replicas()
        while not known and wait:
            time.sleep(_POLL)
            self.job = self.reader.job(self.ref)
            known = self.replicas()
        if not known:
            raise CliError(f"{self.ref} has no replicas yet: is the operator running?")
        if wanted is None:
            wanted = deciding_replica(list(known))
        else:
            wanted = replica_id(self.ref.name, wanted)
            if wanted not in known and f"{wanted}-0" in known:
                wanted = f"{wanted}-0"
        if wanted not in known:
            raise CliError(
                f"{self.ref} has no replica {wanted!r}; its replicas: {', '.join(known)}"
            )
        return wanted, known[wanted]

    def container(self, pod_name: str, pod: Obj | None) -> str | None:
        if self.args.container:
            return str(self.args.container)
        return training_container(self.desired, pod_name, pod)

    def gone(self, replica: str) -> str:
        """Why a replica has no pod, in words."""
        self.job = self.reader.job(self.ref)
        status = self.job.get("status") or {}
        phase = next(
            (
                r.get("phase")
                for t in status.get("tasks") or []
                for r in t.get("replicas") or []
                if replica_id(self.ref.name, r["name"]) == replica
            ),
            None,
        )
        pod = f"{self.ref.name}-{replica}"
        if status.get("phase") in _FINISHED:
            return (
                f"{replica}: the pod {pod} was deleted when {self.ref} finished"
                f" ({status['phase']}), by its cleanup policy: its log went with it (a cleanup"
                " policy of None keeps the pods, and their logs, of finished jobs)"
            )
        if phase == "Deleted":
            return f"{replica}: the pod {pod} was deleted (the job is {status.get('phase')})"
        return f"{replica}: the pod {pod} does not exist yet (the replica is {phase or 'Creating'})"

    # -- one pod's log -------------------------------------------------------------------

    def _lines(self, pod_name: str, pod: Obj, **kwargs: Any) -> list[str]:
        try:
            return list(
                self.reader.log_lines(
                    self.ref.namespace, pod_name, self.container(pod_name, pod), **kwargs
                )
            )
        except ApiError as exc:
            raise CliError(f"{replica_id(self.ref.name, pod_name)}: {exc}") from None

    def _text(self, line: str) -> str:
        return line if self.args.timestamps else line.partition(" ")[2]

    def print_once(self, replica: str, pod_name: str) -> int:
        pod = self.reader.pod(self.ref.namespace, pod_name)
        if pod is None:
            raise CliError(self.gone(replica))
        for line in self._lines(pod_name, pod, tail=self.args.tail, since_seconds=self.args.since):
            print(self._text(line))
        return 0

    def follow(self, replica: str, pod_name: str, emit: Callable[[str], None]) -> None:
        """Emit the replica's lines, pod after pod, until the job has finished."""
        streamed: set[str] = set()  # uids whose log ended
        last_uid = last_stamp = marked = None
        first = True
        while True:
            pod = self.reader.pod(self.ref.namespace, pod_name)
            uid = pod["metadata"].get("uid") if pod else None
            if pod is None or uid in streamed:
                if _finished(self.reader.job(self.ref)):
                    if not streamed and last_uid is None:
                        emit(f"--- {self.gone(replica)}")
                    return
                time.sleep(_POLL)
                continue
            if last_uid is not None and uid != last_uid and uid != marked:
                # once per pod: its container may not have started yet (400), and is asked again
                restart = (pod["metadata"].get("annotations") or {}).get(ANNOTATION_INCARNATION)
                emit(f"--- {replica}: new pod (restart {restart or '?'}) ---")
                marked = uid
                last_stamp = None
            try:
                for line in self.reader.log_lines(
                    self.ref.namespace,
                    pod_name,
                    self.container(pod_name, pod),
                    follow=True,
                    tail=self.args.tail if first else None,
                    since_seconds=self.args.since if first else None,
                ):
                    stamp = line.partition(" ")[0]
                    if uid == last_uid and last_stamp is not None and stamp <= last_stamp:
                        continue  # seen before the stream was cut
                    last_stamp = stamp
                    emit(self._text(line))
            except ApiError as exc:
                if exc.status != 400:  # 400: the container has not started yet
                    raise CliError(f"{replica}: {exc}") from None
                time.sleep(_POLL)
                continue
            first = False
            last_uid = uid
            now = self.reader.pod(self.ref.namespace, pod_name)
            if now is None or now["metadata"].get("uid") != uid or _exited(now):
                streamed.add(str(uid))

    # -- every replica -------------------------------------------------------------------

    def print_all(self) -> int:
        merged: list[tuple[str, str, str]] = []
        for replica, pod_name in self.replicas().items():
            pod = self.reader.pod(self.ref.namespace, pod_name)
            if pod is None:
                print(f"--- {self.gone(replica)}", file=sys.stderr)
                continue
            for line in self._lines(
                pod_name, pod, tail=self.args.tail, since_seconds=self.args.since
            ):
                merged.append((line.partition(" ")[0], replica, self._text(line)))
        merged.sort(key=lambda m: m[0])  # stable: one replica's lines keep their order
        for _, replica, text in merged:
            print(f"[{replica}] {text}")
        return 0

    def follow_all(self) -> int:
        lines: queue.Queue[str | BaseException] = queue.Queue()
        threads: dict[str, threading.Thread] = {}

        def run(replica: str, pod_name: str) -> None:
            try:
                self.follow(replica, pod_name, lambda text: lines.put(f"[{replica}] {text}"))
            except BaseException as exc:  # handed to the main thread, which reports it
                lines.put(exc)

        while True:
            self.job = self.reader.job(self.ref)  # replicas may have come since
            for replica, pod_name in self.replicas().items():
                if replica not in threads:  # one at the start, or a replica scaled up
                    threads[replica] = threading.Thread(
                        target=run, args=(replica, pod_name), daemon=True
                    )
                    threads[replica].start()
            deadline = time.monotonic() + 2 * _POLL
            while time.monotonic() < deadline:
                try:
                    item = lines.get(timeout=0.2)
                except queue.Empty:
                    continue
                if isinstance(item, BaseException):
                    raise item
                print(item, flush=True)
            idle = all(not t.is_alive() for t in threads.values()) and lines.empty()
            if idle and _finished(self.reader.job(self.ref)):
                return 0


def _exited(pod: Obj) -> bool:
    return (pod.get("status") or {}).get("phase") in _FINISHED


def _cmd_logs(args: argparse.Namespace, manager: PluginManager) -> int:
    reader, namespace = ClusterReader.connect(args, manager)
    logs = _Logs(reader, JobRef.parse(args.job, namespace, manager), args)
    try:
        if args.all:
            if args.replica:
                raise CliError("give a REPLICA or --all, not both")
            return logs.follow_all() if args.follow else logs.print_all()
        replica, pod_name = logs.resolve(args.replica, wait=args.follow)
        if not args.follow:
            return logs.print_once(replica, pod_name)
        logs.follow(replica, pod_name, lambda text: print(text, flush=True))
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
