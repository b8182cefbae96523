"""Hung jobs (`t9kjobs.planner.stall`, docs/lifecycle.md "Hung jobs"): the threshold, the
startup bound, no false stall when reads come late, the condition and its end, the rule
`Stalled -> RestartReplica`, and a restarted replica that starts over."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from t9kjobs.models import JobStatus, TrainingProgress
from t9kjobs.models.recovery import StallDetection
from t9kjobs.objects import ANNOTATION_INCARNATION, find_container
from t9kjobs.planner import ProgressSource, Reading
from t9kjobs.planner.progress_status import record_progress
from t9kjobs.planner.stall import judge, threshold
from t9kjobs.progress import Report
from tests.unit.conftest import NOW
from tests.unit.core.planner.sim import ReadSim
from tests.unit.core.planner.tinyjob import tiny_job

W0 = "tiny-worker-0"
SOURCE = ProgressSource(W0, "uid-0", "main", "worker-0")
STALL = StallDetection(floor_seconds=20, factor=3)


def _pod(created: int = -3600, phase: str = "Running") -> dict[str, Any]:
    stamp = (NOW + timedelta(seconds=created)).strftime("%Y-%m-%dT%H:%M:%SZ")
    return {"metadata": {"name": W0, "creationTimestamp": stamp}, "status": {"phase": phase}}


def _reading(printed: float, seen: float, read: float, step: int = 100) -> Reading:
    at = NOW + timedelta(seconds=printed)
    return Reading(
        Report(step, 1000, marked=True),
        at,
        "worker-0",
        NOW + timedelta(seconds=seen),
        NOW + timedelta(seconds=read),
    )


def _status(*intervals: float) -> JobStatus:
    return JobStatus(progress=TrainingProgress(step=100, recent_intervals=list(intervals)))


def test_threshold_is_factor_times_the_median_interval_with_a_floor() -> None:
    assert threshold(STALL, []) == (20.0, "floorSeconds 20s, no pace yet")
    assert threshold(STALL, [10, 11, 50]) == (33.0, "max(3 x 11s, 20s)")
    assert threshold(STALL, [1, 2, 3])[0] == 20.0
    assert threshold(StallDetection(), [21.0] * 16) == (600.0, "max(10 x 21s, 600s)")


def test_stalled_only_once_a_read_found_nothing_newer_for_the_threshold() -> None:
    now = NOW + timedelta(seconds=100)
    # Seen at 0, last read at 19: not yet (the threshold is 20); look again when it is due.
    verdict, recheck = judge(STALL, _status(), _reading(-2, 0, 19), SOURCE, _pod(), now)
    assert verdict is None and recheck == 5.0  # due at 20, passed: every T/4
    verdict, recheck = judge(STALL, _status(), _reading(-2, 0, 20), SOURCE, _pod(), now)
    assert verdict is not None and recheck is None
    assert verdict.pod == W0
    assert verdict.message == (
        "no step since 11:59:58 (step 100, read from worker-0) for 20s;"
        " threshold floorSeconds 20s, no pace yet"
    )


def test_no_false_stall_when_reads_come_late() -> None:
    """The operator has not read the log for a long time (many jobs, a slow API server): the
    clock has passed the threshold, but no read found the program quiet that long."""
    now = NOW + timedelta(hours=1)
    verdict, recheck = judge(STALL, _status(), _reading(-1, 0, 5), SOURCE, _pod(), now)
    assert verdict is None and recheck == 5.0
    # Seen late (read lag before the first read) counts from when it was seen, not printed.
    verdict, _ = judge(STALL, _status(), _reading(-500, 0, 10), SOURCE, _pod(), now)
    assert verdict is None


def test_before_the_first_report_of_a_pod_only_startup_seconds_apply() -> None:
    pod = _pod(created=0)  # the report read is older than the pod: a restarted replica
    reading = _reading(-50, -40, 3000)
    assert judge(STALL, _status(), reading, SOURCE, pod, NOW)[0] is None  # no startupSeconds
    startup = StallDetection(floor_seconds=20, startup_seconds=600)
    assert judge(startup, _status(), _reading(-50, -40, 599), SOURCE, pod, NOW)[0] is None
    verdict, _ = judge(startup, _status(), _reading(-50, -40, 600), SOURCE, pod, NOW)
    assert verdict is not None and "startupSeconds 600s" in verdict.message


def test_no_verdict_off_the_pod_read_or_a_pod_not_running() -> None:
    reading = _reading(-2, 0, 100)
    assert judge(None, _status(), reading, SOURCE, _pod(), NOW)[0] is None
    assert judge(STALL, _status(), reading, SOURCE, _pod(phase="Pending"), NOW)[0] is None
    going = _pod()
    going["metadata"]["deletionTimestamp"] = "2026-01-01T12:00:00Z"
    assert judge(STALL, _status(), reading, SOURCE, going, NOW)[0] is None
    other = ProgressSource("tiny-master-0", "u", "main", "master-0")
    assert judge(STALL, _status(), reading, other, _pod(), NOW)[0] is None


def test_intervals_are_kept_from_reports_that_advanced_16_at_most() -> None:
    status = JobStatus()
    for i in range(20):
        record_progress(status, _reading(10.0 * i, 0, 0, step=i))
    record_progress(status, _reading(300.0, 0, 0, step=19))  # no step made: no interval
    assert status.progress is not None and status.progress.recent_intervals == [10.0] * 16


def _job(rules: list[dict[str, Any]] | None = None, stacks: bool = True) -> dict[str, Any]:
    """A one-worker job judged Stalled after 20 s; `stacks`: captureStacks (test_stacks.py
    holds the action until they are kept)."""
    policy: dict[str, Any] = {"stall": {"floorSeconds": 20, "factor": 3, "captureStacks": stacks}}
    if rules is not None:
        policy["rules"] = rules
    return tiny_job(replicas=1, restart="Never", recoveryPolicy=policy)


def _running(manifest: dict[str, Any]) -> ReadSim:
    sim = ReadSim(manifest)
    sim.step()
    sim.set(W0, "Running")
    sim.pod(W0)["metadata"]["creationTimestamp"] = "2026-01-01T11:00:00Z"
    sim.step()
    return sim


def test_default_stalled_is_the_condition_only_and_a_newer_report_ends_it() -> None:
    sim = _running(_job())
    env = {e["name"]: e["value"] for e in find_container(sim.pod(W0))["env"]}  # type: ignore[index]
    assert env["T9KJOBS_STALL_SECONDS"] == "20"
    sim.reading = _reading(-2, 0, 25)
    p = sim.step()
    stalled = p.status.condition("Stalled")
    assert stalled is not None and (stalled.status, stalled.reason) == ("True", "NoProgress")
    assert [e.reason for e in p.events] == ["Stalled"]
    assert p.delete == () and p.status.reason == "Stalled"
    sim.reading = _reading(-2, 0, 40)
    assert sim.step().events == ()  # said once
    sim.now = NOW + timedelta(seconds=60)
    sim.reading = _reading(50, 55, 55, step=150)
    p = sim.step()
    stalled = p.status.condition("Stalled")
    assert stalled is not None and (stalled.status, stalled.reason) == ("False", "Progressing")
    assert p.status.reason is None


def test_rule_restart_replica_restarts_the_replica_read_once_and_it_starts_over() -> None:
    sim = _running(_job([{"onReasons": ["Stalled"], "action": "RestartReplica"}], stacks=False))
    sim.reading = _reading(-2, 0, 25)
    p = sim.step()
    assert [d.name for d in p.delete] == [W0]
    [restarting] = [e.message for e in p.events if e.reason == "Restarting"]
    assert restarting == (
        "tiny-worker-0 running; restart 1 (stalled; rule spec.recoveryPolicy.rules[0])"
    )
    assert p.status.tasks[0].replicas[0].restart_count == 1
    assert p.status.backoff_count == 1  # charged to the user, as RestartReplica is by default
    sim.now = NOW + timedelta(seconds=30)
    p = sim.step()  # the replacement, incarnation 1
    assert sim.pod(W0)["metadata"]["annotations"][ANNOTATION_INCARNATION] == "1"
    sim.set(W0, "Running")
    sim.pod(W0)["metadata"]["creationTimestamp"] = "2026-01-01T12:00:30Z"
    # The old report is older than the new pod: no stall before its first report.
    sim.reading = _reading(-2, 0, 3000)
    p = sim.step()
    assert p.delete == () and p.status.tasks[0].replicas[0].restart_count == 1


def test_a_restart_decided_but_not_applied_is_applied_once() -> None:
    """The status with the count was written, the operator died before the deletion."""
    sim = _running(_job([{"onReasons": ["Stalled"], "action": "RestartReplica"}], stacks=False))
    sim.reading = _reading(-2, 0, 25)
    p = sim.plan()
    sim.manifest["status"] = p.status.model_dump(by_alias=True, exclude_none=True)
    again = sim.plan()  # the pod (incarnation 0) is still there
    assert [d.name for d in again.delete] == [W0]
    assert again.status.tasks[0].replicas[0].restart_count == 1  # not counted twice
