"""A job's logs by replica, as an iterator of `LogLine`s: one replica's or all of them, once or
followed across restarts. `Client.logs` and `t9kjobs logs` are this module.

A replica is named as in `describe` (`worker-1`, `master-0`, `launcher`; `worker` is
`worker-0`); without one, the deciding replica (master-0, launcher, worker-0). The container
is the one that trains (the operator marks it on the pod), unless another is named. All
replicas at once interleave their lines by time.

Following a replica follows it across its restarts: the operator restarts a replica by
deleting its pod and creating a new one of the same name, so when a pod's log ends the follower
waits for the next pod (a note `--- <replica>: new pod (restart N) ---` marks it) and stops once
the job has finished. Following all replicas follows those that appear later too (an elastic
job scaled up). A replica whose pod the job's cleanup deleted gets a note saying so, not a 404;
one on a simulated (KWOK) node, which keeps no logs, says that.
"""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass

from t9kjobs.client.errors import ClientError, JobNotFound, NoLog, WaitTimeout
from t9kjobs.client.reader import UNREACHABLE, ClusterReader, JobRef, training_container, uid_of
from t9kjobs.kube.transport import ApiError
from t9kjobs.objects import ANNOTATION_INCARNATION, Obj, deciding_replica, replica_id

__all__ = ["POLL_SECONDS", "JobLogs", "LogLine"]

_FINISHED = ("Succeeded", "Failed")
POLL_SECONDS = 1.0  # between looks for a replica's next pod


@dataclass(frozen=True)
class LogLine:
    """One line of a replica's log; `time` is when the container wrote it (RFC 3339, the
    kubelet's). A `note` is the client's own line (a new pod after a restart, a pod gone)."""

    replica: str
    text: str
    time: str | None = None
    note: bool = False

    def __str__(self) -> str:
        return f"[{self.replica}] {self.text}"


def _finished(job: Obj) -> bool:
    return (job.get("status") or {}).get("phase") in _FINISHED


def _exited(pod: Obj) -> bool:
    return (pod.get("status") or {}).get("phase") in _FINISHED


def _pod_state(pod: Obj | None) -> str | None:
    """Why a pod's container has not started, in the kubelet's or the scheduler's word:
    `waiting (ImagePullBackOff)`, `not scheduled (Unschedulable)`; else its phase."""
    if pod is None:
        return None
    status = pod.get("status") or {}
    for cs in status.get("containerStatuses") or []:
        waiting = (cs.get("state") or {}).get("waiting") or {}
        if waiting.get("reason"):
            return f"waiting ({waiting['reason']})"
    for c in status.get("conditions") or []:
        if c.get("type") == "PodScheduled" and c.get("status") == "False":
            return f"not scheduled ({c.get('reason') or 'Pending'})"
    phase = status.get("phase")
    return str(phase) if phase else None


