"""Hung jobs: the `Stalled` verdict (`spec.recoveryPolicy.stall`).

A job that reports progress and then stops reporting is hung, or far slower than it was: a
rank blocked in a collective, a deadlock, a file system that stopped answering. The engine
cannot see the ranks; it sees the reports (`t9kjobs.planner.progress_status`), so that is what it
judges by.

* **Threshold** `T = max(factor x median(recentIntervals), floorSeconds)`: the intervals are
  those between successive reports that advanced (the program's clock, the last 16), the pace
  where it can be measured; reports are sparser than steps and reads sparser than reports, so a
  multiple of a step's time would fire between two healthy reports. No interval yet: the floor.
* **Clock.** Stalled iff `read_at - seen_at >= T` (`Reading`): the operator read the log and
  found nothing newer for that long, so a read that comes late never makes a false stall. The
  verdict comes within `T` and one read interval.
* **Startup.** Before the first report of the pod read (the newest report is older than the
  pod), only `startupSeconds` applies, counted from the pod's creation; absent, nothing
  (loading a model may take long). A restarted replica starts here again.
* Only while the job is Running, not in debug mode, with the pod read Running: a job that is
  not running has no progress to make.

The verdict names the replica read; the plan says it (condition `Stalled`, Warning Event) and
the recovery rules decide what it does (`t9kjobs.planner.replicas`: the failure `Stalled` of
that replica; by default only the condition). Pure: `now` and the reading's times are inputs.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from t9kjobs.models import JobStatus
from t9kjobs.models.recovery import StallDetection
from t9kjobs.planner.conditions import parse_time, set_condition
from t9kjobs.planner.types import Event, ProgressSource, Reading
from t9kjobs.vocabulary import Obj

__all__ = ["MAX_RECHECK_SECONDS", "Stall", "judge", "say", "stall_of", "threshold"]

# While a stall is due and not yet confirmed by a read, the plan looks again this often at most.
MAX_RECHECK_SECONDS = 30.0


@dataclass(frozen=True)
class Stall:
    """A stalled job: the pod read, and what the condition says."""

    pod: str
    message: str


def stall_of(spec: object) -> StallDetection | None:
    """The job's stall detection when it is on (a `recoveryPolicy`, `stall.enabled`)."""
    recovery = getattr(spec, "recovery_policy", None)
    stall = getattr(recovery, "stall", None)
    return stall if isinstance(stall, StallDetection) and stall.enabled else None


def threshold(stall: StallDetection, intervals: Sequence[float]) -> tuple[float, str]:
    """The seconds without a newer report that make a stall, and how they were found."""
    if not intervals:
        return float(stall.floor_seconds), f"floorSeconds {stall.floor_seconds}s, no pace yet"
    median = statistics.median(intervals)
    seconds = max(stall.factor * median, float(stall.floor_seconds))
    return seconds, f"max({stall.factor} x {_human(median)}, {stall.floor_seconds}s)"


def _human(seconds: float) -> str:
    if seconds < 120:
        return f"{seconds:.0f}s" if seconds >= 10 else f"{seconds:.1f}s"
    if seconds < 7200:
        return f"{seconds / 60:.0f}m"
    return f"{seconds / 3600:.1f}h"


def _recheck(due: datetime, now: datetime, seconds: float) -> float:
    """When to look again: at `due`, then every min(30 s, T/4) until a read confirms."""
    left = (due - now).total_seconds()
    return left if left > 0 else min(MAX_RECHECK_SECONDS, max(1.0, seconds / 4))


def judge(
    stall: StallDetection | None,
    status: JobStatus,
    reading: Reading | None,
    source: ProgressSource | None,
    pod: Obj | None,
    now: datetime,
) -> tuple[Stall | None, float | None]:
    """The verdict on a running job (module docstring), and when to look again (None: no need;
    a newer report queues the job anyway). `source`: where its progress is read; `pod`: that
    pod as observed."""
    if stall is None or reading is None or source is None or pod is None:
        return None, None
    if reading.seen_at is None or reading.read_at is None or reading.replica != source.replica:
        return None, None
    meta = pod["metadata"]
    if meta.get("deletionTimestamp") or (pod.get("status") or {}).get("phase") != "Running":
        return None, None
    created = parse_time(meta["creationTimestamp"]) if meta.get("creationTimestamp") else None
    if created is not None and reading.time < created:
        if stall.startup_seconds is None:
            return None, None
        seconds = float(stall.startup_seconds)
        if (reading.read_at - created).total_seconds() >= seconds:
            message = (
                f"no report since {source.pod} started at {created:%H:%M:%S} for"
                f" {_human((reading.read_at - created).total_seconds())}; threshold"
                f" startupSeconds {stall.startup_seconds}s"
            )
            return Stall(source.pod, message), None
        return None, _recheck(created + timedelta(seconds=seconds), now, seconds)
    intervals = status.progress.recent_intervals if status.progress is not None else []
    seconds, how = threshold(stall, intervals)
    quiet = (reading.read_at - reading.seen_at).total_seconds()
    if quiet >= seconds:
        message = (
            f"no step since {reading.time:%H:%M:%S} (step {reading.report.step}, read from"
            f" {reading.replica}) for {_human(quiet)}; threshold {how}"
        )
        return Stall(source.pod, message), None
    return None, _recheck(reading.seen_at + timedelta(seconds=seconds), now, seconds)


def say(
    status: JobStatus, verdict: Stall | None, ts: str, stacks: str | None = None
) -> list[Event]:
    """The `Stalled` condition: True with a Warning Event when the job stalls (once), False
    (`Progressing`) once a report newer than the verdict is recorded. `stacks`: the ConfigMap
    the ranks' stacks go to before any action (`t9kjobs.planner.stacks`), named in the Event."""
    current = status.condition("Stalled")
    stalled = current is not None and current.status == "True"
    if verdict is not None:
        if stalled:
            return []
        set_condition(status, "Stalled", True, "NoProgress", verdict.message, ts)
        kept = f"; the ranks' stacks go to ConfigMap {stacks}" if stacks else ""
        return [Event("Warning", "Stalled", verdict.message + kept)]
    progress = status.progress
    if (
        stalled
        and current is not None
        and current.last_transition_time is not None
        and progress is not None
        and progress.last_update_time is not None
        and parse_time(progress.last_update_time) > parse_time(current.last_transition_time)
    ):
        set_condition(status, "Stalled", False, "Progressing", f"step {progress.step} reported", ts)
    return []
