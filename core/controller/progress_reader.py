"""The progress reader: running jobs' training progress, read from their logs at a bounded rate.

A plan names where a running job's progress is read (`Plan.progress_source`: the deciding
replica's training container); the reconciler hands it here (`follow`). One thread reads the
logs of the jobs due, oldest first: each job at most once every `interval` seconds, all jobs
together at most `qps` reads a second, so a cluster of many running jobs costs the API server
(and the kubelets behind it) a bounded rate whatever their number; at 500 running jobs and the
defaults, a job is read every 100 s (docs/benchmarks.md, "The cost of progress"). A read asks
for the log since the newest line read before (`sinceTime`), its last `TAIL_LINES` lines at
most, `LIMIT_BYTES` at most. A newer report than the job's last is kept (`reading`) and the job
queued: its next plan writes it into its status, so the status keeps one writer.

Parsing cannot stall the operator: it runs in this thread alone (not a worker's, not the
Lease's, not /healthz's), by RE2 with the GIL let go while it matches, each line cut to
`t9kjobs.progress.MAX_LINE_BYTES`, and a read's parse stops after `PARSE_BUDGET` seconds of
this thread's CPU time, keeping the newest report found. A job's own pattern that
`pattern_problem` refuses is ignored (read as if the job had none): the job's checks refuse it
too (`t9kjobs validate`, and the operator's InvalidSpec condition and event).

Why read logs, and not take pushes from the pods: docs/architecture.md, "Progress".

Only the pod the plan named is read, and only while the operator's cache holds it as the
job's own (its name and uid): a pod that took its name is never read for the job.

A log that cannot be read (a container that has not started, a pod being replaced, a node
that keeps no logs) is asked for again later, after a wait that doubles up to `MAX_BACKOFF`.

A Stalled job's plan may ask for its ranks' stacks (`Plan.capture_stacks`,
`t9kjobs.planner.stacks`): this thread reads each pod's log once (its last `STACK_TAIL_LINES`
lines, `STACK_LIMIT_BYTES` at most), within the same rate, before the progress reads due, keeps
its last faulthandler dump, and queues the job once every pod is read (`stacks`). What a
plan stops asking for is dropped.

A job that starts running is first read `first_read_after` seconds later (the operator: one
`interval`), not at once: a program that has just started has not reported yet (it loads its
data and model), so the read at once found nothing, and on a node that keeps no logs it was
refused; a job shorter than that is never read. At 500 jobs of 5 s on KWOK those were 408
reads, every one refused: 0.8 requests a job (issue #50, docs/benchmarks.md). A job followed
again from another pod (a replacement) is read at once: it has reported before.
"""

from __future__ import annotations

import dataclasses
import logging
import threading
import time
from collections.abc import Callable, Sequence
from datetime import UTC, datetime

from t9kjobs.kube.resources import CHILD_RESOURCES
from t9kjobs.kube.transport import Transport
from t9kjobs.planner import ProgressSource, Reading, Stacks
from t9kjobs.planner.conditions import parse_time
from t9kjobs.planner.stacks import MAX_STACK_BYTES, last_dump
from t9kjobs.progress import Report, latest_report_at, pattern_problem
from t9kjobs.vocabulary import JobKey

__all__ = [
    "LIMIT_BYTES",
    "MAX_BACKOFF",
    "PARSE_BUDGET",
    "STACK_LIMIT_BYTES",
    "STACK_TAIL_LINES",
    "TAIL_LINES",
    "ProgressReader",
    "newest_report",
]

log = logging.getLogger("t9kjobs.operator")

TAIL_LINES = 200
LIMIT_BYTES = 256 * 1024
MAX_BACKOFF = 600.0
# Seconds of the reader thread's CPU time one read's parse may take (a log of 200 ordinary
# lines takes about a millisecond).
PARSE_BUDGET = 0.1
# A read for a rank's stacks: faulthandler's dump of a few threads is some 50 lines.
STACK_TAIL_LINES = 400
STACK_LIMIT_BYTES = MAX_STACK_BYTES


def newest_report(
    lines: list[str], pattern: str | None, budget: float | None = PARSE_BUDGET
) -> tuple[Report, datetime] | None:
    """The newest report of timestamped log lines (`<RFC 3339> <text>`), and its time; a
    `pattern` that `pattern_problem` refuses is ignored (module docstring)."""
    if pattern and pattern_problem(pattern) is not None:
        pattern = None
    stamped = [line.partition(" ") for line in lines]
    found = latest_report_at([text for _, _, text in stamped], pattern, budget=budget)
    if found is None:
        return None
    index, report = found
    try:
        return report, parse_time(stamped[index][0])
    except ValueError:  # no timestamp: not a line of the kubelet's
        return None


