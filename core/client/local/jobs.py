"""A job of the local backend: its replicas' process groups, their logs, and its status.

Each replica is a process group of its own (`start_new_session`), so that stopping it stops
what its launcher started too (torchrun's ranks). Its output (stdout and stderr together, as a
container's log) is kept with a timestamp a line, in memory for `logs` and in
`<folder>/<pod>.log`. The status is what the operator would write, from the same pieces: the
kind's `t9kjobs_compute_status` judges the replicas' exit codes, and the progress is read from
the deciding replica's log (`t9kjobs.progress`) and recorded as the planner records it.

The job is judged again whenever a replica ends (and whenever it is read), so that a failed job
stops its other replicas at once. Every process still running is stopped when its job is
deleted, when it failed, and when the interpreter exits (`atexit`): SIGTERM to the group,
SIGKILL after `STOP_GRACE_SECONDS`.
"""

from __future__ import annotations

import atexit
import os
import signal
import subprocess
import threading
import time
import weakref
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from t9kjobs.client.errors import ClientError
from t9kjobs.client.local.launch import Replica
from t9kjobs.kinds import ReplicaState
from t9kjobs.manager import PluginManager
from t9kjobs.models import Job, JobCondition, ReplicaStatus, TaskStatus, dump
from t9kjobs.objects import Obj, deciding_replica, replica_id
from t9kjobs.planner.conditions import rfc3339
from t9kjobs.planner.progress_status import complete_progress, record_progress
from t9kjobs.planner.types import Reading
from t9kjobs.progress import ANNOTATION_PROGRESS_PATTERN, latest_report_at

__all__ = ["STOP_GRACE_SECONDS", "LocalJob", "Process", "follow_lines", "stop_all"]

STOP_GRACE_SECONDS = 5.0
_live: weakref.WeakSet[LocalJob] = weakref.WeakSet()


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


@dataclass
class Process:
    """One replica's process group and its log."""

    replica: Replica
    popen: subprocess.Popen[bytes]
    log_path: Path
    uid: str
    on_end: Callable[[], None]  # the job judges its replicas again
    lines: list[str] = field(default_factory=list)  # `<RFC 3339> <text>`
    ended: threading.Event = field(default_factory=threading.Event)
    started: str = field(default_factory=_now)

    def pump(self) -> None:
        """Copy the output into the log, line by line, until the process closes it."""
        stream = self.popen.stdout
        assert stream is not None
        with self.log_path.open("a") as log:
            for raw in stream:
                line = f"{_now()} {raw.decode(errors='replace').rstrip()}"
                self.lines.append(line)
                log.write(line + "\n")
                log.flush()
        self.popen.wait()
        self.ended.set()
        self.on_end()

    @property
    def exit_code(self) -> int | None:
        """The exit code once the output is read to its end (a signal: 128 + its number)."""
        if not self.ended.is_set():
            return None
        code = self.popen.returncode
        return 128 - code if code < 0 else code

    def stop(self) -> None:
        if self.popen.poll() is None:
            for signum in (signal.SIGTERM, signal.SIGKILL):
                try:
                    os.killpg(self.popen.pid, signum)
                except ProcessLookupError:
                    break
                try:
                    self.popen.wait(STOP_GRACE_SECONDS)
                    break
                except subprocess.TimeoutExpired:
                    continue
        self.ended.wait(STOP_GRACE_SECONDS)


