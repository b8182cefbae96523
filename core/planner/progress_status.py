"""A job's training progress in its status (`status.progress`).

The program reports it in its log (`t9kjobs.progress`); the controller reads the newest report
from the log of the pod `progress_source` names, at a bounded rate, and hands it to the next
plan as a `Reading`. The plan writes it here: the step, the total, the percent, the metrics,
and the time left, estimated from the pace between this report and the one the status held.
The status is the only memory: an operator that restarts estimates from what it finds there.

A job that finished keeps its progress as it was (a failed job's is frozen at its last
report); one that Succeeded is at 100 percent (its step at its total when one was reported),
whether or not its final report was read before its pods went.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime

from t9kjobs.models import Job, JobStatus, TrainingProgress
from t9kjobs.models.status import MAX_RECENT_INTERVALS
from t9kjobs.objects import DesiredPod, Obj, deciding_replica, replica_id
from t9kjobs.planner.conditions import parse_time, rfc3339
from t9kjobs.planner.types import ProgressSource, Reading
from t9kjobs.progress import ANNOTATION_PROGRESS_PATTERN, Report

__all__ = ["MAX_REMAINING_SECONDS", "complete_progress", "progress_source", "record_progress"]

# The longest time left the status says (ten years): an estimate from a crawl of a step a day
# towards a total of 10**18 is no figure, and the API's integer is 64 bits.
MAX_REMAINING_SECONDS = 10 * 365 * 24 * 3600


def progress_source(
    job: Job, pods: Sequence[DesiredPod], existing: Mapping[str, Obj]
) -> ProgressSource | None:
    """The deciding replica's training container, in the pod of it the job has (`existing`:
    the job's own pods, by name); None while that pod does not exist."""
    by_id = {replica_id(job.name, p.name): p for p in pods}
    deciding = deciding_replica(list(by_id))
    if deciding is None:
        return None
    pod = by_id[deciding]
    uid = (existing.get(pod.name) or {}).get("metadata", {}).get("uid")
    if not uid:
        return None
    pattern = job.metadata.annotations.get(ANNOTATION_PROGRESS_PATTERN)
    return ProgressSource(pod.name, str(uid), pod.training_container, deciding, pattern or None)


def _remaining(before: TrainingProgress | None, report: Report, at: datetime) -> int | None:
    """Seconds left at the pace since the previous report, at most `MAX_REMAINING_SECONDS`."""
    left = _estimate(before, report, at)
    return None if left is None else min(MAX_REMAINING_SECONDS, max(0, left))


def _estimate(before: TrainingProgress | None, report: Report, at: datetime) -> int | None:
    """Seconds left at the pace since the previous report; the previous estimate when no step
    was made; None without a total or a previous report."""
    if report.total is None or before is None or before.last_update_time is None:
        return None
    if before.step is None or report.step < before.step:
        return None  # a new run of the program (a restart): no pace yet
    if report.step == before.step:
        return before.remaining_seconds
    seconds = (at - parse_time(before.last_update_time)).total_seconds()
    if seconds <= 0:
        return before.remaining_seconds
    pace = (report.step - before.step) / seconds
    return max(0, round((report.total - report.step) / pace))


def record_progress(status: JobStatus, reading: Reading | None) -> None:
    """Write a reading newer than the status's into it (an older or equal one changes nothing)."""
    if reading is None:
        return
    before = status.progress
    stamp = rfc3339(reading.time)
    last = before.last_update_time if before is not None else None
    if last is not None and parse_time(last) > parse_time(stamp):
        return
    report = reading.report
    intervals = list(before.recent_intervals) if before is not None else []
    if before is not None and last is not None and before.step is not None:
        seconds = (reading.time - parse_time(last)).total_seconds()
        if report.step > before.step and seconds > 0:
            # The pace a stall is judged by (`t9kjobs.planner.stall`): reports that advanced.
            intervals = [*intervals, round(seconds, 3)][-MAX_RECENT_INTERVALS:]
    status.progress = TrainingProgress(
        step=report.step,
        total_steps=report.total,
        percent=report.percent,
        remaining_seconds=_remaining(before, report, reading.time),
        metrics=dict(report.metrics),
        replica=reading.replica,
        last_update_time=stamp,
        recent_intervals=intervals,
    )


def complete_progress(status: JobStatus) -> None:
    """A job that Succeeded ran to its end: 100 percent, nothing left."""
    progress = status.progress
    if progress is None:
        return
    progress.percent = 100.0
    progress.remaining_seconds = 0
    if progress.total_steps is not None:
        progress.step = progress.total_steps