class JobLogs:
    """The logs of one job; `container` names another container than the training one."""

    def __init__(
        self,
        reader: ClusterReader,
        ref: JobRef,
        container: str | None = None,
        *,
        timeout: float | None = None,
        home: ClusterReader | None = None,
    ) -> None:
        """`reader` reads the pods; `home`, where it is not `reader`, the job's status for
        good: the manager's, for a job MultiKueue dispatched, whose copy on the worker (the
        pods' controller) is deleted once it has finished."""
        self.reader = reader
        self.ref = ref
        self.container_name = container
        self.timeout = timeout
        self.home = home
        self.job = reader.job(ref)

    def _has_finished(self) -> bool:
        """Whether the job has finished, where its status is kept for good."""
        return _finished((self.home or self.reader).job(self.ref))

    def _refresh(self) -> None:
        """The job read again where its pods are; a dispatched job's copy there, deleted once
        it has finished, stays as last read (its end is `home`'s to say)."""
        try:
            self.job = self.reader.job(self.ref)
        except JobNotFound:
            if self.home is None:
                raise

    # -- replicas ------------------------------------------------------------------------

    def replicas(self) -> dict[str, str]:
        """Replica id -> pod name: those in the job's status, and any pod of the job."""
        names = [
            r["name"]
            for t in (self.job.get("status") or {}).get("tasks") or []
            for r in t.get("replicas") or []
        ]
        names += [p["metadata"]["name"] for p in self.reader.pods(self.ref, self.uid)]
        return {replica_id(self.ref.name, n): n for n in sorted(set(names))}

    def resolve(self, wanted: str | None, wait: bool = False) -> tuple[str, str]:
        """The replica id and pod name `wanted` names (the deciding replica for None); with
        `wait`, a job the operator has not started yet is waited for."""
        known = self.replicas()
        since = time.monotonic()
        while not known and wait:
            self._within(since, "no replica to follow")
            time.sleep(POLL_SECONDS)
            self.job = self.reader.job(self.ref)
            known = self.replicas()
        if not known:
            raise ClientError(f"{self.ref} has no replicas yet: is the operator running?")
        if wanted is None:
            wanted = deciding_replica(list(known))
        else:
            wanted = replica_id(self.ref.name, wanted)
            if wanted not in known and f"{wanted}-0" in known:
                wanted = f"{wanted}-0"
        if wanted not in known:
            raise ClientError(
                f"{self.ref} has no replica {wanted!r}; its replicas: {', '.join(known)}"
            )
        return str(wanted), known[str(wanted)]

    @property
    def uid(self) -> str:
        """The job's uid: a pod is one of its replicas only if the job is its controller."""
        return uid_of(self.job)

    def _pod(self, pod_name: str) -> Obj | None:
        """The replica's pod now: None when there is none of that name, or only one that is
        not the job's (a pod anyone may create under a replica's name while it has none)."""
        return self.reader.pod(self.ref.namespace, pod_name, self.uid)

    def container(self, pod: Obj) -> str | None:
        return self.container_name or training_container(pod)

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

    def _within(self, since: float, what: str, pod_name: str | None = None) -> None:
        """WaitTimeout, naming the job and the phase it is in (and why its pod waits), once
        the wait begun at `since` (a monotonic time) for `what` has lasted `timeout` seconds."""
        if self.timeout is None or time.monotonic() - since < self.timeout:
            return
        self.job = self.reader.job(self.ref)
        status = self.job.get("status") or {}
        why = f" ({status['reason']})" if status.get("reason") else ""
        pod = self._pod(pod_name) if pod_name is not None else None
        state = _pod_state(pod)
        held = f"; its pod {pod_name} is {state}" if state else ""
        raise WaitTimeout(
            f"{self.ref.where}: {what} for {self.timeout:g}s; the job is"
            f" {status.get('phase') or 'without a status'}{why}{held}",
            self.job,
        )

    def unreadable(self, replica: str, pod: Obj | None, exc: ApiError) -> NoLog:
        """Why the log of a replica's pod cannot be read, in words."""
        if self.reader.on_simulated_node(pod):
            node = ((pod or {}).get("spec") or {}).get("nodeName")
            return NoLog(
                f"{replica}: the pod runs on the simulated (KWOK) node {node}: simulated nodes"
                " run no containers and keep no logs"
            )
        return NoLog(f"{replica}: {exc}")

    # -- one replica -----------------------------------------------------------------------

    def _line(self, replica: str, raw: str) -> LogLine:
        stamp, _, text = raw.partition(" ")
        return LogLine(replica, text, stamp)

    def once(
        self, replica: str, pod_name: str, tail: int | None = None, since: int | None = None
    ) -> list[LogLine]:
        """The replica's log as it is now (NoLog when it cannot be read)."""
        pod = self._pod(pod_name)
        if pod is None:
            raise NoLog(self.gone(replica))
        try:
            got = self.reader.log_lines(
                self.ref.namespace,
                pod_name,
                self.container(pod),
                tail=tail,
                since_seconds=since,
            )
            return [self._line(replica, raw) for raw in got]
        except ApiError as exc:
            raise self.unreadable(replica, pod, exc) from None

    def follow(
        self, replica: str, pod_name: str, tail: int | None = None, since: int | None = None
    ) -> Iterator[LogLine]:
        """The replica's lines, pod after pod, until the job has finished."""
        streamed: set[str] = set()  # uids whose log ended
        last_uid = last_stamp = marked = None
        idle_since: float | None = None  # since when no log of the replica has been open
        first = True
        while True:
            pod = self._pod(pod_name)
            uid = pod["metadata"].get("uid") if pod else None
            if pod is None or uid in streamed:
                if self._has_finished():
                    if not streamed and last_uid is None:
                        yield LogLine(replica, f"--- {self.gone(replica)}", note=True)
                    return
                if pod is not None and _exited(pod):
                    # Its program ended, its log with it: the replica waits for the job's end
                    # (or a restart), as a silent program's open log does, with no limit.
                    idle_since = None
                else:
                    idle_since = time.monotonic() if idle_since is None else idle_since
                    self._within(idle_since, f"no log of {replica} to follow", pod_name)
                time.sleep(POLL_SECONDS)
                continue
            if last_uid is not None and uid != last_uid and uid != marked:
                # once per pod: its container may not have started yet (400), and is asked again
                restart = (pod["metadata"].get("annotations") or {}).get(ANNOTATION_INCARNATION)
                yield LogLine(
                    replica, f"--- {replica}: new pod (restart {restart or '?'}) ---", note=True
                )
                marked = uid
                last_stamp = None
            try:
                for raw in self.reader.log_lines(
                    self.ref.namespace,
                    pod_name,
                    self.container(pod),
                    follow=True,
                    tail=tail if first else None,
                    since_seconds=since if first else None,
                ):
                    line = self._line(replica, raw)
                    if uid == last_uid and last_stamp is not None and str(line.time) <= last_stamp:
                        continue  # seen before the stream was cut
                    last_stamp = line.time
                    yield line
            except ApiError as exc:
                # 400: the container has not started yet, but for a simulated node's pod,
                # whose log never comes.
                if exc.status != 400 or self.reader.on_simulated_node(pod):
                    raise self.unreadable(replica, pod, exc) from None
                idle_since = time.monotonic() if idle_since is None else idle_since
                self._within(idle_since, f"no log of {replica} to follow", pod_name)
                time.sleep(POLL_SECONDS)
                continue
            except UNREACHABLE:
                # The stream was cut (the API server restarted, a connection dropped): as at
                # the end of a pod's log, the next turn looks again, from the last line seen.
                time.sleep(POLL_SECONDS)
            idle_since = None  # a log was open: the wait for the next starts when it is needed
            first = False
            last_uid = uid
            now = self._pod(pod_name)
            if now is None or now["metadata"].get("uid") != uid or _exited(now):
                streamed.add(str(uid))

    # -- every replica -------------------------------------------------------------------

    def all_once(self, tail: int | None = None, since: int | None = None) -> list[LogLine]:
        """Every replica's log, interleaved by time; a note for each replica without one."""
        merged: list[LogLine] = []
        notes: list[LogLine] = []
        for replica, pod_name in self.replicas().items():
            try:
                merged += self.once(replica, pod_name, tail, since)
            except NoLog as exc:
                notes.append(LogLine(replica, f"--- {exc}", note=True))
        merged.sort(key=lambda line: line.time or "")  # stable: a replica's lines keep order
        return notes + merged

    def follow_all(self, tail: int | None = None, since: int | None = None) -> Iterator[LogLine]:
        """Every replica's lines as they come, replicas that appear later too, until the job
        has finished and every replica's log has ended. A replica with no log to follow for
        `timeout` seconds gets a note and is no longer followed; WaitTimeout once no replica
        is (or none came)."""
        lines: queue.Queue[LogLine | BaseException] = queue.Queue()
        threads: dict[str, threading.Thread] = {}
        stop = threading.Event()
        timed_out: list[WaitTimeout] = []
        began = time.monotonic()

        def run(replica: str, pod_name: str) -> None:
            try:
                for line in self.follow(replica, pod_name, tail, since):
                    if stop.is_set():
                        return
                    lines.put(line)
            except WaitTimeout as exc:  # one replica idle: the others may still speak
                timed_out.append(exc)
                lines.put(LogLine(replica, f"--- {exc}", note=True))
            except BaseException as exc:  # handed to the consumer, which raises it
                lines.put(exc)

        try:
            while True:
                self._refresh()  # replicas may have come since
                for replica, pod_name in self.replicas().items():
                    if replica not in threads:  # one at the start, or a replica scaled up
                        threads[replica] = threading.Thread(
                            target=run, args=(replica, pod_name), daemon=True
                        )
                        threads[replica].start()
                deadline = time.monotonic() + 2 * POLL_SECONDS
                while time.monotonic() < deadline:
                    try:
                        item = lines.get(timeout=0.2)
                    except queue.Empty:
                        continue
                    if isinstance(item, BaseException):
                        raise item
                    yield item
                idle = all(not t.is_alive() for t in threads.values()) and lines.empty()
                if idle and self._has_finished():
                    return
                if idle and timed_out:
                    raise timed_out[-1]
                if not threads:
                    self._within(began, "no replica to follow")
        finally:
            stop.set()