class LocalJob:
    """A job running here: `raw()` is its manifest with the status the operator would write."""

    def __init__(
        self, job: Job, manifest: Obj, replicas: list[Replica], folder: Path, plugins: PluginManager
    ) -> None:
        self.job = job
        self.manifest = manifest
        self.folder = folder
        self.hooks = plugins.hooks_for(job.kind)
        self.status = plugins.kind_info(job.kind).status_model()
        self.events: list[Obj] = []
        self.created = _now()
        self.processes: list[Process] = []
        self.lock = threading.Lock()
        folder.mkdir(parents=True, exist_ok=True)
        for n, replica in enumerate(replicas):
            try:
                popen = subprocess.Popen(
                    list(replica.argv),
                    env=dict(replica.env),
                    cwd=folder,
                    stdin=subprocess.DEVNULL,
                    stdout=subprocess.PIPE,
                    stderr=subprocess.STDOUT,
                    start_new_session=True,  # its own process group: stopped whole
                )
            except OSError as exc:  # no such program here: none of the job runs
                for started in self.processes:
                    started.popen.kill()
                    started.popen.wait()
                raise ClientError(
                    f"Pod {replica.name}: cannot start {replica.argv[0]!r} here: {exc.strerror}"
                ) from None
            log = folder / f"{replica.name}.log"
            process = Process(replica, popen, log, f"{job.metadata.uid}-{n}", self.refresh)
            self.processes.append(process)
            self.event(
                "Pod", replica.name, "Started", f"pid {popen.pid}: {' '.join(replica.argv)[:300]}"
            )
        for process in self.processes:  # judged once every replica is there
            threading.Thread(target=process.pump, daemon=True).start()
        _live.add(self)

    def event(self, kind: str, name: str, reason: str, message: str, type_: str = "Normal") -> None:
        self.events.append(
            {
                "type": type_,
                "reason": reason,
                "message": message,
                "lastTimestamp": _now(),
                "involvedObject": {"kind": kind, "name": name},
            }
        )

    # -- status ---------------------------------------------------------------------------

    def _state(self, process: Process) -> ReplicaState:
        code = process.exit_code
        state = "Running" if code is None else "Succeeded" if code == 0 else "Failed"
        r = process.replica
        return ReplicaState(
            r.replica_type, r.index, r.name, state, code, code is not None, 0, r.container
        )

    def _progress(self) -> None:
        by_id = {replica_id(self.job.name, p.replica.name): p for p in self.processes}
        deciding = deciding_replica(list(by_id))
        if deciding is None:
            return
        lines = list(by_id[deciding].lines)
        pattern = self.job.metadata.annotations.get(ANNOTATION_PROGRESS_PATTERN)
        found = latest_report_at((line.partition(" ")[2] for line in lines), pattern or None)
        if found is not None:
            at = datetime.fromisoformat(lines[found[0]].partition(" ")[0].replace("Z", "+00:00"))
            record_progress(self.status, Reading(found[1], at, deciding))

    def refresh(self) -> None:
        """The status from the replicas now (nothing changes once the job finished)."""
        with self.lock:
            status = self.status
            if status.finished:
                return
            states = [self._state(p) for p in self.processes]
            self._progress()
            verdict = self.hooks.compute_status(self.job, states)
            status.start_time = status.start_time or rfc3339(datetime.now(UTC))
            status.tasks = []
            for state in states:
                task = next((t for t in status.tasks if t.type == state.replica_type), None)
                if task is None:
                    task = TaskStatus(type=state.replica_type)
                    status.tasks.append(task)
                task.replicas.append(ReplicaStatus(name=state.name, phase=state.state))
            status.aggregate.running = sum(s.state == "Running" for s in states)
            status.aggregate.succeeded = sum(s.state == "Succeeded" for s in states)
            status.aggregate.failed = sum(s.state == "Failed" for s in states)
            status.ready = f"{status.aggregate.running}/{len(states)}"
            if verdict is None:
                status.phase = "Running"
                return
            status.phase = verdict.outcome
            status.completion_time = rfc3339(datetime.now(UTC))
            kind = "Completed" if verdict.outcome == "Succeeded" else "Failed"
            status.conditions = [
                JobCondition(
                    type=kind,
                    status="True",
                    reason=verdict.reason,
                    message=verdict.message,
                    last_transition_time=status.completion_time,
                )
            ]
            if verdict.outcome == "Succeeded":
                complete_progress(status)
            self.event(self.job.kind, self.job.name, verdict.reason, verdict.message)
        if verdict.outcome == "Failed":  # a rank left waiting in a collective never ends
            self.stop()

    def raw(self) -> Obj:
        self.refresh()
        return {**self.manifest, "status": dump(self.status)}

    def pods(self) -> list[Obj]:
        out = []
        for process in self.processes:
            code = process.exit_code
            phase = "Running" if code is None else "Succeeded" if code == 0 else "Failed"
            state: dict[str, Any] = (
                {"running": {"startedAt": process.started}}
                if code is None
                else {"terminated": {"exitCode": code}}
            )
            pod = process.replica.manifest
            meta = {**pod["metadata"], "uid": process.uid}
            meta["ownerReferences"] = [
                {**ref, "uid": self.job.metadata.uid} for ref in meta.get("ownerReferences") or []
            ]
            status = {
                "phase": phase,
                "startTime": process.started,
                "containerStatuses": [{"name": process.replica.container, "state": state}],
            }
            out.append({**pod, "metadata": meta, "status": status})
        return out

    def stop(self) -> None:
        """Stop every replica's process group (SIGTERM, then SIGKILL)."""
        threads = [threading.Thread(target=p.stop) for p in self.processes]
        for t in threads:
            t.start()
        for t in threads:
            t.join()

    def log(self, pod: str) -> Process | None:
        return next((p for p in self.processes if p.replica.name == pod), None)


def stop_all() -> None:
    """Stop every local job's processes (at interpreter exit)."""
    for job in list(_live):
        job.stop()


atexit.register(stop_all)


def follow_lines(process: Process, start: int, follow: bool) -> Iterator[str]:
    """The process's log lines from index `start`; with `follow`, until its output ends."""
    index = start
    while True:
        lines = process.lines
        while index < len(lines):
            yield lines[index]
            index += 1
        if not follow or process.ended.is_set():
            if index >= len(process.lines):
                return
            continue
        time.sleep(0.1)