class ProgressReader:
    def __init__(
        self,
        api: Transport,
        enqueue: Callable[[JobKey], None],
        *,
        interval: float = 30.0,
        qps: float = 5.0,
        clock: Callable[[], float] = time.monotonic,
        current: Callable[[JobKey, ProgressSource], bool] = lambda key, source: True,
        wall: Callable[[], datetime] = lambda: datetime.now(UTC),
        first_read_after: float = 0.0,
    ) -> None:
        """`enqueue` queues a job whose progress changed; `interval`: the least time between
        two reads of one job; `qps`: reads a second, all jobs together (0: no reads);
        `current`: whether the pod a source names is still the job's own (the pod of that
        name and uid, in the operator's cache): a log is read only then; `wall`: the clock of
        a reading's `seen_at` and `read_at`; `first_read_after`: seconds from a job's first
        `follow` to its first read (module docstring)."""
        self.api = api
        self.enqueue = enqueue
        self.interval = interval
        self.qps = qps
        self.clock = clock
        self.current = current
        self.wall = wall
        self.first_read_after = first_read_after
        self._lock = threading.Lock()
        self._sources: dict[JobKey, ProgressSource] = {}
        self._due: dict[JobKey, float] = {}
        self._failures: dict[JobKey, int] = {}
        self._since: dict[JobKey, str] = {}  # the newest log stamp read, for sinceTime
        self._readings: dict[JobKey, Reading] = {}
        # Stacks asked for: the pods left to read, what was read (since when), the answers.
        self._stack_asks: dict[JobKey, list[ProgressSource]] = {}
        self._stack_reads: dict[JobKey, tuple[datetime, dict[str, str]]] = {}
        self._stacks: dict[JobKey, Stacks] = {}

    # -- what the reconciler says and asks ---------------------------------------------------

    def follow(self, key: JobKey, source: ProgressSource | None) -> None:
        """Read the job's progress from `source` from now on; None: no more (it stopped)."""
        with self._lock:
            if source is None:
                self._drop(key)
                return
            before = self._sources.get(key)
            self._sources[key] = source
            if before is None:
                self._due.setdefault(key, self.clock() + self.first_read_after)
            elif before.uid != source.uid or before.container != source.container:
                self._since.pop(key, None)
                self._due[key] = min(self._due.get(key, 0.0), self.clock())

    def reading(self, key: JobKey) -> Reading | None:
        with self._lock:
            return self._readings.get(key)

    def want_stacks(self, key: JobKey, sources: Sequence[ProgressSource]) -> None:
        """A plan's `capture_stacks`: read these pods' stacks once; empty: none wanted (what
        was read or asked for is dropped)."""
        with self._lock:
            if not sources:
                self._drop_stacks(key)
            elif key not in self._stack_reads:
                self._stack_asks[key] = list(sources)
                self._stack_reads[key] = (self.wall(), {})

    def stacks(self, key: JobKey) -> Stacks | None:
        with self._lock:
            return self._stacks.get(key)

    def forget(self, key: JobKey) -> None:
        with self._lock:
            self._drop(key)

    def _drop(self, key: JobKey) -> None:
        self._sources.pop(key, None)
        self._due.pop(key, None)
        self._failures.pop(key, None)
        self._since.pop(key, None)
        self._readings.pop(key, None)
        self._drop_stacks(key)

    def _drop_stacks(self, key: JobKey) -> None:
        self._stack_asks.pop(key, None)
        self._stack_reads.pop(key, None)
        self._stacks.pop(key, None)

    def following(self) -> int:
        with self._lock:
            return len(self._sources)

    # -- the thread ---------------------------------------------------------------------------

    def due(self, now: float, limit: int) -> list[tuple[JobKey, ProgressSource]]:
        """Up to `limit` jobs whose read is due at `now`, the longest waiting first."""
        with self._lock:
            ready = sorted((t, k) for k, t in self._due.items() if t <= now)
            return [(k, self._sources[k]) for _, k in ready[:limit] if k in self._sources]

    def run(self, stop: threading.Event) -> None:
        """Read what is due, `qps` a second, until `stop` is set."""
        if self.qps <= 0:
            return
        tokens = 0.0
        last = self.clock()
        while not stop.wait(min(1.0, 1.0 / self.qps)):
            now = self.clock()
            tokens = min(max(1.0, self.qps), tokens + (now - last) * self.qps)
            last = now
            for key, source in self.stack_reads(int(tokens)):
                if stop.is_set():
                    return
                tokens -= 1
                self.read_stacks(key, source)
            for key, source in self.due(now, int(tokens)):
                if stop.is_set():
                    return
                tokens -= 1
                self.read(key, source)

    def read(self, key: JobKey, source: ProgressSource) -> None:
        """One read of one job's log; a newer report is kept and the job queued. A pod that
        is not the job's own any more (replaced, or another's of the same name) is not read:
        its next plan names the new one."""
        if not self.current(key, source):
            with self._lock:
                if key in self._sources:
                    self._due[key] = self.clock() + self.interval
            return
        with self._lock:
            since = self._since.get(key)
        path = CHILD_RESOURCES["Pod"].path(key.namespace, source.pod, "log")
        query = {
            "container": source.container,
            "timestamps": "true",
            "tailLines": TAIL_LINES,
            "limitBytes": LIMIT_BYTES,
            "sinceTime": since,
        }
        try:
            lines = [
                raw.decode(errors="replace").rstrip("\r")
                for raw in self.api.lines(path, query, timeout=10.0)
            ]
        except Exception as exc:  # an API error, a connection lost (urllib3's are no OSError)
            self._failed(key, exc)
            return
        found = newest_report(lines, source.pattern)
        read_at = self.wall()
        with self._lock:
            if key not in self._sources:
                return  # stopped meanwhile
            self._failures.pop(key, None)
            self._due[key] = self.clock() + self.interval
            if lines:
                self._since[key] = lines[-1].partition(" ")[0]
            before = self._readings.get(key)
            if before is not None:
                # Looked, and (unless below) found nothing newer: what a stall is judged by.
                before = self._readings[key] = dataclasses.replace(before, read_at=read_at)
            if found is None:
                return
            report, at = found
            reading = Reading(report, at, source.replica, read_at, read_at)
            if reading.same_report(before):
                return
            if before is not None and before.report.marked and not report.marked:
                return  # a program that reports leaves its free-form lines unread
            self._readings[key] = reading
        self.enqueue(key)

    def stack_reads(self, limit: int) -> list[tuple[JobKey, ProgressSource]]:
        """Up to `limit` pods whose stacks are asked for, taken from the asks."""
        taken: list[tuple[JobKey, ProgressSource]] = []
        with self._lock:
            for key, left in self._stack_asks.items():
                while left and len(taken) < limit:
                    taken.append((key, left.pop(0)))
        return taken

    def read_stacks(self, key: JobKey, source: ProgressSource) -> None:
        """One pod's last stack dump, or why there is none; the job queued once all are read."""
        if not self.current(key, source):
            found = "not read: the pod is not the job's any more\n"
        else:
            path = CHILD_RESOURCES["Pod"].path(key.namespace, source.pod, "log")
            query = {
                "container": source.container,
                "tailLines": STACK_TAIL_LINES,
                "limitBytes": STACK_LIMIT_BYTES,
            }
            try:
                text = b"\n".join(self.api.lines(path, query, timeout=10.0))
                dump = last_dump(text.decode(errors="replace"))
                found = dump or (
                    f"no faulthandler dump in the last {STACK_TAIL_LINES} lines of its log"
                    " (t9kjobs.progress.report() arms it; docs/python.md)\n"
                )
            except Exception as exc:  # an API error, a connection lost
                found = f"log not read: {str(exc)[:512]}\n"
        with self._lock:
            if key not in self._stack_reads:
                return  # no longer wanted
            taken_at, read = self._stack_reads[key]
            read[source.pod] = found
            if self._stack_asks.get(key):
                return
            self._stack_asks.pop(key, None)
            self._stacks[key] = Stacks(taken_at, dict(read))
        self.enqueue(key)

    def _failed(self, key: JobKey, exc: Exception) -> None:
        with self._lock:
            if key not in self._sources:
                return
            failures = self._failures.get(key, 0) + 1
            self._failures[key] = failures
            wait = min(MAX_BACKOFF, self.interval * 2 ** (failures - 1))
            self._due[key] = self.clock() + wait
        if failures == 1:
            log.debug("progress of %s/%s not read: %s", key.namespace, key.name, exc)
